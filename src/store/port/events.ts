/** A session's events (its append-only log and tree), the blobs its events refer to, and projection snapshots. */
import type { BlobInfo, NewBlob } from './blobs.ts';
import type { EventEnvelope, Sequenced } from './event-envelope.ts';

export type { EventEnvelope, Sequenced } from './event-envelope.ts';

/** An event before the store gives it its seq: the envelope, and how it joins the session's tree. */
export interface EventDraft extends Omit<EventEnvelope, 'parentId'> {
  /**
   * For an entry: it joins the tree under `parentId` (by default the current leaf, read inside
   * the appending transaction) and becomes the new leaf; null: a new root.
   */
  parentId?: string | null;
  /** For a non-entry event that moves the leaf (a branch switch): the new leaf. */
  leaf?: string | null;
  /** Readers that do not know this type may skip it. */
  ignorable?: boolean;
  /**
   * The id was generated for this draft (a fresh UUIDv7, see `newId`), not given by a caller: no
   * stored event can have it, so a store may skip looking it up before it appends. A caller's id
   * is always looked up (an append of an entry whose id the session has is refused).
   */
  minted?: boolean;
  data: unknown;
}

/** An event as stored: the envelope with its session and seq. */
export interface StoredEvent extends EventEnvelope, Sequenced {
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

export interface ReadEventsOptions {
  afterSeq?: number;
  /** Only the events of this run. */
  runId?: string;
  /** Stop at this seq (inclusive). */
  untilSeq?: number;
  limit?: number;
}

export interface AppendOptions {
  expectLastSeq?: number;
  /** Append only while this run's fencing token is still `token` (the writer still holds it). */
  fence?: { runId: string; token: number };
  /**
   * Blobs the events refer to, put in the append's own transaction before its events (as
   * putBlobs does): an append with its blobs is one write, not a transaction of two.
   */
  blobs?: readonly NewBlob[];
  /**
   * In a transaction: the caller does not go on with it after a refusal of this append (the
   * transaction fails with it). The store need not keep the transaction usable after one, so it
   * may send what the transaction does next without waiting for the append's answer (PostgreSQL:
   * no savepoint, and the next statements travel in the same round trip).
   */
  abortsTransaction?: boolean;
}

/** The events namespace of the port (`store.events`): appends are the only write of the log. */
export interface EventOps {
  /**
   * Appends atomically: allocates the next seqs, threads entries under the current leaf and moves
   * the leaf, all inside one transaction. Refuses (SeqConflictError) if `expectLastSeq` is given and
   * the session has moved on.
   */
  append(sessionId: string, drafts: readonly EventDraft[], options?: AppendOptions): Promise<StoredEvent[]>;
  read(sessionId: string, options?: ReadEventsOptions): Promise<StoredEvent[]>;
  /**
   * The entries (events with `entry: true`) of this session with these ids, skipping unknown ids:
   * entries are what the tree and the API address by id. Other events are read by seq.
   */
  entries(sessionId: string, ids: readonly string[]): Promise<StoredEvent[]>;
  /** The entry `fromId` and its ancestors, nearest first, at most `limit`. */
  ancestors(sessionId: string, fromId: string, limit: number): Promise<StoredEvent[]>;
  /**
   * A unit of work (a turn) ended here: the store may re-encode the session's log so far for
   * compact storage (the SQLite store seals its open rows, ADR-0009). Nothing that can be read
   * changes: the same events, seqs, ids and tree. NotFoundError for an unknown session.
   */
  seal(sessionId: string): Promise<void>;

  /** Content-addressed: putting a hash that exists is a no-op. */
  putBlobs(blobs: readonly NewBlob[]): Promise<void>;
  getBlobs(hashes: readonly string[]): Promise<Map<string, string>>;
  /** Size and media type of stored blobs, without their text; missing hashes are absent. */
  blobInfo(hashes: readonly string[]): Promise<Map<string, BlobInfo>>;
  /** The first `chars` characters of a blob's text (all of it when shorter), read without the rest; undefined when missing. */
  blobHead(hash: string, chars: number): Promise<string | undefined>;
  /** Whether a session of `tenant` (erased ones aside) refers to the blob: who may read it by hash. */
  blobTenant(hash: string, tenant: string): Promise<boolean>;

  putSnapshot(s: Snapshot): Promise<void>;
  getSnapshot(sessionId: string, projection: string, version: number): Promise<Snapshot | undefined>;
}
