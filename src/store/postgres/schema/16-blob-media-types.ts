/** PostgreSQL schema version 16 (large payloads' media types): see its comment. */
import type { PostgresMigration } from './migration.ts';

/**
 * Schema v16 (issue 42, ADR-0040): a blob holding a large payload says what it is, so that the API
 * serves it by hash with its type: `media_type` (null for the JSON of an event field, as every blob
 * before) and `encoding` (`base64` for an attachment's file, whose bytes the API serves decoded).
 * `blob_heads` keeps the first characters of each large payload (BLOB_HEAD_CHARS), so that the
 * model's truncated view reads them alone. Existing blobs keep null in both (none of them is a
 * large payload). Written to run again harmlessly.
 */
export const BLOB_MEDIA_TYPES_MIGRATION_SQL = `
  ALTER TABLE blobs ADD COLUMN IF NOT EXISTS media_type text;
  ALTER TABLE blobs ADD COLUMN IF NOT EXISTS encoding text;
  CREATE TABLE IF NOT EXISTS blob_heads (hash text PRIMARY KEY, head text NOT NULL);
`;

export const migration: PostgresMigration = {
  // Large payloads' media types (issue 42): see BLOB_MEDIA_TYPES_MIGRATION_SQL.
  version: 16,
  sql: BLOB_MEDIA_TYPES_MIGRATION_SQL,
};
