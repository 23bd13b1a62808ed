/** PostgreSQL schema version 18 (tenant quotas): see its comment. */
import { POSTGRES_QUOTAS_MIGRATION } from '../../quota-rows.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Tenant quotas (ADR-0043): the run status `waiting_for_quota` (its CHECK constraint, and `due_at`
  // made again with it) and the ledger of model calls charged to tenants and keys.
  version: 18,
  sql: POSTGRES_QUOTAS_MIGRATION,
};
