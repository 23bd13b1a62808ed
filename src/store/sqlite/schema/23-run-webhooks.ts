/** SQLite schema version 23 (a run's own webhook subscriptions): see its comment. */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.ts';

/**
 * Schema v23 (issue 41): a subscription may be a run's own (`run_id`, indexed: an A2A push
 * notification config), carry another body format (`format`, null for Keel's), extra headers
 * (`headers`, JSON) and the protocol's id for it (`ref`). Columns are added where they are missing,
 * so that a database rewound to an older version number (as tests make one) migrates too.
 */
export function addRunWebhookColumns(db: Database.Database): void {
  const has = (column: string) =>
    (db.pragma('table_info(webhooks)') as Array<{ name: string }>).some((c) => c.name === column);
  for (const column of ['run_id', 'format', 'headers', 'ref']) {
    if (!has(column)) db.exec(`ALTER TABLE webhooks ADD COLUMN ${column} TEXT`);
  }
  db.exec('CREATE INDEX IF NOT EXISTS webhooks_run ON webhooks(run_id) WHERE run_id IS NOT NULL');
}

export const migration: SqliteMigration = {
  // A run's own webhook subscriptions (A2A push notification configs, issue 41): see addRunWebhookColumns.
  version: 23,
  sql: `SELECT 1;`,
  run: addRunWebhookColumns,
};
