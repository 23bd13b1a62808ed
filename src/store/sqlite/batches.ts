/**
 * SQLite: the batches operations of the port (`store.batches`), synchronous, on the connection's
 * shared state. SQLite runs one write transaction at a time across processes: a claim reads and
 * takes its item under the write lock (BEGIN IMMEDIATE), so two claimers never take one item and a
 * batch never runs more items than its concurrency; a finish checks the item's token and status in
 * the statement that ends it, and completes the batch in the same write.
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
import { NotFoundError, type BatchItemStatus } from '../port/index.ts';
import type { FlatOpsOf } from '../port/layout.ts';
import { guard } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

/** How each operation runs (see PLAN in store.ts). */
export const BATCH_PLAN: {
  readonly [K in keyof FlatOpsOf<'batches'>]: {
    outside: 'serial' | 'write' | 'immediate' | 'autocommit';
    savepoint?: true;
  };
} = {
  createBatch: { outside: 'write', savepoint: true },
  getBatch: { outside: 'serial' },
  listBatches: { outside: 'serial' },
  countBatchItems: { outside: 'serial' },
  listBatchItems: { outside: 'serial' },
  getBatchItem: { outside: 'serial' },
  // Under the write lock (BEGIN IMMEDIATE): two processes never claim one item.
  claimBatchItem: { outside: 'immediate' },
  renewBatchItem: { outside: 'write' },
  setBatchItemRun: { outside: 'write' },
  finishBatchItem: { outside: 'write', savepoint: true },
  addBatchItemScores: { outside: 'immediate', savepoint: true },
  cancelBatch: { outside: 'write' },
};

/** Parameters by name (@p1, @p2, …: better-sqlite3 binds them from an object): the shared SQL uses some twice. */
const named = (n: number) => `@p${n}`;

