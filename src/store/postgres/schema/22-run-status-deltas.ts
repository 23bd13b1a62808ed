/** PostgreSQL schema version 22: the runs' counts by status kept as deltas that take no lock (ADR-0050). */
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  version: 22,
  sql: `
      -- A run's status change used to update its status's counter rows (run_status_counts, 32
      -- shards), locked until the transaction committed: a transaction that moves two runs (a turn's
      -- end that claims the next run, a message that claims one) held four counter rows across its
      -- round trips, and concurrent ones queued behind each other, or deadlocked. Now it inserts a
      -- delta row instead, which locks nothing; the counts are the counter rows plus the deltas,
      -- read in one statement, and the deltas are folded into the counter rows now and then
      -- (keel_fold_run_status_counts, called by every process that uses the store).
      CREATE TABLE IF NOT EXISTS run_status_deltas (status text NOT NULL, n integer NOT NULL);
      CREATE OR REPLACE FUNCTION keel_count_runs() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO run_status_deltas (status, n) VALUES (NEW.status, 1);
        ELSIF TG_OP = 'DELETE' THEN
          INSERT INTO run_status_deltas (status, n) VALUES (OLD.status, -1);
        ELSIF NEW.status <> OLD.status THEN
          INSERT INTO run_status_deltas (status, n) VALUES (OLD.status, -1), (NEW.status, 1);
        END IF;
        RETURN NULL;
      END $$;
      -- Each delta is removed by one fold only (a concurrent fold that meets a row another deleted
      -- skips it) and added to shard 0 of its status in the same transaction.
      CREATE OR REPLACE FUNCTION keel_fold_run_status_counts() RETURNS void LANGUAGE sql AS $$
        WITH d AS (DELETE FROM run_status_deltas RETURNING status, n)
        INSERT INTO run_status_counts AS c (status, shard, n)
          SELECT status, 0, sum(n) FROM d GROUP BY status
          ON CONFLICT (status, shard) DO UPDATE SET n = c.n + EXCLUDED.n
      $$;
    `,
};
