/**
 * How the SQLite store encodes the rows of its log (ADR-0009, ADR-0020). A row holds consecutive
 * events of one session (the row gives the session and the first seq; each event is one seq more
 * than the one before). Open rows are what an append writes (the hot path compresses nothing);
 * sealing replaces a session's open rows with one sealed row holding the same events, compressed
 * with raw DEFLATE primed with a fixed dictionary of what Keel's events look like (consecutive
 * steps share their keys, ids and shapes).
 *
 * - codec 0, open (written until ADR-0020): a JSON array of compact events, each with all of its
 *   fields.
 * - codec 1, sealed: the JSON array of compact events of codec-0 rows, DEFLATE'd.
 * - codec 2, open (what an append writes): one lean row object, `{r?, u?, s?, m, e}`: the first
 *   event's run, turn, step and time, said once; `e` the compact events, each with only what
 *   differs from the row (see `LeanEvent`).
 * - codec 3, sealed (what sealing writes below ZSTD_FROM bytes): a JSON array of lean row
 *   objects, DEFLATE'd. A codec-0 row joins as `{"c":0,"e":[...]}` (a lean row whose events say
 *   everything themselves), so sealing parses no event.
 * - codec 4, sealed (what sealing writes from ZSTD_FROM bytes on): the same JSON array as
 *   codec 3, compressed with Zstandard (RFC 8878) at level 1, without a dictionary (ADR-0024).
 *
 * A codec is a format forever: changing the dictionary or the layout is a new codec number, and
 * the old ones stay readable.
 */
import {
  constants as zlibConstants,
  deflateRawSync,
  inflateRawSync,
  zstdCompressSync,
  zstdDecompressSync,
} from 'node:zlib';
import { StoreError, type StoredEvent } from '../port/index.ts';
import { EVENT_BATCH_DICTIONARY_1 } from './event-batch-dictionary.ts';

/** Open rows of the first format (ADR-0009): read, never written. */
export const OPEN_CODEC_0 = 0;
/** Sealed rows of codec-0 events: read, and written by the schema v5 migration. */
export const SEALED_CODEC = 1;
/** What an append writes. */
export const OPEN_CODEC = 2;
/** What sealing writes below ZSTD_FROM bytes. */
export const LEAN_SEALED_CODEC = 3;
/** What sealing writes from ZSTD_FROM bytes on. */
export const ZSTD_SEALED_CODEC = 4;
/** The codecs of open rows, as an SQL list (`codec IN (...)`): the rows sealing replaces. */
export const OPEN_CODECS_SQL = '(0, 2)';

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

/** A codec-0 row: the events as a JSON array of compact events (what sealed codec 1 holds). */
export function encodeOpen0(events: readonly StoredEvent[]): string {
  return JSON.stringify(events.map(compact));
}

/**
 * One event in a lean row (codec 2 and 3): a compact event whose run, turn, step and time may come
 * from its row. `r`, `u` and `s` are left out when they are the row's, and null when the event has
 * none but the row has; `m` is the time after the row's (left out when 0); `v` is left out when 1;
 * an entry's `p` is left out when its parent is the entry before it in the row, and null for an
 * entry at the root.
 */
type LeanEvent = Omit<CompactEvent, 'v' | 'm' | 'p' | 'r' | 'u' | 's'> & {
  v?: number;
  m?: number;
  p?: string | null;
  r?: string | null;
  u?: number | null;
  s?: number | null;
};

/** A lean row: what its events share (the first event's run, turn, step and time), and the events. */
interface LeanRow {
  r?: string;
  u?: number;
  s?: number;
  /** The time the events' `m` count from. */
  m?: number;
  /** 0: the events of a codec-0 row, as it wrote them (an entry without `p` is at the root). */
  c?: 0;
  e: LeanEvent[];
}

