/** PostgreSQL schema version 10 (webhook columns): see its comment. */
import { DISABLED_SUBSCRIPTION_ERROR } from '../../port/index.ts';
import type { PostgresMigration } from './migration.ts';

/**
 * Schema v10 (issue 38): when a delivery ended (`ended_at`, indexed for retention); pending
 * deliveries of disabled subscriptions end failed, as disabling now does; the session of a
 * delivery's event (`session_id`, indexed: erasing the session removes them); a rotated secret's
 * predecessor and its expiry. Written to run again harmlessly (IF NOT EXISTS).
 */
export const WEBHOOKS_MIGRATION_2_SQL = `
  ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS ended_at bigint;
  ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS session_id text;
  CREATE INDEX IF NOT EXISTS webhook_deliveries_session ON webhook_deliveries (session_id) WHERE session_id IS NOT NULL;
  UPDATE webhook_deliveries d SET ended_at = coalesce(d.delivered_at,
      (SELECT max(a.started_at + a.duration_ms) FROM webhook_attempts a WHERE a.delivery_id = d.id), d.created_at)
    WHERE d.status <> 'pending' AND d.ended_at IS NULL;
  UPDATE webhook_deliveries d SET status = 'failed', next_attempt_at = NULL, leased_until = NULL, last_error = '${DISABLED_SUBSCRIPTION_ERROR}', ended_at = w.updated_at
    FROM webhooks w WHERE w.id = d.webhook_id AND NOT w.active AND d.status = 'pending';
  CREATE INDEX IF NOT EXISTS webhook_deliveries_ended ON webhook_deliveries (status, ended_at) WHERE ended_at IS NOT NULL;
  ALTER TABLE webhooks ADD COLUMN IF NOT EXISTS previous_secret text;
  ALTER TABLE webhooks ADD COLUMN IF NOT EXISTS previous_secret_expires_at bigint;
`;

export const migration: PostgresMigration = {
  // Webhooks, issue 38: delivery end times (retention) and sessions (erasure), rotated secrets (see WEBHOOKS_MIGRATION_2_SQL).
  version: 10,
  sql: WEBHOOKS_MIGRATION_2_SQL,
};
