/** PostgreSQL schema version 8 (limits): see its comment. */
import { limitsDdl } from '../../limit-rows.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Provider flow control (docs/flow-control.md): limit slots, windows, pauses and waiters.
  version: 8,
  sql: limitsDdl('BIGINT'),
};
