/** PostgreSQL schema version 11 (run tenants): see its comment. */
import { RUN_TENANTS_MIGRATION_SQL } from '../../run-tenants.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Each run's tenant on its row, and the runs waiting for a person indexed by tenant (the inbox
  // filters by tenant in its query: run-tenants.ts). The update rewrites every run row once.
  version: 11,
  sql: RUN_TENANTS_MIGRATION_SQL,
};
