/** PostgreSQL schema version 12 (rerun lineage): see its comment. */
import { RERUN_OF_MIGRATION_SQL } from '../../rerun-of.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Each rerun's lineage on its row (the run it re-runs), and the reruns indexed by that run
  // (rerun-of.ts). A nullable column without a default: adding it rewrites no run row.
  version: 12,
  sql: RERUN_OF_MIGRATION_SQL,
};
