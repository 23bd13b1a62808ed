/** SQLite schema version 16 (zstd codec): see its comment. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Sealed rows of codec 4 (Zstandard, ADR-0024). No table changes: the number tells an older
  // Keel, which cannot read those rows, to refuse the database instead of failing on them later.
  version: 16,
  sql: `SELECT 1;`,
};
