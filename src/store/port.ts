/**
 * The storage port: everything durable goes through this async interface, whatever the backend
 * (embedded SQLite now, PostgreSQL later). Backends pass one contract suite (test/store/contract.ts).
 *
 * Events are append-only: the port has no way to change or remove one.
 */
export type JsonObject = { [key: string]: unknown };

export interface SessionRecord {
  id: string;
  createdAt: number;
  title: string | null;
  metadata: JsonObject;
  agent: string | null;
  /** The last event's seq (0 for none): seqs are 1..lastSeq with no gap. */
  lastSeq: number;
  /** The current leaf of the conversation tree. */
  leafId: string | null;
  origin: { sessionId: string; entryId: string } | null;
  archivedAt: number | null;
}

export interface NewSession {
  id: string;
  createdAt: number;
  title?: string | null;
  metadata?: JsonObject;
  agent?: string | null;
  origin?: { sessionId: string; entryId: string } | null;
}

export interface EventDraft {
  id: string;
  type: string;
  v: number;
  time: number;
  runId?: string;
  turn?: number;
  step?: number;
  /**
   * A conversational entry: it joins the tree under `parentId` (by default the current leaf,
   * read inside the appending transaction) and becomes the new leaf.
   */
  entry: boolean;
  parentId?: string | null;
  /** For a non-entry event that moves the leaf (a branch switch): the new leaf. */
  leaf?: string | null;
  /** Readers that do not know this type may skip it. */
  ignorable?: boolean;
  data: unknown;
}

export interface StoredEvent {
  id: string;
  sessionId: string;
  seq: number;
  type: string;
  v: number;
  time: number;
  runId?: string;
  turn?: number;
  step?: number;
  entry: boolean;
  parentId?: string;
  ignorable: boolean;
  data: unknown;
}

export interface Snapshot {
  sessionId: string;
  projection: string;
  version: number;
  /** The state covers exactly the events with seq <= asOfSeq. */
  asOfSeq: number;
  /** For projections of the current path: the leaf the state was folded up to. */
  leafId: string | null;
  state: unknown;
}

export interface SessionPage {
  /** Pass as `after` for the next page. */
  after?: string;
  limit: number;
  includeArchived?: boolean;
}

export interface ReadEventsOptions {
  afterSeq?: number;
  /** Stop at this seq (inclusive). */
  untilSeq?: number;
  limit?: number;
}

/** Every data operation. Inside `transaction` they all commit or roll back together. */
export interface StoreOps {
  createSession(s: NewSession): Promise<SessionRecord>;
  getSession(id: string): Promise<SessionRecord | undefined>;
  listSessions(page: SessionPage): Promise<SessionRecord[]>;
  updateSession(id: string, patch: { title?: string | null; metadata?: JsonObject; archivedAt?: number | null }): Promise<void>;

  /**
   * Appends atomically: allocates the next seqs, threads entries under the current leaf and moves
   * the leaf, all inside one transaction. Refuses (SeqConflictError) if `expectLastSeq` is given and
   * the session has moved on.
   */
  append(sessionId: string, drafts: readonly EventDraft[], options?: { expectLastSeq?: number }): Promise<StoredEvent[]>;
  readEvents(sessionId: string, options?: ReadEventsOptions): Promise<StoredEvent[]>;
  getEvents(sessionId: string, ids: readonly string[]): Promise<StoredEvent[]>;
  /** The entry `fromId` and its ancestors, nearest first, at most `limit`. */
  ancestors(sessionId: string, fromId: string, limit: number): Promise<StoredEvent[]>;

  /** Content-addressed: putting a hash that exists is a no-op. */
  putBlobs(blobs: ReadonlyArray<{ hash: string; data: string }>): Promise<void>;
  getBlobs(hashes: readonly string[]): Promise<Map<string, string>>;

  putSnapshot(s: Snapshot): Promise<void>;
  getSnapshot(sessionId: string, projection: string, version: number): Promise<Snapshot | undefined>;
}

export interface Store extends StoreOps {
  readonly kind: string;
  /** Runs `fn` as one unit of work: everything it does through `tx` commits together or not at all. */
  transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export class StoreError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.code = code;
  }
}

export class NotFoundError extends StoreError {
  constructor(what: string, id: string) {
    super('not_found', `${what} ${id} does not exist`);
    this.name = 'NotFoundError';
  }
}

export class SeqConflictError extends StoreError {
  constructor(sessionId: string, expected: number, actual: number) {
    super('seq_conflict', `session ${sessionId} is at seq ${actual}, not ${expected}`);
    this.name = 'SeqConflictError';
  }
}

export class SchemaVersionError extends StoreError {
  constructor(message: string) {
    super('schema_version', message);
    this.name = 'SchemaVersionError';
  }
}
