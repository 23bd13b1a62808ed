/** PostgreSQL schema version 7 (webhooks): see its comment. */
import { WEBHOOKS_MIGRATION_SQL } from '../webhooks.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Webhooks (ADR-0017): subscriptions, the outbox of deliveries, their attempts.
  version: 7,
  sql: WEBHOOKS_MIGRATION_SQL,
};
