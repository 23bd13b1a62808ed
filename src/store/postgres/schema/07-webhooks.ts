/** PostgreSQL schema version 7 (webhooks): see its comment. */
import type { PostgresMigration } from './migration.ts';

/** Schema v7: webhook subscriptions, the outbox of deliveries, their attempts (ADR-0017). */
export const WEBHOOKS_MIGRATION_SQL = `
  CREATE TABLE webhooks (
    id text PRIMARY KEY,
    tenant text NOT NULL,
    url text NOT NULL,
    events text NOT NULL,
    secret text NOT NULL,
    active boolean NOT NULL DEFAULT true,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
  );
  CREATE INDEX webhooks_tenant ON webhooks (tenant) WHERE active;

  CREATE TABLE webhook_deliveries (
    id text PRIMARY KEY,
    webhook_id text NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    tenant text NOT NULL,
    event_type text NOT NULL,
    event_id text NOT NULL,
    body text NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    attempts integer NOT NULL DEFAULT 0,
    claim integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    next_attempt_at bigint,
    retry_until bigint NOT NULL,
    delivered_at bigint,
    last_error text,
    last_status_code integer,
    leased_until bigint
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
  CREATE INDEX webhook_deliveries_of ON webhook_deliveries (webhook_id, id);

  CREATE TABLE webhook_attempts (
    delivery_id text NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    n integer NOT NULL,
    started_at bigint NOT NULL,
    duration_ms integer NOT NULL,
    status_code integer,
    error text,
    PRIMARY KEY (delivery_id, n)
  );
`;

export const migration: PostgresMigration = {
  // Webhooks (ADR-0017): subscriptions, the outbox of deliveries, their attempts.
  version: 7,
  sql: WEBHOOKS_MIGRATION_SQL,
};
