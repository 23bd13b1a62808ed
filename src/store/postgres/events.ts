/** PostgreSQL: the events operations of the port (`store.events`). */
import {
  BLOB_HEAD_CHARS,
  keptHead,
  NotFoundError,
  StoreError,
  type AppendOptions,
  type BlobInfo,
  type StoredEvent,
} from '../port/index.ts';
import { blobHashesIn } from '../blob-refs.ts';
import { hasNul } from '../plain-text.ts';
import { storedEvent } from '../records.ts';
import { type SnapshotRow } from '../rows.ts';
import { toEvent, limitOf, appendRefusal, pushDraftColumns, type EventRow } from './shared.ts';
import type { PgOpsOf } from './context.ts';

/**
 * An append in a transaction that it fails when refused (`abortsTransaction`), with no blobs to put
 * first: one statement and no savepoint, which the transaction pipelines (store.ts PIPELINED).
 */
export function appendsPipelined(ctx: { inTransaction?: boolean }, options: AppendOptions | undefined): boolean {
  return (
    ctx.inTransaction === true && options?.abortsTransaction === true && !(options.blobs && options.blobs.length > 0)
  );
}

export const pgEventsOps: PgOpsOf<'events'> = {
  /**
   * One call of keel_append (schema v2): the session row is locked (FOR UPDATE) for the rest of the
   * transaction, so appends to one session take turns, each allocating the seqs after the last
   * committed one; a fence is read FOR SHARE, so a claim that would move the token waits for this
   * transaction, or this one sees its token.
   */
  append: async (ctx, sessionId, drafts, options = {}) => {
    const { expectLastSeq, fence, blobs } = options;
    // A refusal of it fails its transaction: no savepoint (see appendsPipelined).
    const guarded = appendsPipelined(ctx, options)
      ? <T>(fn: (q: typeof ctx.sql) => Promise<T>) => fn(ctx.sql)
      : ctx.guarded;
    if (blobs && blobs.length > 0) await pgEventsOps.putBlobs(ctx, blobs);
    const seen = new Set<string>();
    const cols: unknown[][] = Array.from({ length: 14 }, () => []);
    const json: string[] = [];
    for (const d of drafts) {
      if (d.entry && seen.has(d.id)) throw new StoreError('conflict', `event ${d.id} already exists`);
      if (d.entry) seen.add(d.id);
      json.push(JSON.stringify(d.data));
    }
    pushDraftColumns(cols, drafts, json);
    let rows: Array<{ seq: number; parent_id: string | null }>;
    try {
      rows = await guarded((q) =>
        q.rows<{ seq: number; parent_id: string | null }>(
          `SELECT seq, parent_id FROM keel_append($1, $2, $3, $4, $5::text[], $6::text[], $7::int[], $8::bigint[], $9::text[], $10::int[], $11::int[],
                                                $12::boolean[], $13::text[], $14::boolean[], $15::text[], $16::boolean[], $17::boolean[], $18::text[], $19::text[])`,
          // Which blobs the session refers to, for erasure, in the append's own transaction.
          [
            sessionId,
            fence?.runId ?? null,
            fence?.token ?? null,
            expectLastSeq ?? null,
            ...cols,
            blobHashesIn(json.join(',')),
          ],
        ),
      );
    } catch (e) {
      throw appendRefusal(e, sessionId, options);
    }
    ctx.appended?.add(sessionId);
    return drafts.map((d, i) => storedEvent(d, sessionId, rows[i]!.seq, rows[i]!.parent_id));
  },

  readEvents: async ({ sql }, sessionId, o = {}) => {
    // A run's events all follow its first one: the scan starts there, found in the same statement.
    const rows = await sql.rows<EventRow>(
      `SELECT * FROM events
       WHERE session_id = $1 AND ($3::bigint IS NULL OR seq <= $3) AND ($4::text IS NULL OR run_id = $4)
         AND seq > GREATEST($2, (SELECT r.first_seq - 1 FROM runs r WHERE $4::text IS NOT NULL AND r.id = $4))
       ORDER BY seq LIMIT $5`,
      [sessionId, o.afterSeq ?? 0, o.untilSeq ?? null, o.runId ?? null, limitOf(o.limit)],
    );
    return rows.map(toEvent);
  },

  getEntries: async ({ sql }, sessionId, given) => {
    const ids = given.filter((id) => !hasNul(id));
    if (ids.length === 0 || hasNul(sessionId)) return [];
    const rows = await sql.rows<EventRow>(
      'SELECT * FROM events WHERE session_id = $1 AND entry AND id = ANY($2::text[])',
      [sessionId, [...ids]],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const out: StoredEvent[] = [];
    for (const id of ids) {
      const r = byId.get(id);
      if (r) out.push(toEvent(r));
    }
    return out;
  },

  // Every step of the walk stays inside the session, even if a parent id points elsewhere.
  ancestors: async ({ sql }, sessionId, fromId, limit) => {
    if (hasNul(fromId) || hasNul(sessionId)) return [];
    const rows = await sql.rows<EventRow>(
      `WITH RECURSIVE path(id, parent_id, seq, depth) AS (
         SELECT id, parent_id, seq, 0 FROM events WHERE session_id = $1 AND id = $2 AND entry AND $3 > 0
         UNION ALL
         SELECT e.id, e.parent_id, e.seq, p.depth + 1 FROM path p JOIN events e ON e.session_id = $1 AND e.entry AND e.id = p.parent_id
         WHERE p.depth + 1 < $3
       )
       SELECT e.* FROM path JOIN events e ON e.session_id = $1 AND e.seq = path.seq ORDER BY path.depth`,
      [sessionId, fromId, Math.max(0, Math.floor(limit))],
    );
    return rows.map(toEvent);
  },

  // One row per event: nothing to re-encode (the server compresses large values itself).
  // Nothing to re-encode here; an unknown session is refused, which one this transaction appended to is not.
  sealEvents: async ({ sql, appended }, sessionId) => {
    if (appended?.has(sessionId)) return;
    if (!(await sql.one('SELECT 1 FROM sessions WHERE id = $1', [sessionId])))
      throw new NotFoundError('session', sessionId);
  },

  putBlobs: async ({ sql }, blobs) => {
    if (blobs.length === 0) return;
    const now = Date.now();
    await sql.run(
      `INSERT INTO blobs (hash, data, size, created_at, media_type, encoding)
       SELECT h, d, s, $4, m, e FROM unnest($1::text[], $2::text[], $3::int[], $5::text[], $6::text[]) AS b(h, d, s, m, e)
       ON CONFLICT (hash) DO NOTHING`,
      [
        blobs.map((b) => b.hash),
        blobs.map((b) => b.data),
        blobs.map((b) => Buffer.byteLength(b.data)),
        now,
        blobs.map((b) => b.mediaType ?? null),
        blobs.map((b) => b.encoding ?? null),
      ],
    );
    const heads = blobs.filter((b) => b.mediaType !== undefined && b.data.length > BLOB_HEAD_CHARS);
    if (heads.length > 0)
      await sql.run(
        'INSERT INTO blob_heads (hash, head) SELECT h, d FROM unnest($1::text[], $2::text[]) AS b(h, d) ON CONFLICT (hash) DO NOTHING',
        [heads.map((b) => b.hash), heads.map((b) => keptHead(b.data))],
      );
  },

  blobInfo: async ({ sql }, hashes) => {
    const out = new Map<string, BlobInfo>();
    if (hashes.length === 0) return out;
    for (const r of await sql.rows<{ hash: string; size: number; media_type: string | null; encoding: string | null }>(
      'SELECT hash, size, media_type, encoding FROM blobs WHERE hash = ANY($1::text[])',
      [[...hashes]],
    ))
      out.set(r.hash, {
        hash: r.hash,
        size: Number(r.size),
        mediaType: r.media_type,
        encoding: r.encoding === 'base64' ? 'base64' : null,
      });
    return out;
  },

  // The kept head when it is enough; else substring of the TOASTed text (which fetches the slices it needs).
  blobHead: async ({ sql }, hash, chars) => {
    const n = Math.max(0, Math.floor(chars));
    const kept =
      n <= BLOB_HEAD_CHARS
        ? await sql.one<{ head: string }>(
            'SELECT substring(head from 1 for $2) AS head FROM blob_heads WHERE hash = $1',
            [hash, n],
          )
        : undefined;
    return (
      kept ??
      (await sql.one<{ head: string }>('SELECT substring(data from 1 for $2) AS head FROM blobs WHERE hash = $1', [
        hash,
        n,
      ]))
    )?.head;
  },

  blobTenant: async ({ sql }, hash, tenant) =>
    !!(await sql.one(
      'SELECT 1 FROM blob_refs r JOIN sessions s ON s.id = r.session_id WHERE r.hash = $1 AND s.tenant = $2 LIMIT 1',
      [hash, tenant],
    )),

  getBlobs: async ({ sql }, hashes) => {
    const out = new Map<string, string>();
    if (hashes.length === 0) return out;
    for (const r of await sql.rows<{ hash: string; data: string }>(
      'SELECT hash, data FROM blobs WHERE hash = ANY($1::text[])',
      [[...hashes]],
    ))
      out.set(r.hash, r.data);
    return out;
  },

  putSnapshot: async ({ sql }, s) => {
    await sql.run(
      `INSERT INTO snapshots (session_id, projection, version, as_of_seq, leaf_id, state, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (session_id, projection, version) DO UPDATE SET
         as_of_seq = excluded.as_of_seq, leaf_id = excluded.leaf_id, state = excluded.state, created_at = excluded.created_at
       WHERE excluded.as_of_seq >= snapshots.as_of_seq`,
      [s.sessionId, s.projection, s.version, s.asOfSeq, s.leafId, JSON.stringify(s.state), Date.now()],
    );
  },

  getSnapshot: async ({ sql }, sessionId, projection, version) => {
    const row = await sql.one<SnapshotRow>(
      'SELECT as_of_seq, leaf_id, state FROM snapshots WHERE session_id = $1 AND projection = $2 AND version = $3',
      [sessionId, projection, version],
    );
    return row
      ? {
          sessionId,
          projection,
          version,
          asOfSeq: row.as_of_seq,
          leafId: row.leaf_id,
          state: JSON.parse(row.state) as unknown,
        }
      : undefined;
  },
};
