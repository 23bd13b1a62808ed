/**
 * The way in and out of the session log's storage: a new event becomes a draft (validated, large
 * fields moved to blobs, the envelope filled in) and a stored event becomes a decoded one (blobs
 * inflated, upcast to the current version). SessionLog (log.ts) appends and reads through it.
 */
import { newId, type ContentBlob, type LargePayloadPolicy, type PayloadModelView } from '../core/index.ts';
import type { BlobStore, EventDraft, NewBlob, StoreOps, StoredEvent } from '../store/index.ts';
import { databaseBlobs, layeredBlobs } from './blob-store.ts';
import { blobRefsOf, extractBlobs, inflateBlobs } from './blobs.ts';
import { jsonBytesAtMost } from '../core/json-size-bound.ts';
import type { EventRegistry, SessionEvent, SessionEventDataMap, SessionEventType } from './event-types.ts';
import {
  EventTooLargeError,
  holdsLargeRefs,
  LARGE_PAYLOAD_FIELDS,
  offloadPayloads,
  restorePayloads,
} from './large-payloads.ts';

/**
 * An event to append; the log assigns id (unless given), seq, parent and time. A loop event
 * (`TurnEvent`) is one as it is: its run is given by the append (see SessionLog.append).
 */
export type NewEvent = {
  [K in SessionEventType]: {
    type: K;
    data: SessionEventDataMap[K];
    id?: string;
    time?: number;
    runId?: string;
    turn?: number;
    step?: number;
    /** For entries: attach under this entry instead of the current leaf (null: a new root). */
    parentId?: string | null;
    /** Content the data refers to by hash: stored (once, content-addressed) in the same transaction. */
    blobs?: readonly ContentBlob[];
  };
}[SessionEventType];

export interface Encoded {
  draft: EventDraft;
  /** The blobs to store with the event: its large fields' JSON, and its large payloads unless they go to another store. */
  blobs: NewBlob[];
  /** Large payloads for `largeStore`, stored before the event (none without one: they are in `blobs`). */
  largeBlobs: NewBlob[];
  /** The data as validated, before its large fields went to blobs: what a reader gets back. */
  data: unknown;
}

/**
 * Event types whose data may carry content of any size (the model's, a tool's, a person's): their
 * size is checked even when Keel's own code built them. Other events from outside are checked too.
 */
const CONTENT_TYPES = new Set([
  'user/message',
  'assistant/message',
  'tool/call',
  'tool/result',
  'tool/approval',
  'tool/decision',
  'user/question',
  'user/answer',
  'compaction',
  'branch/summary',
]);

const NO_BLOBS: NewBlob[] = [];

export class LogCodec {
  readonly registry: EventRegistry;
  /** Large payloads: the threshold, the event bound, the model's view (ADR-0040). */
  readonly payloads: LargePayloadPolicy;
  /** Where large payloads go when not in the database (an archive store); undefined: the database. */
  readonly largeStore: BlobStore | undefined;

  constructor(registry: EventRegistry, payloads: LargePayloadPolicy, largeStore?: BlobStore) {
    this.registry = registry;
    this.payloads = payloads;
    this.largeStore = largeStore;
  }

  /** Where large payloads are read from: the database through `ops`, behind the store configured instead if any. */
  blobsFor(ops: StoreOps): BlobStore {
    return this.largeStore ? layeredBlobs(this.largeStore, databaseBlobs(ops)) : databaseBlobs(ops);
  }

