/** PostgreSQL schema version 10 (webhook columns): see its comment. */
import { WEBHOOKS_MIGRATION_2_SQL } from '../webhooks.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Webhooks, issue 38: delivery end times (retention) and sessions (erasure), rotated secrets (see WEBHOOKS_MIGRATION_2_SQL).
  version: 10,
  sql: WEBHOOKS_MIGRATION_2_SQL,
};
