/**
 * PostgreSQL: the batches operations of the port (`store.batches`).
 *
 * Locks (READ COMMITTED, ADR-0011): a claim locks the batch row (FOR UPDATE) before it counts the
 * batch's running items and takes one (FOR UPDATE SKIP LOCKED), each in a statement of its own:
 * claims of one batch take turns, and each counts what the one before committed, so a batch never
 * runs more items than its concurrency and two claimers never take one item. A finish locks its
 * item, ends it, then locks the batch before it looks for unfinished items: of two last items
 * finishing at once, the second to lock sees the first ended and completes the batch. Batch rows
 * are locked oldest first (created_at, id) wherever several are, and always after the items a
 * transaction locks for itself: no two of these wait for each other in a circle.
 */
import {
  claimableBatchesSql,
  claimSetSql,
  completeBatchSql,
  finishSetSql,
  mergedScores,
  NO_BATCH_COUNTS,
  toBatch,
  toBatchItem,
  type BatchItemRow,
  type BatchTableRow,
} from '../batch-rows.ts';
import { NotFoundError, StoreError, type BatchItemStatus } from '../port/index.ts';
import { hasNul } from '../plain-text.ts';
import { constraintOf, sqlState, UNIQUE_VIOLATION } from './sql.ts';
import type { PgOpsOf } from './context.ts';

/** Items one statement inserts (as arrays, unnest): a large batch in a few round trips. */
const ITEMS_PER_INSERT = 500;

/** Candidate batches a claim reads at a time (it tries each in turn; most often the first has an item). */
const CLAIM_PAGE = 8;

const numbered = (n: number) => `$${n}`;

const INSERT_ITEMS = `INSERT INTO batch_items (id, batch_id, position, key, source_session_id, subject, status)
  SELECT u.id, $1::text, $2::integer + u.n::integer - 1, u.key, u.source_session_id, u.subject, 'pending'
  FROM unnest($3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS u (id, key, source_session_id, subject, n)`;

/**
 * The claim of an item of a batch this transaction locked ($1): its lowest pending item or running
 * one whose lease expired, whichever comes first, if fewer than its concurrency ($5) run under a
 * live lease; $2–$4: owner, lease end, time of the claim.
 */
const CLAIM = `WITH pending AS (
    SELECT id, position FROM batch_items WHERE status = 'pending' AND batch_id = $1 ORDER BY position LIMIT 1 FOR UPDATE SKIP LOCKED
  ), expired AS (
    SELECT id, position FROM batch_items WHERE status = 'running' AND batch_id = $1 AND lease_expires_at <= $4 ORDER BY position LIMIT 1 FOR UPDATE SKIP LOCKED
  ), picked AS (
    SELECT c.id FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) c
    WHERE (SELECT count(*) FROM batch_items r WHERE r.status = 'running' AND r.batch_id = $1 AND r.lease_expires_at > $4) < $5
    ORDER BY c.position LIMIT 1
  )
  UPDATE batch_items SET ${claimSetSql((n) => `$${n + 1}`)}
  FROM picked WHERE batch_items.id = picked.id RETURNING batch_items.*`;

/** An id with NUL cannot be stored (plain-text.ts): nothing has one, as on SQLite. */
const none = (...ids: string[]): boolean => ids.some(hasNul);

