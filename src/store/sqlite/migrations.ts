import type Database from 'better-sqlite3';
import { SchemaVersionError } from '../port.ts';

/**
 * Versioned schema migrations, applied in order at open. The database's `user_version` records the
 * last one applied; a database written by a newer Keel (a higher version) is refused.
 */
export const migrations: ReadonlyArray<{ version: number; sql: string }> = [
  {
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
  },
  {
    version: 2,
    sql: `
      CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        parent_run_id TEXT REFERENCES runs(id),
        parent_tool_call_id TEXT,
        agent_name TEXT NOT NULL,
        agent_version TEXT NOT NULL,
        agent_spec TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('queued','running','waiting_approval','waiting_for_user','paused','completed','failed','cancelled','timed_out')),
        trigger_message_id TEXT,
        turn INTEGER,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        ended_at INTEGER,
        attempt INTEGER NOT NULL DEFAULT 0,
        usage TEXT NOT NULL DEFAULT '{}',
        cost REAL NOT NULL DEFAULT 0,
        error TEXT,
        waiting TEXT,
        lease_owner TEXT,
        lease_expires_at INTEGER,
        fencing_token INTEGER NOT NULL DEFAULT 0,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        pause_requested INTEGER NOT NULL DEFAULT 0,
        deadline_at INTEGER,
        options TEXT NOT NULL DEFAULT '{}'
      );
      -- At most one active run per session, enforced by the database itself.
      CREATE UNIQUE INDEX runs_one_active ON runs(session_id)
        WHERE status NOT IN ('completed','failed','cancelled','timed_out');
      CREATE INDEX runs_claimable ON runs(status, created_at);
      CREATE INDEX runs_session ON runs(session_id, id);
      CREATE INDEX runs_parent ON runs(parent_run_id) WHERE parent_run_id IS NOT NULL;

      CREATE TABLE run_checkpoints (
        run_id TEXT PRIMARY KEY REFERENCES runs(id),
        step INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        state TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );

      CREATE TABLE run_inputs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        kind TEXT NOT NULL CHECK (kind IN ('steer','message')),
        run_id TEXT,
        payload TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX run_inputs_session ON run_inputs(session_id, kind, created_at, id);
    `,
  },
  {
    version: 3,
    sql: `
      -- Every session (and so every run) belongs to a tenant; API keys are bound to one.
      ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
      CREATE INDEX sessions_tenant ON sessions(tenant, id);

      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT,
        hash TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        rate_per_minute INTEGER,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      );

      CREATE TABLE idempotency_keys (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, key)
      );
    `,
  },
  {
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
  },
];

export const latestSchemaVersion = migrations.at(-1)!.version;

/** Brings the database up to the latest schema; refuses (SchemaVersionError) one written by a newer Keel. */
export function migrate(db: Database.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > latestSchemaVersion) {
    throw new SchemaVersionError(
      `the database was written by a newer Keel (schema version ${current}; this Keel knows up to ${latestSchemaVersion}): upgrade Keel to open it`,
    );
  }
  for (const m of migrations) {
    // Re-read inside the write transaction: another process may have migrated meanwhile.
    db.transaction(() => {
      const v = db.pragma('user_version', { simple: true }) as number;
      if (v >= m.version) return;
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
  }
}
