/** SQLite schema version 10 (waits): see its comment. */
import { sqliteWaitsMigration } from '../../wait-rows.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // The waiting model (ADR-0015): sleeping and waiting_for_signal runs, signals and callback tokens.
  version: 10,
  sql: sqliteWaitsMigration(),
};
