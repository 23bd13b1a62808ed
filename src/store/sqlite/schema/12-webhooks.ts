/** SQLite schema version 12 (webhooks): see its comment. */
import { WEBHOOKS_MIGRATION_SQL } from '../webhooks.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Webhooks (ADR-0017): subscriptions, the outbox of deliveries, their attempts.
  version: 12,
  sql: WEBHOOKS_MIGRATION_SQL,
};
