/**
 * How the SQLite store encodes the rows of its log (ADR-0009). A row holds consecutive events of
 * one session as a JSON array of compact event objects (the row gives the session and the first
 * seq; each event is one seq more than the one before):
 *
 * - codec 0, `open`: the array as JSON text. What an append writes: the hot path pays no
 *   compression.
 * - codec 1, `sealed`: the same array, compressed with raw DEFLATE primed with a fixed dictionary
 *   of what Keel's events look like. Sealing replaces a session's open rows with one sealed row
 *   holding the same events: consecutive steps share their keys, ids and shapes, so a run's events
 *   sealed together take a fraction of their size as separate rows.
 *
 * A codec is a format forever: changing the dictionary or the layout is a new codec number, and
 * the old ones stay readable.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { StoreError, type StoredEvent } from '../port.ts';
import { EVENT_BATCH_DICTIONARY_1 } from './event-batch-dictionary.ts';

export const OPEN_CODEC = 0;
export const SEALED_CODEC = 1;

const DICTIONARY_1 = Buffer.from(EVENT_BATCH_DICTIONARY_1, 'utf8');

/** One event in a row. */
interface CompactEvent {
  /** id */
  i: string;
  /** type */
  t: string;
  v: number;
  /** time */
  m: number;
  /** run id */
  r?: string;
  /** turn */
  u?: number;
  /** step */
  s?: number;
  /** entry: 1 */
  e?: 1;
  /** parent id (entries) */
  p?: string;
  /** ignorable: 1 */
  g?: 1;
  /** data */
  d: unknown;
}

function compact(e: StoredEvent): CompactEvent {
  const c = { i: e.id, t: e.type, v: e.v, m: e.time } as CompactEvent;
  if (e.runId !== undefined) c.r = e.runId;
  if (e.turn !== undefined) c.u = e.turn;
  if (e.step !== undefined) c.s = e.step;
  if (e.entry) c.e = 1;
  if (e.parentId !== undefined) c.p = e.parentId;
  if (e.ignorable) c.g = 1;
  c.d = e.data;
  return c;
}

/** An open row: the events as a JSON array of compact events. */
export function encodeOpen(events: readonly StoredEvent[]): string {
  return JSON.stringify(events.map(compact));
}

/**
 * The fastest DEFLATE level: sealing a 21-step run (~50 KB of JSON) costs ~230 µs in the worker
 * instead of ~400 µs at the default level 6, for ~60 bytes a step more (bench:durable, ADR-0009).
 */
const SEAL_LEVEL = 1;

/** One sealed row holding the events of these open rows, in order (no event is parsed: the arrays are joined). */
export function seal(openRows: readonly string[]): Buffer {
  const items = openRows.map((r) => r.slice(1, -1)).filter((r) => r.length > 0);
  return deflateRawSync(`[${items.join(',')}]`, { dictionary: DICTIONARY_1, level: SEAL_LEVEL });
}

/** The events of a row; `firstSeq` is the row's. Throws StoreError `corrupt_log` for a row it cannot read. */
export function decodeBatch(sessionId: string, firstSeq: number, codec: number, data: string | Uint8Array): StoredEvent[] {
  let compactEvents: unknown;
  try {
    if (codec === OPEN_CODEC) compactEvents = JSON.parse(typeof data === 'string' ? data : Buffer.from(data).toString('utf8'));
    else if (codec === SEALED_CODEC) compactEvents = JSON.parse(inflateRawSync(data, { dictionary: DICTIONARY_1 }).toString('utf8'));
    else throw new Error(`codec ${codec} is not one this Keel knows`);
  } catch (e) {
    throw new StoreError('corrupt_log', `session ${sessionId}: the events from seq ${firstSeq} cannot be read (${(e as Error).message})`, { cause: e });
  }
  if (!Array.isArray(compactEvents)) throw new StoreError('corrupt_log', `session ${sessionId}: the events from seq ${firstSeq} are not a list`);
  return (compactEvents as CompactEvent[]).map((c, k) => {
    // The same shape, keys in the same order, as the events the store returns from an append.
    const e = { id: c.i, sessionId, seq: firstSeq + k, type: c.t, v: c.v, time: c.m } as StoredEvent;
    if (c.r !== undefined) e.runId = c.r;
    if (c.u !== undefined) e.turn = c.u;
    if (c.s !== undefined) e.step = c.s;
    e.entry = c.e === 1;
    if (c.p !== undefined) e.parentId = c.p;
    e.ignorable = c.g === 1;
    e.data = c.d;
    return e;
  });
}
