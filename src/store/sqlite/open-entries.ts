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

/**
 * A growing map of entries, shared by the views that extend one another (see OpenEntrySet.with):
 * `tip` is the last seq the newest of them covers.
 */
interface Lineage {
  readonly map: Map<string, TreeEntry>;
  tip: number;
}

/**
 * The entries of a session's open rows up to a seq. A step's append extends the set of the step
 * before it: when that set is the newest of its lineage, the new one shares its map (the map gets
 * the new entries, which the older sets do not see: their seq is past theirs), so an append costs
 * what it adds, not what the turn holds so far. A set that is no longer the newest (a write
 * extended it and rolled back) is copied before it is extended.
 */
export class OpenEntrySet {
  private readonly lineage: Lineage;
  /** The last seq whose entries this set holds. */
  private readonly upTo: number;

  constructor(lineage: Lineage, upTo: number) {
    this.lineage = lineage;
    this.upTo = upTo;
  }

  /** The entries of `map`, the open rows' up to `upTo`, as a new lineage. */
  static of(map: Map<string, TreeEntry>, upTo: number): OpenEntrySet {
    return new OpenEntrySet({ map, tip: upTo }, upTo);
  }

  get(id: string | null): TreeEntry | undefined {
    if (id === null) return undefined;
    const e = this.lineage.map.get(id);
    return e !== undefined && e.seq <= this.upTo ? e : undefined;
  }

  has(id: string): boolean {
    return this.get(id) !== undefined;
  }

  *[Symbol.iterator](): IterableIterator<[string, TreeEntry]> {
    for (const [id, e] of this.lineage.map) if (e.seq <= this.upTo) yield [id, e];
  }

  /** This set and `added` (entries after its seq, up to `upTo`). */
  with(added: ReadonlyMap<string, TreeEntry>, upTo: number): OpenEntrySet {
    let lineage = this.lineage;
    if (lineage.tip !== this.upTo) lineage = { map: new Map(this), tip: this.upTo };
    for (const [id, e] of added) lineage.map.set(id, e);
    lineage.tip = upTo;
    return new OpenEntrySet(lineage, upTo);
  }
}

/** The entries of one session's open rows, as they were when its head was (lastSeq, sealedSeq). */
interface OpenState {
  readonly lastSeq: number;
  readonly sealedSeq: number;
  readonly entries: OpenEntrySet;
}

/** No entries; never the newest of its (empty) lineage, so extending it starts a new one. */
export const NO_ENTRIES = new OpenEntrySet({ map: new Map(), tip: -1 }, -2);

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

  constructor(
    transaction: () => number | undefined,
    read: (sessionId: string, sealedSeq: number) => Map<string, TreeEntry>,
  ) {
    this.transaction = transaction;
    this.read = read;
  }

  /** The entries of the open rows of a session whose head is `head` (read from them when not kept). */
  of(sessionId: string, head: OpenHead): OpenEntrySet {
    if (head.last_seq === head.sealed_seq) return NO_ENTRIES;
    const transaction = this.transaction();
    const state =
      (transaction !== undefined && this.written?.transaction === transaction
        ? this.written.states.get(sessionId)
        : undefined) ?? this.states.get(sessionId);
    if (state && state.lastSeq === head.last_seq && state.sealedSeq === head.sealed_seq) return state.entries;
    return OpenEntrySet.of(this.read(sessionId, head.sealed_seq), head.last_seq);
  }

  /** What an append in the write transaction now open left the session with (kept once it commits, see `keep`). */
  wrote(sessionId: string, lastSeq: number, sealedSeq: number, entries: OpenEntrySet): void {
    const transaction = this.transaction();
    if (transaction === undefined) return;
    if (this.written?.transaction !== transaction) this.written = { transaction, states: new Map() };
    this.written.states.set(sessionId, { lastSeq, sealedSeq, entries });
  }

  /** What a committed write left the session with. Called only once it committed (see OperationHooks.whenCommitted). */
  keep(sessionId: string, lastSeq: number, sealedSeq: number, entries: OpenEntrySet): void {
    this.states.delete(sessionId);
    if (lastSeq === sealedSeq) return;
    this.states.set(sessionId, { lastSeq, sealedSeq, entries });
    if (this.states.size > KEPT_SESSIONS) this.states.delete(this.states.keys().next().value!);
  }

  forget(sessionId: string): void {
    this.states.delete(sessionId);
  }
}
