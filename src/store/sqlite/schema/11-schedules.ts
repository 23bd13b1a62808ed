/** SQLite schema version 11 (schedules): see its comment. */
import { schedulesDdl } from '../../schedule-rows.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Schedules and their fires (ADR-0016); 10 and 12 are reserved for other features.
  version: 11,
  sql: schedulesDdl('INTEGER'),
};
