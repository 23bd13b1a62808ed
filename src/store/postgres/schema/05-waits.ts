/** PostgreSQL schema version 5 (waits): see its comment. */
import { postgresWaitsMigration } from '../../wait-rows.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // The waiting model (ADR-0015): sleeping and waiting_for_signal runs, signals and callback tokens.
  version: 5,
  sql: postgresWaitsMigration(),
};
