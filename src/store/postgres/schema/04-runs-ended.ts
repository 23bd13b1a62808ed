/** PostgreSQL schema version 4: runs ended. */
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  version: 4,
  sql: `
      -- Usage by time (usageTotals): the runs that ended in a range, from the index.
      CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;
    `,
};
