/** SQLite schema version 1: sessions events blobs snapshots. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 1,
  sql: `
      CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        title TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        agent TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        leaf_id TEXT,
        origin_session_id TEXT,
        origin_entry_id TEXT,
        archived_at INTEGER
      );

      CREATE TABLE events (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        v INTEGER NOT NULL,
        time INTEGER NOT NULL,
        run_id TEXT,
        turn INTEGER,
        step INTEGER,
        entry INTEGER NOT NULL,
        parent_id TEXT REFERENCES events(id),
        ignorable INTEGER NOT NULL DEFAULT 0,
        data TEXT NOT NULL,
        UNIQUE (session_id, seq)
      );
      CREATE INDEX events_run ON events(run_id, seq) WHERE run_id IS NOT NULL;

      -- The log is append-only: no code path may change or remove an event.
      CREATE TRIGGER events_no_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      CREATE TRIGGER events_no_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;

      CREATE TABLE blobs (
        hash TEXT PRIMARY KEY,
        data TEXT NOT NULL,
        size INTEGER NOT NULL,
        created_at INTEGER NOT NULL
      );

      CREATE TABLE snapshots (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        projection TEXT NOT NULL,
        version INTEGER NOT NULL,
        as_of_seq INTEGER NOT NULL,
        leaf_id TEXT,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, projection, version)
      );
    `,
};
