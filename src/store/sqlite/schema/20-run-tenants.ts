/** SQLite schema version 20 (run tenants): see its comment. */
import { RUN_TENANTS_MIGRATION_SQL } from '../../run-tenants.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Each run's tenant on its row, and the runs waiting for a person indexed by tenant (the inbox
  // filters by tenant in its query: run-tenants.ts).
  version: 20,
  sql: RUN_TENANTS_MIGRATION_SQL,
};
