/** SQLite schema version 9: runs ended. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 9,
  sql: `
      -- Usage by time (usageTotals): the runs that ended in a range, from the index.
      CREATE INDEX runs_ended ON runs(ended_at) WHERE ended_at IS NOT NULL;
    `,
};
