/** SQLite schema version 6: queued behind. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 6,
  sql: `
      -- An enqueued message is a run at once, queued behind the session's active run: not
      -- claimable, and outside the one-active-run guarantee, until that run ends.
      ALTER TABLE runs ADD COLUMN queued_behind INTEGER NOT NULL DEFAULT 0;
      DROP INDEX runs_one_active;
      CREATE UNIQUE INDEX runs_one_active ON runs(session_id)
        WHERE status NOT IN ('completed','failed','cancelled','timed_out') AND queued_behind = 0;
      CREATE INDEX runs_queued_behind ON runs(session_id, created_at, id) WHERE queued_behind = 1;
    `,
};
