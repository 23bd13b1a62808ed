/** SQLite schema version 19 (webhook columns): see its comment. */
import { addWebhookColumns } from '../webhooks.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Webhooks, issue 38: delivery end times (retention) and sessions (erasure), rotated secrets (see addWebhookColumns).
  version: 19,
  sql: `SELECT 1;`,
  run: addWebhookColumns,
};
