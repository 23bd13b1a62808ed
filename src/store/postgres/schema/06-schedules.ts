/** PostgreSQL schema version 6 (schedules): see its comment. */
import { schedulesDdl } from '../../schedule-rows.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Schedules and their fires (ADR-0016); 5 and 7 are reserved for other features.
  version: 6,
  sql: schedulesDdl('BIGINT'),
};
