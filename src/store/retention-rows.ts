/**
 * Retention's rows, shared by both SQL backends (docs/operations.md): sessions moved to
 * an archive store (`session_archives`, and `sessions.in_archive_at`), a restored session's time
 * (`sessions.restored_at`: idle counts from then), the policies set by API (`retention_policies`),
 * and the retention worker's leader lease (`retention_leases`).
 */
import type { ArchivedSession, IdleSession, IdleSessionQuery, OperationalTable } from './port/retention.ts';

export function retentionTablesDdl(int: 'INTEGER' | 'BIGINT'): string {
  return `
    CREATE TABLE IF NOT EXISTS session_archives (
      session_id TEXT PRIMARY KEY,
      tenant TEXT NOT NULL,
      agent TEXT,
      store TEXT NOT NULL,
      key TEXT NOT NULL,
      bytes ${int} NOT NULL,
      events ${int} NOT NULL,
      archived_at ${int} NOT NULL
    );
    CREATE INDEX IF NOT EXISTS session_archives_at ON session_archives (archived_at, session_id);
    CREATE TABLE IF NOT EXISTS retention_policies (
      tenant TEXT NOT NULL,
      agent TEXT NOT NULL DEFAULT '',
      policy TEXT NOT NULL,
      updated_at ${int} NOT NULL,
      PRIMARY KEY (tenant, agent)
    );
    CREATE TABLE IF NOT EXISTS retention_leases (
      name TEXT PRIMARY KEY,
      holder TEXT NOT NULL,
      expires_at ${int} NOT NULL
    );
  `;
}

export type SessionArchiveRow = {
  session_id: string;
  tenant: string;
  agent: string | null;
  store: string;
  key: string;
  bytes: number | string;
  events: number | string;
  archived_at: number | string;
};

export const toArchivedSession = (r: SessionArchiveRow): ArchivedSession => ({
  sessionId: r.session_id,
  tenant: r.tenant,
  agent: r.agent,
  store: r.store,
  key: r.key,
  bytes: Number(r.bytes),
  events: Number(r.events),
  archivedAt: Number(r.archived_at),
});

/**
 * The idle sessions query, in both dialects (`?` placeholders; PostgreSQL's numbered by the
 * caller): not erased, not in an archive, created and restored before the cutoff, with no run
 * that is unfinished or created or ended since the cutoff. Its agent: the session's, else its
 * latest run's (run ids grow with time). Parameters: cutoff ×3, tenant ×2,
 * agent ×2, after, limit.
 */
export const IDLE_SESSIONS_SQL = `
  SELECT s.id AS session_id, s.tenant,
    coalesce(s.agent, (SELECT r.agent_name FROM runs r WHERE r.session_id = s.id ORDER BY r.id DESC LIMIT 1)) AS agent
  FROM sessions s
  WHERE s.erased_at IS NULL AND s.in_archive_at IS NULL
    AND s.created_at < ? AND coalesce(s.restored_at, 0) < ?
    AND (? IS NULL OR s.tenant = ?) AND (? IS NULL OR s.agent = ?)
    AND s.id > ?
    AND NOT EXISTS (
      SELECT 1 FROM runs r WHERE r.session_id = s.id AND (r.ended_at IS NULL OR r.ended_at >= ?)
    )
  ORDER BY s.id LIMIT ?`;

/** IDLE_SESSIONS_SQL's parameters for a query, in order. */
export const idleSessionsArgs = (q: IdleSessionQuery): unknown[] => [
  q.cutoff,
  q.cutoff,
  q.tenant ?? null,
  q.tenant ?? null,
  q.agent ?? null,
  q.agent ?? null,
  q.after ?? '',
  q.cutoff,
  q.limit,
];

/** A row of IDLE_SESSIONS_SQL. */
export type IdleSessionRow = { session_id: string; tenant: string; agent: string | null };

export const toIdleSession = (r: IdleSessionRow): IdleSession => ({
  sessionId: r.session_id,
  tenant: r.tenant,
  agent: r.agent,
});

/**
 * How each operational table is pruned, in both dialects: the keys of up to `limit` rows older
 * than the cutoff (`?` twice: cutoff, limit), and how to delete the rows with those keys.
 * Finished rows only: a pending webhook delivery, the signal of a run still waiting or an
 * unexpired flow-control slot stay whatever their age.
 */
export const PRUNE_SQL: Record<OperationalTable, { select: string; key: string[]; table: string; before?: string }> = {
  idempotency: {
    table: 'idempotency_keys',
    key: ['tenant', 'key'],
    select: 'SELECT tenant, key FROM idempotency_keys WHERE created_at < ? LIMIT ?',
  },
  schedule_fires: {
    table: 'schedule_fires',
    key: ['schedule_id', 'tick'],
    select: 'SELECT schedule_id, tick FROM schedule_fires WHERE fired_at < ? LIMIT ?',
  },
  webhook_deliveries: {
    table: 'webhook_deliveries',
    key: ['id'],
    select: "SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND created_at < ? LIMIT ?",
    before: 'webhook_attempts:delivery_id',
  },
  signals: {
    table: 'run_signals',
    key: ['run_id', 'name'],
    select:
      'SELECT s.run_id, s.name FROM run_signals s JOIN runs r ON r.id = s.run_id WHERE r.ended_at IS NOT NULL AND s.received_at < ? LIMIT ?',
  },
  callbacks: {
    table: 'run_callbacks',
    key: ['token_hash'],
    select:
      'SELECT c.token_hash FROM run_callbacks c JOIN runs r ON r.id = c.run_id WHERE r.ended_at IS NOT NULL AND c.created_at < ? LIMIT ?',
  },
  flow_control: {
    table: 'model_limit_usage',
    key: ['key', 'id'],
    select: 'SELECT key, id FROM model_limit_usage WHERE at < ? LIMIT ?',
  },
  experiment_items: {
    table: 'batch_items',
    key: ['id'],
    select:
      "SELECT i.id FROM batch_items i JOIN batches b ON b.id = i.batch_id WHERE b.status <> 'running' AND b.ended_at < ? LIMIT ?",
  },
};
