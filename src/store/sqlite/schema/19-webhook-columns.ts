/** SQLite schema version 19 (webhook columns): see its comment. */
import type Database from 'better-sqlite3';
import { DISABLED_SUBSCRIPTION_ERROR } from '../../port/index.ts';
import type { SqliteMigration } from './migration.ts';

/**
 * Schema v19 (issue 38): when a delivery ended (`ended_at`, indexed for retention); pending
 * deliveries of disabled subscriptions end failed, as disabling now does; the session of a
 * delivery's event (`session_id`, indexed: erasing the session removes them); a rotated secret's
 * predecessor and its expiry. Columns are added where they are missing (`addWebhookColumns`), so
 * that a database rewound to an older version number (as tests make one) migrates too.
 */
export function addWebhookColumns(db: Database.Database): void {
  const has = (table: string, column: string) =>
    (db.pragma(`table_info(${table})`) as Array<{ name: string }>).some((c) => c.name === column);
  for (const [table, column, type] of [
    ['webhook_deliveries', 'ended_at', 'INTEGER'],
    ['webhook_deliveries', 'session_id', 'TEXT'],
    ['webhooks', 'previous_secret', 'TEXT'],
    ['webhooks', 'previous_secret_expires_at', 'INTEGER'],
  ] as const) {
    if (!has(table, column)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
  }
  db.exec(`
    CREATE INDEX IF NOT EXISTS webhook_deliveries_session ON webhook_deliveries(session_id) WHERE session_id IS NOT NULL;
    UPDATE webhook_deliveries SET ended_at = coalesce(delivered_at,
        (SELECT max(a.started_at + a.duration_ms) FROM webhook_attempts a WHERE a.delivery_id = webhook_deliveries.id), created_at)
      WHERE status <> 'pending' AND ended_at IS NULL;
    UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, leased_until = NULL, last_error = '${DISABLED_SUBSCRIPTION_ERROR}',
        ended_at = coalesce((SELECT w.updated_at FROM webhooks w WHERE w.id = webhook_id), created_at)
      WHERE status = 'pending' AND webhook_id IN (SELECT id FROM webhooks WHERE active = 0);
    CREATE INDEX IF NOT EXISTS webhook_deliveries_ended ON webhook_deliveries(status, ended_at) WHERE ended_at IS NOT NULL;
  `);
}

export const migration: SqliteMigration = {
  // Webhooks, issue 38: delivery end times (retention) and sessions (erasure), rotated secrets (see addWebhookColumns).
  version: 19,
  sql: `SELECT 1;`,
  run: addWebhookColumns,
};
