/** SQLite schema version 27 (tenant quotas): see its comment. */
import { quotaChargesDdl, sqliteQuotaStatusSql } from '../../quota-rows.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Tenant quotas (ADR-0043): the ledger of model calls charged to tenants and keys, and the run
  // status `waiting_for_quota` (in the runs table's CHECK constraint and its virtual `due_at`).
  version: 27,
  sql: quotaChargesDdl('INTEGER', 'REAL'),
  run: (db) => {
    const table = db
      .prepare<[], { sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'")
      .get()!;
    const version = db.pragma('schema_version', { simple: true }) as number;
    // Edited in place (see sqliteQuotaStatusSql): better-sqlite3's defensive mode allows it only in unsafe mode.
    db.unsafeMode(true);
    try {
      db.pragma('writable_schema = ON');
      db.prepare("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'runs'").run(
        sqliteQuotaStatusSql(table.sql),
      );
      db.pragma(`schema_version = ${version + 1}`);
      db.pragma('writable_schema = OFF');
    } finally {
      db.unsafeMode(false);
    }
    // The index on `due_at` holds the values computed before: made again from the new definition.
    db.exec('REINDEX runs_due');
  },
};