export const pgBatchesOps: PgOpsOf<'batches'> = {
  createBatch: async ({ atomic }, b, items) => {
    try {
      return await atomic(async (q) => {
        const row = await q.one<BatchTableRow>(
          `INSERT INTO batches (id, tenant, kind, spec, status, concurrency, created_at)
           VALUES ($1, $2, $3, $4, 'running', $5, $6) RETURNING *`,
          [b.id, b.tenant, b.kind, JSON.stringify(b.spec), b.concurrency, b.createdAt],
        );
        for (let from = 0; from < items.length; from += ITEMS_PER_INSERT) {
          const chunk = items.slice(from, from + ITEMS_PER_INSERT);
          await q.run(INSERT_ITEMS, [
            b.id,
            from,
            chunk.map((it) => it.id),
            chunk.map((it) => it.key),
            chunk.map((it) => it.sourceSessionId),
            chunk.map((it) => JSON.stringify(it.subject)),
          ]);
        }
        return toBatch(row!);
      });
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError(
          'conflict',
          constraintOf(e) === 'batches_pkey'
            ? `batch ${b.id} already exists`
            : 'an item of the batch already exists (its id, or its key in the batch)',
          { cause: e },
        );
      throw e;
    }
  },

  getBatch: async ({ sql }, id) => {
    if (none(id)) return undefined;
    const row = await sql.one<BatchTableRow>('SELECT * FROM batches WHERE id = $1', [id]);
    return row ? toBatch(row) : undefined;
  },

  // A tenant's from the index of them: a cached plan of `$1 IS NULL OR tenant = $1` would read every tenant's.
  listBatches: async ({ sql }, q) => {
    const args: unknown[] = [];
    const where = [
      ...(q.tenant !== undefined ? [`tenant = $${args.push(q.tenant)}`] : []),
      ...(q.kind !== undefined ? [`kind = $${args.push(q.kind)}`] : []),
      ...(q.after !== undefined ? [`id > $${args.push(q.after)}`] : []),
    ];
    const text = `SELECT * FROM batches ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT $${args.push(Math.max(0, Math.floor(q.limit)))}`;
    return (await sql.rows<BatchTableRow>(text, args)).map(toBatch);
  },

  countBatchItems: async ({ sql }, batchId) => {
    const out = NO_BATCH_COUNTS();
    if (none(batchId)) return out;
    for (const r of await sql.rows<{ status: BatchItemStatus; n: number }>(
      'SELECT status, count(*) AS n FROM batch_items WHERE batch_id = $1 GROUP BY status',
      [batchId],
    ))
      out[r.status] = Number(r.n);
    return out;
  },

  listBatchItems: async ({ sql }, batchId, q) => {
    if (none(batchId) || q.statuses?.length === 0) return [];
    const args: unknown[] = [batchId, q.afterPosition ?? -1];
    const statuses = q.statuses ? ` AND status = ANY($${args.push([...q.statuses])}::text[])` : '';
    args.push(Math.max(0, Math.floor(q.limit)));
    return (
      await sql.rows<BatchItemRow>(
        `SELECT * FROM batch_items WHERE batch_id = $1 AND position > $2${statuses} ORDER BY position LIMIT $${args.length}`,
        args,
      )
    ).map(toBatchItem);
  },

  getBatchItem: async ({ sql }, id) => {
    if (none(id)) return undefined;
    const row = await sql.one<BatchItemRow>('SELECT * FROM batch_items WHERE id = $1', [id]);
    return row ? toBatchItem(row) : undefined;
  },

  // The candidates are read without a lock; each is locked, then claimed from if it still has room
  // and an item (another claimer may have taken the last meanwhile): the next is tried if not.
  claimBatchItem: ({ atomic }, owner, leaseMs, now) =>
    atomic(async (q) => {
      let after: { created_at: number; id: string } | undefined;
      for (;;) {
        const page = await q.rows<{ id: string; created_at: number }>(
          `${claimableBatchesSql(after !== undefined, numbered)} LIMIT ${CLAIM_PAGE}`,
          after ? [now, after.created_at, after.id] : [now],
        );
        for (const b of page) {
          const locked = await q.one<{ concurrency: number }>(
            "SELECT concurrency FROM batches WHERE id = $1 AND status = 'running' FOR UPDATE",
            [b.id],
          );
          if (!locked) continue;
          const row = await q.one<BatchItemRow>(CLAIM, [b.id, owner, now + leaseMs, now, locked.concurrency]);
          if (row) return toBatchItem(row);
        }
        if (page.length < CLAIM_PAGE) return undefined;
        after = page.at(-1);
      }
    }),

  renewBatchItem: async ({ sql }, itemId, owner, token, until) =>
    !none(itemId, owner) &&
    (await sql.run(
      "UPDATE batch_items SET lease_expires_at = $4 WHERE id = $1 AND lease_owner = $2 AND fencing_token = $3 AND status = 'running'",
      [itemId, owner, token, until],
    )) === 1,

  setBatchItemRun: async ({ sql }, itemId, token, runId) =>
    !none(itemId) &&
    (await sql.run("UPDATE batch_items SET run_id = $3 WHERE id = $1 AND fencing_token = $2 AND status = 'running'", [
      itemId,
      token,
      runId,
    ])) === 1,

  finishBatchItem: async ({ atomic }, itemId, token, end, now) =>
    !none(itemId) &&
    atomic(async (q) => {
      // Locked: a second finish with the same token waits, then finds the item ended.
      const held = await q.one<{ batch_id: string; scores: string }>(
        "SELECT batch_id, scores FROM batch_items WHERE id = $1 AND fencing_token = $2 AND status = 'running' FOR UPDATE",
        [itemId, token],
      );
      if (!held) return false;
      await q.run(`UPDATE batch_items SET ${finishSetSql((n) => `$${n + 1}`)} WHERE id = $1`, [
        itemId,
        end.status,
        end.result === null ? null : JSON.stringify(end.result),
        mergedScores(held.scores, end.scores),
        end.error === null ? null : JSON.stringify(end.error),
        now,
      ]);
      // The batch locked before its items are counted (a statement of its own, which sees what the
      // finishes that held the lock before committed).
      await q.run('SELECT 1 FROM batches WHERE id = $1 FOR UPDATE', [held.batch_id]);
      await q.run(completeBatchSql(numbered), [now, held.batch_id]);
      return true;
    }),

  addBatchItemScores: ({ atomic }, itemId, scores) =>
    atomic(async (q) => {
      const row = none(itemId)
        ? undefined
        : await q.one<BatchItemRow>('SELECT * FROM batch_items WHERE id = $1 FOR UPDATE', [itemId]);
      if (!row) throw new NotFoundError('batch item', itemId);
      return toBatchItem(
        (await q.one<BatchItemRow>('UPDATE batch_items SET scores = $2 WHERE id = $1 RETURNING *', [
          itemId,
          mergedScores(row.scores, scores),
        ]))!,
      );
    }),

  cancelBatch: async ({ sql }, batchId, now) =>
    !none(batchId) &&
    (await sql.run("UPDATE batches SET status = 'cancelled', ended_at = $2 WHERE id = $1 AND status = 'running'", [
      batchId,
      now,
    ])) === 1,
};
