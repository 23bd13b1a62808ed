/**
 * The lineage of a rerun (issue 40), on its row: the run it re-runs (`rerun_of`), written when the
 * rerun is created and never changed; null for every other run, and for the runs of a database from
 * before the migration that added it (SQLite schema v21, PostgreSQL v12). Its details (what was
 * replayed, from where) are in the run's options (`options.rerun`); the column is what a query
 * filters by: the reruns of a run are read from an index of the reruns only.
 */
/**
 * The migration, the same in both dialects: the column (no foreign key: a rerun names its run
 * whatever becomes of it) and an index of the reruns by the run they re-run, in id order.
 */
export const RERUN_OF_MIGRATION_SQL = `
  ALTER TABLE runs ADD COLUMN rerun_of TEXT;
  CREATE INDEX runs_rerun_of ON runs (rerun_of, id) WHERE rerun_of IS NOT NULL;
`;
