/** SQLite schema version 12 (webhooks): see its comment. */
import type { SqliteMigration } from './migration.ts';

/** Schema v12: webhook subscriptions, the outbox of deliveries, their attempts (ADR-0017). */
export const WEBHOOKS_MIGRATION_SQL = `
  CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX webhooks_tenant ON webhooks(tenant, active);

  CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    event_type TEXT NOT NULL,
    event_id TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    claim INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    next_attempt_at INTEGER,
    retry_until INTEGER NOT NULL,
    delivered_at INTEGER,
    last_error TEXT,
    last_status_code INTEGER,
    leased_until INTEGER
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';
  CREATE INDEX webhook_deliveries_of ON webhook_deliveries(webhook_id, created_at);

  CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    status_code INTEGER,
    error TEXT,
    PRIMARY KEY (delivery_id, n)
  ) WITHOUT ROWID;
`;

export const migration: SqliteMigration = {
  // Webhooks (ADR-0017): subscriptions, the outbox of deliveries, their attempts.
  version: 12,
  sql: WEBHOOKS_MIGRATION_SQL,
};
