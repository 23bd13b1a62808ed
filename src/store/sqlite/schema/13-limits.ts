/** SQLite schema version 13 (limits): see its comment. */
import { limitsDdl } from '../../limit-rows.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Provider flow control (docs/flow-control.md): limit slots, windows, pauses and waiters.
  version: 13,
  sql: limitsDdl('INTEGER'),
};
