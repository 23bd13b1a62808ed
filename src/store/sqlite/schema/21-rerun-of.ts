/** SQLite schema version 21 (rerun lineage): see its comment. */
import { RERUN_OF_MIGRATION_SQL } from '../../rerun-of.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Each rerun's lineage on its row (the run it re-runs), and the reruns indexed by that run
  // (rerun-of.ts). Existing runs are no reruns: the column stays null for them.
  version: 21,
  sql: RERUN_OF_MIGRATION_SQL,
};
