/** SQLite schema version 24 (retention and archives, issue 42): see its comment. */
import type Database from 'better-sqlite3';
import { retentionTablesDdl } from '../../retention-rows.ts';
import type { SqliteMigration } from './migration.ts';

/**
 * Schema v24: a session moved to an archive store keeps its row, marked (`in_archive_at`), with
 * where its archive is (`session_archives`); a restored one counts as active from its restore
 * (`restored_at`). Policies set by API and the retention worker's lease. Columns are added where
 * they are missing, so that a database rewound to an older version number migrates too.
 */
export function addRetention(db: Database.Database): void {
  const has = (column: string) =>
    (db.pragma('table_info(sessions)') as Array<{ name: string }>).some((c) => c.name === column);
  for (const column of ['in_archive_at', 'restored_at'])
    if (!has(column)) db.exec(`ALTER TABLE sessions ADD COLUMN ${column} INTEGER`);
  db.exec(retentionTablesDdl('INTEGER'));
}

export const migration: SqliteMigration = {
  version: 24,
  sql: `SELECT 1;`,
  run: addRetention,
};