/** An open row of codec 2: the events as one lean row. */
export function encodeOpen(events: readonly StoredEvent[]): string {
  const first = events[0];
  // Keys in a fixed order: r, u, s, m, e.
  const row = {} as LeanRow;
  if (first?.runId !== undefined) row.r = first.runId;
  if (first?.turn !== undefined) row.u = first.turn;
  if (first?.step !== undefined) row.s = first.step;
  const base = first?.time ?? 0;
  row.m = base;
  const out: LeanEvent[] = [];
  let previousEntry: string | undefined;
  for (const e of events) {
    const c = { i: e.id, t: e.type } as LeanEvent;
    if (e.v !== 1) c.v = e.v;
    if (e.time !== base) c.m = e.time - base;
    if (e.runId !== row.r) c.r = e.runId ?? null;
    if (e.turn !== row.u) c.u = e.turn ?? null;
    if (e.step !== row.s) c.s = e.step ?? null;
    if (e.entry) {
      c.e = 1;
      if (e.parentId === undefined) c.p = null;
      else if (e.parentId !== previousEntry) c.p = e.parentId;
      previousEntry = e.id;
    } else if (e.parentId !== undefined) c.p = e.parentId;
    if (e.ignorable) c.g = 1;
    c.d = e.data;
    out.push(c);
  }
  row.e = out;
  return JSON.stringify(row);
}

/**
 * The fastest DEFLATE level: sealing a 21-step run (~50 KB of JSON) cost ~230 µs in the worker
 * instead of ~400 µs at the default level 6, for ~60 bytes a step more (bench:durable, ADR-0009).
 * Such a run is sealed with Zstandard since ADR-0024; DEFLATE seals what is below ZSTD_FROM.
 */
const SEAL_LEVEL = 1;

/** A codec-1 row holding the events of these codec-0 rows, in order (no event is parsed: the arrays are joined). */
export function seal(openRows: readonly string[]): Buffer {
  const items = openRows.map((r) => r.slice(1, -1)).filter((r) => r.length > 0);
  return deflateRawSync(`[${items.join(',')}]`, { dictionary: DICTIONARY_1, level: SEAL_LEVEL });
}

/**
 * A sealed row holding the events of these open rows (codec 0 or 2), in order: codec 3, or codec 4
 * from ZSTD_FROM bytes on. No event is parsed: a codec-2 row is a lean row already, a codec-0
 * array becomes one without shared fields. Joined as bytes: rows read as BLOBs are neither decoded
 * into strings nor encoded back for the compressor (a turn's ~41 KB, twice).
 */
export function sealLean(openRows: ReadonlyArray<{ codec: number; data: string | Uint8Array }>): {
  codec: typeof LEAN_SEALED_CODEC | typeof ZSTD_SEALED_CODEC;
  data: Buffer;
} {
  const parts: Uint8Array[] = [OPEN_BRACKET];
  openRows.forEach((r, i) => {
    if (i > 0) parts.push(COMMA);
    const bytes = typeof r.data === 'string' ? Buffer.from(r.data, 'utf8') : r.data;
    if (r.codec === OPEN_CODEC) parts.push(bytes);
    else if (r.codec === OPEN_CODEC_0) parts.push(CODEC_0_ROW_START, bytes, CLOSE_BRACE);
    else throw new StoreError('corrupt_log', `an open row of codec ${r.codec} cannot be sealed`);
  });
  parts.push(CLOSE_BRACKET);
  const json = Buffer.concat(parts);
  if (json.length >= ZSTD_FROM) return { codec: ZSTD_SEALED_CODEC, data: zstdCompressSync(json, ZSTD_OPTIONS) };
  return { codec: LEAN_SEALED_CODEC, data: deflateRawSync(json, { dictionary: DICTIONARY_1, level: SEAL_LEVEL }) };
}

const OPEN_BRACKET = Buffer.from('[');
const CLOSE_BRACKET = Buffer.from(']');
const COMMA = Buffer.from(',');
const CLOSE_BRACE = Buffer.from('}');
/** A codec-0 row joins a sealed row as a lean row whose events say everything themselves. */
const CODEC_0_ROW_START = Buffer.from('{"c":0,"e":');

/**
 * From this many bytes of lean rows on, sealing compresses with Zstandard (codec 4) instead of
 * DEFLATE with the dictionary (codec 3): at level 1 it takes less than half the time at every size
 * (~100 against ~250 µs for a 21-step run's 41 KB), and its output is within 10 % of DEFLATE's at
 * 16 KB and smaller from ~24 KB on. Below, the dictionary wins: a one-step turn's ~2 KB comes out
 * ~40 % smaller with it (ADR-0024). No Zstandard dictionary: Node 22 ignores that option.
 */
const ZSTD_FROM = 16_384;
const ZSTD_OPTIONS = { params: { [zlibConstants.ZSTD_c_compressionLevel]: 1 } };

