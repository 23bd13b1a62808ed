/**
 * Batches as the SQL backends store them (tables `batches` and `batch_items`: SQLite schema v22,
 * PostgreSQL v13), their mapping to the port's records, the SQL both claim with, and the DDL both
 * share. (Not the log's rows that rows.ts calls batches: those are `event_batches`.)
 */
import type {
  BatchItemRecord,
  BatchItemStatus,
  BatchKind,
  BatchRecord,
  BatchStatus,
  JsonObject,
} from './port/index.ts';

export type BatchTableRow = {
  id: string;
  tenant: string | null;
  kind: BatchKind;
  spec: string;
  status: BatchStatus;
  concurrency: number;
  created_at: number;
  ended_at: number | null;
};

export type BatchItemRow = {
  id: string;
  batch_id: string;
  position: number;
  key: string;
  source_session_id: string | null;
  subject: string;
  status: BatchItemStatus;
  run_id: string | null;
  attempt: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  fencing_token: number;
  result: string | null;
  scores: string;
  error: string | null;
  started_at: number | null;
  ended_at: number | null;
};

const num = (v: number | null): number | null => (v === null ? null : Number(v));
const json = (v: string | null): JsonObject | null => (v === null ? null : (JSON.parse(v) as JsonObject));

export const toBatch = (r: BatchTableRow): BatchRecord => ({
  id: r.id,
  tenant: r.tenant,
  kind: r.kind,
  spec: JSON.parse(r.spec) as JsonObject,
  status: r.status,
  concurrency: Number(r.concurrency),
  createdAt: Number(r.created_at),
  endedAt: num(r.ended_at),
});

export const toBatchItem = (r: BatchItemRow): BatchItemRecord => ({
  id: r.id,
  batchId: r.batch_id,
  position: Number(r.position),
  key: r.key,
  sourceSessionId: r.source_session_id,
  subject: JSON.parse(r.subject) as JsonObject,
  status: r.status,
  runId: r.run_id,
  attempt: Number(r.attempt),
  lease:
    r.lease_owner !== null && r.lease_expires_at !== null
      ? { owner: r.lease_owner, expiresAt: Number(r.lease_expires_at) }
      : null,
  fencingToken: Number(r.fencing_token),
  result: json(r.result),
  scores: JSON.parse(r.scores) as BatchItemRecord['scores'],
  error: json(r.error),
  startedAt: num(r.started_at),
  endedAt: num(r.ended_at),
});

/** An item's scores with `scores` merged in: new keys win (a late score, a finish's scores). */
export const mergedScores = (stored: string, scores: BatchItemRecord['scores']): string =>
  JSON.stringify({ ...(JSON.parse(stored) as BatchItemRecord['scores']), ...scores });

/** No item in each status (what `counts` starts from). */
export const NO_BATCH_COUNTS = (): Record<BatchItemStatus, number> => ({ pending: 0, running: 0, done: 0, failed: 0 });

/**
 * The running batches a claim may take an item of, oldest first: with fewer items running under a
 * live lease than their concurrency, and a pending item or a running one whose lease expired.
 * `p(n)` spells the n-th parameter: the time of the claim, then (with a cursor) the created time
 * and id of the last batch of the page before. Each test reads the claim index
 * (batch_items_claim: status, batch, position).
 */
export const claimableBatchesSql = (after: boolean, p: (n: number) => string): string =>
  `SELECT b.id, b.created_at, b.concurrency FROM batches b
   WHERE b.status = 'running'${after ? ` AND (b.created_at > ${p(2)} OR (b.created_at = ${p(2)} AND b.id > ${p(3)}))` : ''}
     AND (SELECT count(*) FROM batch_items r WHERE r.status = 'running' AND r.batch_id = b.id AND r.lease_expires_at > ${p(1)}) < b.concurrency
     AND (EXISTS (SELECT 1 FROM batch_items q WHERE q.status = 'pending' AND q.batch_id = b.id)
          OR EXISTS (SELECT 1 FROM batch_items x WHERE x.status = 'running' AND x.batch_id = b.id AND x.lease_expires_at <= ${p(1)}))
   ORDER BY b.created_at, b.id`;

/** What a claim sets on the item it takes (the parameters: owner, lease end, time of the claim). */
export const claimSetSql = (p: (n: number) => string): string =>
  `status = 'running', lease_owner = ${p(1)}, lease_expires_at = ${p(2)}, attempt = attempt + 1,
   fencing_token = fencing_token + 1, started_at = COALESCE(started_at, ${p(3)})`;

/** What a finish sets (the parameters: status, result, scores, error, end time). */
export const finishSetSql = (p: (n: number) => string): string =>
  `status = ${p(1)}, result = ${p(2)}, scores = ${p(3)}, error = ${p(4)}, ended_at = ${p(5)}, lease_owner = NULL, lease_expires_at = NULL`;

/** A batch ends `completed` once none of its items is pending or running (the parameters: end time, batch id). */
export const completeBatchSql = (p: (n: number) => string): string =>
  `UPDATE batches SET status = 'completed', ended_at = ${p(1)}
   WHERE id = ${p(2)} AND status = 'running'
     AND NOT EXISTS (SELECT 1 FROM batch_items i WHERE i.status IN ('pending', 'running') AND i.batch_id = ${p(2)})`;

/** The DDL of both backends; `int` is the 64-bit integer type (INTEGER in SQLite, BIGINT in PostgreSQL). */
export const batchesDdl = (int: string): string => `
  -- The kind is not constrained: a new kind needs no rebuild of the table (SQLite cannot alter a CHECK).
  CREATE TABLE batches (
    id TEXT PRIMARY KEY,
    tenant TEXT,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'cancelled')),
    concurrency INTEGER NOT NULL,
    created_at ${int} NOT NULL,
    ended_at ${int}
  );
  CREATE INDEX batches_tenant ON batches (tenant, id);
  -- A claim reads the running batches only, oldest first.
  CREATE INDEX batches_running ON batches (created_at, id) WHERE status = 'running';
  -- Work items, each done exactly once: claimed with a lease and a fencing token (as runs are).
  CREATE TABLE batch_items (
    id TEXT PRIMARY KEY,
    batch_id TEXT NOT NULL REFERENCES batches (id),
    position INTEGER NOT NULL,
    key TEXT NOT NULL,
    source_session_id TEXT,
    subject TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    run_id TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires_at ${int},
    fencing_token ${int} NOT NULL DEFAULT 0,
    result TEXT,
    scores TEXT NOT NULL DEFAULT '{}',
    error TEXT,
    started_at ${int},
    ended_at ${int},
    UNIQUE (batch_id, key),
    UNIQUE (batch_id, position)
  );
  -- A claim's reads: a batch's pending items by position, its running ones (live or expired leases).
  CREATE INDEX batch_items_claim ON batch_items (status, batch_id, position);
  CREATE INDEX batch_items_source_session ON batch_items (source_session_id) WHERE source_session_id IS NOT NULL;
`;
