/** SQLite schema version 4: last turn. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 4,
  sql: `
      -- The highest turn number of a session's events, kept with each append: the next turn's
      -- number without reading the log (ADR-0008).
      ALTER TABLE sessions ADD COLUMN last_turn INTEGER NOT NULL DEFAULT 0;
      UPDATE sessions SET last_turn = coalesce((SELECT max(turn) FROM events WHERE events.session_id = sessions.id), 0);

      -- A run's events all follow its first one in its session: reading them is a range of the
      -- session's seqs from there, so the events need no index by run (one index less to write
      -- per event on the hot path).
      ALTER TABLE runs ADD COLUMN first_seq INTEGER;
      UPDATE runs SET first_seq = (SELECT min(seq) FROM events WHERE events.run_id = runs.id AND events.session_id = runs.session_id);
      DROP INDEX events_run;

      -- A run's children in id order straight from the index (the run's usage roll-up reads them
      -- at every end): without the id in it, the planner walked the whole table in id order.
      DROP INDEX runs_parent;
      CREATE INDEX runs_parent ON runs(parent_run_id, id) WHERE parent_run_id IS NOT NULL;
    `,
};