/** A row's text: as read (TEXT), or decoded from its bytes (a BLOB) without copying them first. */
const textOf = (data: string | Uint8Array): string =>
  typeof data === 'string' ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8');

/** The events of lean rows, from `firstSeq` on. */
function fromLeanRows(sessionId: string, firstSeq: number, rows: unknown): StoredEvent[] {
  if (!Array.isArray(rows))
    throw new StoreError('corrupt_log', `session ${sessionId}: the events from seq ${firstSeq} are not a list`);
  const out: StoredEvent[] = [];
  let seq = firstSeq;
  for (const row of rows as LeanRow[]) {
    const events = row?.e;
    if (!Array.isArray(events))
      throw new StoreError('corrupt_log', `session ${sessionId}: the events from seq ${seq} are not a list`);
    const base = row.m ?? 0;
    const asCodec0 = row.c === 0;
    let previousEntry: string | undefined;
    for (const c of events) {
      // The same shape, keys in the same order, as the events the store returns from an append.
      const e = { id: c.i, sessionId, seq: seq++, type: c.t, v: c.v ?? 1, time: base + (c.m ?? 0) } as StoredEvent;
      const runId = c.r === undefined ? row.r : c.r;
      if (runId !== undefined && runId !== null) e.runId = runId;
      const turn = c.u === undefined ? row.u : c.u;
      if (turn !== undefined && turn !== null) e.turn = turn;
      const step = c.s === undefined ? row.s : c.s;
      if (step !== undefined && step !== null) e.step = step;
      e.entry = c.e === 1;
      if (c.p !== undefined && c.p !== null) e.parentId = c.p;
      else if (c.p === undefined && e.entry && !asCodec0) {
        if (previousEntry === undefined)
          throw new StoreError('corrupt_log', `session ${sessionId}: entry ${c.i} at seq ${e.seq} names no parent`);
        e.parentId = previousEntry;
      }
      e.ignorable = c.g === 1;
      e.data = c.d;
      if (e.entry) previousEntry = c.i;
      out.push(e);
    }
  }
  return out;
}

/** The events of a row; `firstSeq` is the row's. Throws StoreError `corrupt_log` for a row it cannot read. */
export function decodeBatch(
  sessionId: string,
  firstSeq: number,
  codec: number,
  data: string | Uint8Array,
): StoredEvent[] {
  let compactEvents: unknown;
  try {
    if (codec === OPEN_CODEC) return fromLeanRows(sessionId, firstSeq, [JSON.parse(textOf(data))]);
    if (codec === ZSTD_SEALED_CODEC)
      return fromLeanRows(sessionId, firstSeq, JSON.parse(zstdDecompressSync(data).toString('utf8')));
    if (codec === LEAN_SEALED_CODEC)
      return fromLeanRows(
        sessionId,
        firstSeq,
        JSON.parse(inflateRawSync(data, { dictionary: DICTIONARY_1 }).toString('utf8')),
      );
    if (codec === OPEN_CODEC_0) compactEvents = JSON.parse(textOf(data));
    else if (codec === SEALED_CODEC)
      compactEvents = JSON.parse(inflateRawSync(data, { dictionary: DICTIONARY_1 }).toString('utf8'));
    else throw new Error(`codec ${codec} is not one this Keel knows`);
  } catch (e) {
    if (e instanceof StoreError) throw e;
    throw new StoreError(
      'corrupt_log',
      `session ${sessionId}: the events from seq ${firstSeq} cannot be read (${(e as Error).message})`,
      { cause: e },
    );
  }
  if (!Array.isArray(compactEvents))
    throw new StoreError('corrupt_log', `session ${sessionId}: the events from seq ${firstSeq} are not a list`);
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

/**
 * A row's events as the text they were encoded to, decompressed (what an erasure scan searches):
 * JSON, never parsed. A row it cannot decompress is returned as its bytes' text.
 */
export function decompressBatch(codec: number, data: string | Uint8Array): string {
  try {
    if (codec === ZSTD_SEALED_CODEC) return zstdDecompressSync(data).toString('utf8');
    if (codec === LEAN_SEALED_CODEC || codec === SEALED_CODEC)
      return inflateRawSync(data, { dictionary: DICTIONARY_1 }).toString('utf8');
  } catch {
    // Searched as it is below.
  }
  return textOf(data);
}