export function batchOps(c: Shared): SyncOpsOf<'batches'> {
  const { db, prepared } = c;
  const insert = db.prepare(
    "INSERT INTO batches (id, tenant, kind, spec, status, concurrency, created_at) VALUES (?, ?, ?, ?, 'running', ?, ?)",
  );
  const insertItem = db.prepare(
    "INSERT INTO batch_items (id, batch_id, position, key, source_session_id, subject, status) VALUES (?, ?, ?, ?, ?, ?, 'pending')",
  );
  const get = db.prepare<[string], BatchTableRow>('SELECT * FROM batches WHERE id = ?');
  const counts = db.prepare<[string], { status: BatchItemStatus; n: number }>(
    'SELECT status, count(*) AS n FROM batch_items WHERE batch_id = ? GROUP BY status',
  );
  const item = db.prepare<[string], BatchItemRow>('SELECT * FROM batch_items WHERE id = ?');
  // With one writer the first claimable batch has room and an item: no page of candidates is needed.
  const claimable = db.prepare<[{ p1: number }], { id: string }>(`${claimableBatchesSql(false, named)} LIMIT 1`);
  // The batch's lowest pending item or running one whose lease expired, whichever comes first.
  const claim = db.prepare<[{ p1: string; p2: number; p3: number; p4: string }], BatchItemRow>(
    `UPDATE batch_items SET ${claimSetSql(named)}
     WHERE id = (SELECT id FROM (
       SELECT id, position FROM (SELECT id, position FROM batch_items WHERE status = 'pending' AND batch_id = @p4 ORDER BY position LIMIT 1)
       UNION ALL
       SELECT id, position FROM (SELECT id, position FROM batch_items WHERE status = 'running' AND batch_id = @p4 AND lease_expires_at <= @p3 ORDER BY position LIMIT 1)
     ) ORDER BY position LIMIT 1)
     RETURNING *`,
  );
  const renew = db.prepare<[number, string, string, number]>(
    "UPDATE batch_items SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? AND fencing_token = ? AND status = 'running'",
  );
  const setRun = db.prepare<[string, string, number]>(
    "UPDATE batch_items SET run_id = ? WHERE id = ? AND fencing_token = ? AND status = 'running'",
  );
  const held = db.prepare<[string, number], { batch_id: string; scores: string }>(
    "SELECT batch_id, scores FROM batch_items WHERE id = ? AND fencing_token = ? AND status = 'running'",
  );
  const finish = db.prepare<[{ p1: string; p2: string | null; p3: string; p4: string | null; p5: number; p6: string }]>(
    `UPDATE batch_items SET ${finishSetSql(named)} WHERE id = @p6`,
  );
  const complete = db.prepare<[{ p1: number; p2: string }]>(completeBatchSql(named));
  const setScores = db.prepare<[string, string], BatchItemRow>(
    'UPDATE batch_items SET scores = ? WHERE id = ? RETURNING *',
  );
  const cancel = db.prepare<[number, string]>(
    "UPDATE batches SET status = 'cancelled', ended_at = ? WHERE id = ? AND status = 'running'",
  );
  const ops: SyncOpsOf<'batches'> = {
    // In the caller's write (its savepoint): an item that conflicts leaves no batch behind.
    createBatch: (b, list) => {
      guard(`batch ${b.id} already exists`, () =>
        insert.run(b.id, b.tenant, b.kind, JSON.stringify(b.spec), b.concurrency, b.createdAt),
      );
      list.forEach((it, position) =>
        guard(`batch item ${it.id} (key ${it.key}) already exists`, () =>
          insertItem.run(it.id, b.id, position, it.key, it.sourceSessionId, JSON.stringify(it.subject)),
        ),
      );
      return ops.getBatch(b.id)!;
    },
    getBatch: (id) => {
      const row = get.get(id);
      return row ? toBatch(row) : undefined;
    },
    // A tenant's from the index of them: `? IS NULL OR tenant = ?` would read every tenant's.
    listBatches: (q) => {
      const filters: Array<[string, unknown]> = [
        ...(q.tenant !== undefined ? [['tenant = ?', q.tenant] as [string, unknown]] : []),
        ...(q.kind !== undefined ? [['kind = ?', q.kind] as [string, unknown]] : []),
        ...(q.after !== undefined ? [['id > ?', q.after] as [string, unknown]] : []),
      ];
      const where = filters.map(([w]) => w);
      const args = filters.map(([, a]) => a);
      return (
        prepared(`SELECT * FROM batches ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ?`).all(
          ...args,
          Math.max(0, Math.floor(q.limit)),
        ) as BatchTableRow[]
      ).map(toBatch);
    },
    countBatchItems: (batchId) => {
      const out = NO_BATCH_COUNTS();
      for (const r of counts.all(batchId)) out[r.status] = Number(r.n);
      return out;
    },
    listBatchItems: (batchId, q) => {
      if (q.statuses?.length === 0) return [];
      const statuses = q.statuses ? ` AND status IN (${q.statuses.map(() => '?').join(', ')})` : '';
      return (
        prepared(
          `SELECT * FROM batch_items WHERE batch_id = ? AND position > ?${statuses} ORDER BY position LIMIT ?`,
        ).all(batchId, q.afterPosition ?? -1, ...(q.statuses ?? []), Math.max(0, Math.floor(q.limit))) as BatchItemRow[]
      ).map(toBatchItem);
    },
    getBatchItem: (id) => {
      const row = item.get(id);
      return row ? toBatchItem(row) : undefined;
    },
    // Runs inside the caller's write transaction: the pick and the update are one atomic step.
    claimBatchItem: (owner, leaseMs, now) => {
      const batch = claimable.get({ p1: now });
      if (!batch) return undefined;
      const row = claim.get({ p1: owner, p2: now + leaseMs, p3: now, p4: batch.id });
      return row ? toBatchItem(row) : undefined;
    },
    renewBatchItem: (itemId, owner, token, until) => renew.run(until, itemId, owner, token).changes === 1,
    setBatchItemRun: (itemId, token, runId) => setRun.run(runId, itemId, token).changes === 1,
    finishBatchItem: (itemId, token, end, now) => {
      const h = held.get(itemId, token);
      if (!h) return false;
      finish.run({
        p1: end.status,
        p2: end.result === null ? null : JSON.stringify(end.result),
        p3: mergedScores(h.scores, end.scores),
        p4: end.error === null ? null : JSON.stringify(end.error),
        p5: now,
        p6: itemId,
      });
      complete.run({ p1: now, p2: h.batch_id });
      return true;
    },
    addBatchItemScores: (itemId, scores) => {
      const row = item.get(itemId);
      if (!row) throw new NotFoundError('batch item', itemId);
      return toBatchItem(setScores.get(mergedScores(row.scores, scores), itemId)!);
    },
    cancelBatch: (batchId, now) => cancel.run(now, batchId).changes === 1,
  };
  return ops;
}
