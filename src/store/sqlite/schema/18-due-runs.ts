/** SQLite schema version 18 (due runs): see its comment. */
import { SQLITE_DUE_RUNS_MIGRATION } from '../../due-runs.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // When an idle run is next due (ADR-0034): a generated column and its partial index, so that a
  // sweep reads what is due from the index instead of listing the idle runs. Why Keel paused a
  // schedule by itself (its target session was archived or erased).
  version: 18,
  sql: `${SQLITE_DUE_RUNS_MIGRATION}
      ALTER TABLE schedules ADD COLUMN paused_reason TEXT;`,
};
