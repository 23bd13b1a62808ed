/** PostgreSQL schema version 14 (a run's own webhook subscriptions): see its comment. */
import type { PostgresMigration } from './migration.ts';

/**
 * Schema v14 (issue 41): a subscription may be a run's own (`run_id`, indexed: an A2A push
 * notification config), carry another body format (`format`, null for Keel's), extra headers
 * (`headers`, JSON) and the protocol's id for it (`ref`). Written to run again harmlessly.
 */
export const RUN_WEBHOOKS_MIGRATION_SQL = `
  ALTER TABLE webhooks ADD COLUMN IF NOT EXISTS run_id text;
  ALTER TABLE webhooks ADD COLUMN IF NOT EXISTS format text;
  ALTER TABLE webhooks ADD COLUMN IF NOT EXISTS headers text;
  ALTER TABLE webhooks ADD COLUMN IF NOT EXISTS ref text;
  CREATE INDEX IF NOT EXISTS webhooks_run ON webhooks (run_id) WHERE run_id IS NOT NULL;
`;

export const migration: PostgresMigration = {
  // A run's own webhook subscriptions (A2A push notification configs, issue 41): see RUN_WEBHOOKS_MIGRATION_SQL.
  version: 14,
  sql: RUN_WEBHOOKS_MIGRATION_SQL,
};