  /**
   * Turns a new event into a storage draft (validated, large fields moved to blobs). `trusted`
   * events were built by Keel's own typed code (the loop's events): their schema check is skipped
   * on the hot path; everything that comes from outside (API, import, hooks) is validated. `runId`:
   * the run of an event that names none.
   */
  encode(e: NewEvent, trusted = false, runId?: string): Encoded {
    const { def, data } = trusted ? this.registry.trusted(e.type, e.data) : this.registry.validate(e.type, e.data);
    let source = data as Record<string, unknown>;
    let fields = def.blobFields;
    let large = NO_BLOBS;
    const field = LARGE_PAYLOAD_FIELDS[e.type];
    if (field !== undefined) {
      const off = offloadPayloads(e.type, source, this.payloads);
      if (off.blobs.length > 0) {
        source = off.data;
        large = off.blobs;
        // The field that holds the references stays in the event row: the store indexes the
        // hashes it finds there (blob_refs), for erasure and for who may read them.
        fields = fields?.filter((f) => f !== field);
      }
    }
    const extracted = extractBlobs(source, fields);
    const stored = extracted.data;
    let blobs: NewBlob[] = extracted.blobs;
    if (!trusted || CONTENT_TYPES.has(e.type)) this.checkSize(e.type, stored, blobs);
    if (large.length > 0 && !this.largeStore) {
      blobs = blobs.concat(large);
      large = NO_BLOBS;
    }
    // Assigned in key order, without spreads of conditional objects (several events per step).
    // An id made here cannot be in the log: the store need not look it up (one lookup an entry).
    // Every draft has the same keys: an append's loop sees one shape.
    const minted = e.id === undefined;
    const draft: EventDraft = {
      id: minted ? newId() : e.id!,
      type: e.type,
      v: def.v,
      time: e.time ?? Date.now(),
      entry: def.entry,
      minted,
      data: stored,
    };
    const run = e.runId ?? runId;
    if (run !== undefined) draft.runId = run;
    if (e.turn !== undefined) draft.turn = e.turn;
    if (e.step !== undefined) draft.step = e.step;
    if (def.entry && e.parentId !== undefined) draft.parentId = e.parentId;
    if (def.leafOf) draft.leaf = (def.leafOf as (d: unknown) => string | null)(data);
    return { draft, blobs, largeBlobs: large, data };
  }

  /** Refuses an event over the bound once its large payloads are apart (its row and its small blobs). */
  private checkSize(type: string, stored: unknown, blobs: readonly NewBlob[]): void {
    const limit = this.payloads.maxEventBytes;
    // Most events are far under the bound: its upper bound clears them without serializing them.
    let bound = jsonBytesAtMost(stored, limit);
    for (const b of blobs) bound += 3 * b.data.length;
    if (bound <= limit) return;
    const json = JSON.stringify(stored) ?? '';
    // UTF-8 takes at most 3 bytes per UTF-16 unit: short texts need no count.
    let bytes = json.length * 3 <= limit ? json.length : Buffer.byteLength(json);
    for (const b of blobs) bytes += b.data.length * 3 <= limit ? b.data.length : Buffer.byteLength(b.data);
    if (bytes > limit) {
      bytes = Buffer.byteLength(json);
      for (const b of blobs) bytes += Buffer.byteLength(b.data);
      if (bytes > limit) throw new EventTooLargeError(type, 'event', bytes, limit);
    }
  }

  /**
   * Decodes stored events: blobs inflated, upcast to current versions (and then validated);
   * ignorable unknowns skipped. Data at the current version was validated when it was written;
   * `validate` checks it again (the replay check does).
   */
  async decode(
    stored: readonly StoredEvent[],
    ops: StoreOps,
    options: { validate?: boolean; payloads?: PayloadModelView } = {},
  ): Promise<SessionEvent[]> {
    const hashes = new Set<string>();
    for (const s of stored) for (const h of blobRefsOf(s.data)) hashes.add(h);
    const blobs = hashes.size > 0 ? await ops.events.getBlobs([...hashes]) : new Map<string, string>();
    let datas: unknown[] = [];
    let large = false;
    for (const s of stored) {
      const data = inflateBlobs(s.data, blobs);
      datas.push(data);
      if (!large && holdsLargeRefs(s.type, data)) large = true;
    }
    if (large)
      datas = await restorePayloads(
        stored.map((s, i) => ({ type: s.type, data: datas[i] })),
        options.payloads ?? 'whole',
        this.blobsFor(ops),
        this.payloads.thresholdBytes,
      );
    const out: SessionEvent[] = [];
    for (let i = 0; i < stored.length; i++) {
      const s = stored[i]!;
      const up = this.registry.upcast(
        { type: s.type, v: s.v, seq: s.seq, ignorable: s.ignorable, data: datas[i] },
        { validate: options.validate ?? false },
      );
      if (up) out.push(sessionEvent(s, up.v, up.data));
    }
    return out;
  }
}

/** A stored event as readers get it, with `v` and `data` given (assigned in key order, no spreads: several events per step). */
export function sessionEvent(s: StoredEvent, v: number, data: unknown): SessionEvent {
  const e = { id: s.id, sessionId: s.sessionId, seq: s.seq, type: s.type, v, time: s.time } as SessionEvent & {
    runId?: string;
    turn?: number;
    step?: number;
    parentId?: string;
  };
  if (s.runId !== undefined) e.runId = s.runId;
  if (s.turn !== undefined) e.turn = s.turn;
  if (s.step !== undefined) e.step = s.step;
  e.entry = s.entry;
  if (s.parentId !== undefined) e.parentId = s.parentId;
  (e as { data: unknown }).data = data;
  return e;
}
