/** SQLite schema version 28 (the erasure audit): see its comment. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // The erasure audit (issue 42, ADR-0041): that an erasure happened, its scope, a hash of its
  // target (never the target), who asked and when, and how many rows of each kind it removed; and
  // the indexes a session's erasure finds the rows that link to it by (forks, batch items of its
  // runs, schedules whose last run was one of its, deliveries written before they named their
  // session), partial: only rows that have such a link.
  version: 28,
  sql: `
    CREATE TABLE IF NOT EXISTS erasures (
      id TEXT PRIMARY KEY,
      scope TEXT NOT NULL CHECK (scope IN ('session', 'tenant', 'before')),
      target_hash TEXT NOT NULL,
      by TEXT NOT NULL,
      at INTEGER NOT NULL,
      counts TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX IF NOT EXISTS sessions_origin ON sessions (origin_session_id) WHERE origin_session_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS batch_items_run ON batch_items (run_id) WHERE run_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS schedules_last_run ON schedules (last_run_id) WHERE last_run_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS webhook_deliveries_without_session ON webhook_deliveries (id) WHERE session_id IS NULL;
  `,
};
