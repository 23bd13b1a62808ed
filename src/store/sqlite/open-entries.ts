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
  /** Reads the entries of a session's open rows, those after `sealedSeq`. */
  private readonly read: (sessionId: string, sealedSeq: number) => Map<string, TreeEntry>;

  constructor(read: (sessionId: string, sealedSeq: number) => Map<string, TreeEntry>) {
    this.read = read;
  }

  /** The entries of the open rows of a session whose head is `head` (read from them when not kept). */
  of(sessionId: string, head: OpenHead): ReadonlyMap<string, TreeEntry> {
    if (head.last_seq === head.sealed_seq) return NO_ENTRIES;
    const kept = this.states.get(sessionId);
    if (kept && kept.lastSeq === head.last_seq && kept.sealedSeq === head.sealed_seq) return kept.entries;
    return this.read(sessionId, head.sealed_seq);
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
