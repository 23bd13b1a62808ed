/** SQLite schema version 25 (large payloads' media types): see its comment. */
import type Database from 'better-sqlite3';
import type { SqliteMigration } from './migration.ts';

/**
 * Schema v25 (issue 42, ADR-0040): a blob holding a large payload says what it is, so that the API
 * serves it by hash with its type: `media_type` (null for the JSON of an event field, as every blob
 * before) and `encoding` (`base64` for an attachment's file, whose bytes the API serves decoded).
 * `blob_heads` keeps the first characters of each large payload (BLOB_HEAD_CHARS), so that the
 * model's truncated view of a 50 MB result reads 64 KiB, not the 50 MB value. Columns are added
 * where they are missing, so that a database rewound to an older version number (as tests make
 * one) migrates too; existing blobs keep null in both (none of them is a large payload).
 */
export function addBlobMediaTypes(db: Database.Database): void {
  const has = (column: string) =>
    (db.pragma('table_info(blobs)') as Array<{ name: string }>).some((c) => c.name === column);
  for (const column of ['media_type', 'encoding']) {
    if (!has(column)) db.exec(`ALTER TABLE blobs ADD COLUMN ${column} TEXT`);
  }
  db.exec('CREATE TABLE IF NOT EXISTS blob_heads (hash TEXT PRIMARY KEY, head TEXT NOT NULL)');
}

export const migration: SqliteMigration = {
  // Large payloads' media types (issue 42): see addBlobMediaTypes.
  version: 25,
  sql: `SELECT 1;`,
  run: addBlobMediaTypes,
};
