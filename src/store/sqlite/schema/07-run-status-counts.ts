/** SQLite schema version 7: run status counts. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 7,
  sql: `
      -- Runs by status, kept by the database itself as runs are created and move: /metrics reads
      -- a handful of rows, not the runs.
      CREATE TABLE run_status_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
      INSERT INTO run_status_counts (status, n) SELECT status, count(*) FROM runs GROUP BY status;
      CREATE TRIGGER runs_count_insert AFTER INSERT ON runs BEGIN
        INSERT INTO run_status_counts (status, n) VALUES (NEW.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
      END;
      CREATE TRIGGER runs_count_update AFTER UPDATE OF status ON runs WHEN OLD.status <> NEW.status BEGIN
        UPDATE run_status_counts SET n = n - 1 WHERE status = OLD.status;
        INSERT INTO run_status_counts (status, n) VALUES (NEW.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
      END;
      CREATE TRIGGER runs_count_delete AFTER DELETE ON runs BEGIN
        UPDATE run_status_counts SET n = n - 1 WHERE status = OLD.status;
      END;

      -- Idempotency records expire: pruned by age.
      CREATE INDEX idempotency_keys_age ON idempotency_keys(created_at);
    `,
};
