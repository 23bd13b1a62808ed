/** SQLite schema version 2: runs inputs keys idempotency. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
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
};
