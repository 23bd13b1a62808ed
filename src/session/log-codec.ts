/**
 * The way in and out of the session log's storage: a new event becomes a draft (validated, large
 * fields moved to blobs, the envelope filled in) and a stored event becomes a decoded one (blobs
 * inflated, upcast to the current version). SessionLog (log.ts) appends and reads through it.
 */
import { newId, type ContentBlob } from '../core/index.ts';
import type { EventDraft, StoreOps, StoredEvent } from '../store/index.ts';
import { blobRefsOf, extractBlobs, inflateBlobs } from './blobs.ts';
import type { EventRegistry, SessionEvent, SessionEventDataMap, SessionEventType } from './event-types.ts';

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
  blobs: Array<{ hash: string; data: string }>;
  /** The data as validated, before its large fields went to blobs: what a reader gets back. */
  data: unknown;
}

export class LogCodec {
  readonly registry: EventRegistry;

  constructor(registry: EventRegistry) {
    this.registry = registry;
  }

  /**
   * Turns a new event into a storage draft (validated, large fields moved to blobs). `trusted`
   * events were built by Keel's own typed code (the loop's events): their schema check is skipped
   * on the hot path; everything that comes from outside (API, import, hooks) is validated. `runId`:
   * the run of an event that names none.
   */
  encode(e: NewEvent, trusted = false, runId?: string): Encoded {
    const { def, data } = trusted ? this.registry.trusted(e.type, e.data) : this.registry.validate(e.type, e.data);
    const { data: stored, blobs } = extractBlobs(data as Record<string, unknown>, def.blobFields);
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
    return { draft, blobs, data };
  }

  /**
   * Decodes stored events: blobs inflated, upcast to current versions (and then validated);
   * ignorable unknowns skipped. Data at the current version was validated when it was written;
   * `validate` checks it again (the replay check does).
   */
  async decode(
    stored: readonly StoredEvent[],
    ops: StoreOps,
    options: { validate?: boolean } = {},
  ): Promise<SessionEvent[]> {
    const hashes = new Set<string>();
    for (const s of stored) for (const h of blobRefsOf(s.data)) hashes.add(h);
    const blobs = hashes.size > 0 ? await ops.events.getBlobs([...hashes]) : new Map<string, string>();
    const out: SessionEvent[] = [];
    for (const s of stored) {
      const up = this.registry.upcast(
        { type: s.type, v: s.v, seq: s.seq, ignorable: s.ignorable, data: inflateBlobs(s.data, blobs) },
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
