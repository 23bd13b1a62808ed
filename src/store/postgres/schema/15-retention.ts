/** PostgreSQL schema version 15 (retention and archives, issue 42): see its comment. */
import { retentionTablesDdl } from '../../retention-rows.ts';
import type { PostgresMigration } from './migration.ts';

/**
 * Schema v15: a session moved to an archive store keeps its row, marked (`in_archive_at`), with
 * where its archive is (`session_archives`); a restored one counts as active from its restore
 * (`restored_at`). Policies set by API and the retention worker's lease. Written to run again harmlessly.
 */
export const RETENTION_MIGRATION_SQL = `
  ALTER TABLE sessions ADD COLUMN IF NOT EXISTS in_archive_at bigint;
  ALTER TABLE sessions ADD COLUMN IF NOT EXISTS restored_at bigint;
  ${retentionTablesDdl('BIGINT')}
`;

export const migration: PostgresMigration = {
  version: 15,
  sql: RETENTION_MIGRATION_SQL,
};
