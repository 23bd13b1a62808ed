/** An entry of the conversation tree: its seq, and its parent's id (null at the root). */
export interface TreeEntry {
  readonly seq: number;
  readonly parent: string | null;
}

/** A session's head, as the sessions row has it: which open rows there are. */
export interface OpenHead {
  last_seq: number;
  sealed_seq: number;
}

/** The entries of one session's open rows, as they were when its head was (lastSeq, sealedSeq). */
interface OpenState {
  readonly lastSeq: number;
  readonly sealedSeq: number;
  readonly entries: ReadonlyMap<string, TreeEntry>;
}

export const NO_ENTRIES: ReadonlyMap<string, TreeEntry> = new Map();

/** Sessions whose open entries are kept; the least recently used beyond it are read again when needed. */
const KEPT_SESSIONS = 256;

/**
 * The entries of each session's open rows (ADR-0022). The `entries` table indexes an entry once
 * its turn is sealed, in one statement for the turn: a step's commit writes no row of it. Until
 * then an entry is found among its session's open rows, kept here from this connection's own
 * commits. A kept state serves only while the session's head is the one it was kept at; otherwise
 * (another connection appended or sealed, or the state was forgotten) the open rows are read again.
 */
export class OpenEntries {
  private readonly states = new Map<string, OpenState>();
  /**
   * What the appends of the write transaction now open wrote (the seal in the same commit as a
   * turn's last step needs them), until it ends: its number tells. A write undone by a rollback
   * to a savepoint leaves its head behind, so its state no longer matches the head.
   */
  private written: { transaction: number; states: Map<string, OpenState> } | undefined;
  /** The number of the write transaction open on the connection; undefined outside one. */
  private readonly transaction: () => number | undefined;
  /** Reads the entries of a session's open rows, those after `sealedSeq`. */
  private readonly read: (sessionId: string, sealedSeq: number) => Map<string, TreeEntry>;

  constructor(transaction: () => number | undefined, read: (sessionId: string, sealedSeq: number) => Map<string, TreeEntry>) {
    this.transaction = transaction;
    this.read = read;
  }

  /** The entries of the open rows of a session whose head is `head` (read from them when not kept). */
  of(sessionId: string, head: OpenHead): ReadonlyMap<string, TreeEntry> {
    if (head.last_seq === head.sealed_seq) return NO_ENTRIES;
    const transaction = this.transaction();
    const state = (transaction !== undefined && this.written?.transaction === transaction ? this.written.states.get(sessionId) : undefined) ?? this.states.get(sessionId);
    if (state && state.lastSeq === head.last_seq && state.sealedSeq === head.sealed_seq) return state.entries;
    return this.read(sessionId, head.sealed_seq);
  }

  /** What an append in the write transaction now open left the session with (kept once it commits, see `keep`). */
  wrote(sessionId: string, lastSeq: number, sealedSeq: number, entries: ReadonlyMap<string, TreeEntry>): void {
    const transaction = this.transaction();
    if (transaction === undefined) return;
    if (this.written?.transaction !== transaction) this.written = { transaction, states: new Map() };
    this.written.states.set(sessionId, { lastSeq, sealedSeq, entries });
  }

  /** What a committed write left the session with. Called only once it committed (see OperationHooks.whenCommitted). */
  keep(sessionId: string, lastSeq: number, sealedSeq: number, entries: ReadonlyMap<string, TreeEntry>): void {
    this.states.delete(sessionId);
    if (lastSeq === sealedSeq) return;
    this.states.set(sessionId, { lastSeq, sealedSeq, entries });
    if (this.states.size > KEPT_SESSIONS) this.states.delete(this.states.keys().next().value!);
  }

  forget(sessionId: string): void {
    this.states.delete(sessionId);
  }
}
