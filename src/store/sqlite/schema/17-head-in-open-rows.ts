/** SQLite schema version 17 (head in open rows): see its comment. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // The session head rides in the open row an append writes (ADR-0026): a step's commit no longer
  // updates the sessions row. An open row after the sessions row's last_seq says where the head is
  // now: its last seq, the leaf after it and the session's last turn. Older rows leave both null
  // (the sessions row was moved with each of them); an older Keel would read a stale head: it is
  // refused by the version.
  version: 17,
  sql: `
      ALTER TABLE event_batches ADD COLUMN leaf_id TEXT;
      ALTER TABLE event_batches ADD COLUMN turn INTEGER;
    `,
};
