/**
 * The store's part of the waiting model (ADR-0015): signals delivered to runs (exactly once per
 * run and name, kept when they arrive before the wait) and callback tokens (stored hashed) that
 * let a third party deliver one without an API key.
 */
import type { CallbackRecord, SignalRecord } from './port/index.ts';
/** Every run status, as the CHECK constraints of both backends list them (ADR-0015 added the last two). */
export const RUN_STATUS_SQL = `'queued','running','waiting_approval','waiting_for_user','paused','completed','failed','cancelled','timed_out','sleeping','waiting_for_signal'`;

/** The signal and callback tables (SQLite migration 10, PostgreSQL migration 5). */
export function signalsDdl(int: 'INTEGER' | 'BIGINT'): string {
  const rowid = int === 'INTEGER' ? ' WITHOUT ROWID' : '';
  return `
      -- A signal is delivered once per run and name (the primary key): a second delivery is refused.
      -- One that comes before the wait starts waits here (consumed_at NULL) until the wait takes it.
      CREATE TABLE run_signals (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        payload TEXT NOT NULL,
        source TEXT NOT NULL,
        received_at ${int} NOT NULL,
        consumed_at ${int},
        PRIMARY KEY (run_id, name)
      )${rowid};
      -- Callback tokens by their hash: the token alone authorizes the delivery of one signal.
      CREATE TABLE run_callbacks (
        token_hash TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at ${int} NOT NULL
      )${rowid};
      CREATE INDEX run_callbacks_run ON run_callbacks (run_id);
  `;
}

/**
 * SQLite migration 10: the runs table again with the new statuses in its CHECK constraint (SQLite
 * cannot alter a constraint: the table is rebuilt, with its indexes and status-count triggers),
 * and the signal tables. Runs in the same write transaction as every migration.
 */
export function sqliteWaitsMigration(): string {
  return `
      PRAGMA defer_foreign_keys = ON;
      DROP TRIGGER runs_count_insert;
      DROP TRIGGER runs_count_update;
      DROP TRIGGER runs_count_delete;
      CREATE TABLE runs_v10 (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        parent_run_id TEXT REFERENCES runs(id),
        parent_tool_call_id TEXT,
        agent_name TEXT NOT NULL,
        agent_version TEXT NOT NULL,
        agent_spec TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN (${RUN_STATUS_SQL})),
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
        options TEXT NOT NULL DEFAULT '{}',
        first_seq INTEGER,
        queued_behind INTEGER NOT NULL DEFAULT 0
      );
      -- Rows that refer to runs are set aside while the old table goes (its implicit delete must
      -- find no children), then come back, parents first.
      CREATE TEMP TABLE runs_v9_rows AS SELECT * FROM runs;
      CREATE TEMP TABLE run_checkpoints_v9_rows AS SELECT * FROM run_checkpoints;
      DELETE FROM run_checkpoints;
      DROP TABLE runs;
      ALTER TABLE runs_v10 RENAME TO runs;
      INSERT INTO runs (id, session_id, parent_run_id, parent_tool_call_id, agent_name, agent_version, agent_spec, status, trigger_message_id, turn,
               created_at, started_at, ended_at, attempt, usage, cost, error, waiting, lease_owner, lease_expires_at, fencing_token,
               cancel_requested, pause_requested, deadline_at, options, first_seq, queued_behind)
        SELECT id, session_id, parent_run_id, parent_tool_call_id, agent_name, agent_version, agent_spec, status, trigger_message_id, turn,
               created_at, started_at, ended_at, attempt, usage, cost, error, waiting, lease_owner, lease_expires_at, fencing_token,
               cancel_requested, pause_requested, deadline_at, options, first_seq, queued_behind FROM temp.runs_v9_rows ORDER BY created_at, id;
      INSERT INTO run_checkpoints SELECT * FROM temp.run_checkpoints_v9_rows;
      DROP TABLE temp.runs_v9_rows;
      DROP TABLE temp.run_checkpoints_v9_rows;
      CREATE UNIQUE INDEX runs_one_active ON runs(session_id)
        WHERE status NOT IN ('completed','failed','cancelled','timed_out') AND queued_behind = 0;
      CREATE INDEX runs_claimable ON runs(status, created_at);
      CREATE INDEX runs_session ON runs(session_id, id);
      CREATE INDEX runs_parent ON runs(parent_run_id, id) WHERE parent_run_id IS NOT NULL;
      CREATE INDEX runs_queued_behind ON runs(session_id, created_at, id) WHERE queued_behind = 1;
      CREATE INDEX runs_ended ON runs(ended_at) WHERE ended_at IS NOT NULL;
      DELETE FROM run_status_counts;
      INSERT INTO run_status_counts (status, n) SELECT status, count(*) FROM runs GROUP BY status;
      CREATE TRIGGER runs_count_insert AFTER INSERT ON runs BEGIN
        INSERT INTO run_status_counts (status, n) VALUES (NEW.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
      END;
      CREATE TRIGGER runs_count_update AFTER UPDATE OF status ON runs WHEN OLD.status <> NEW.status BEGIN
        UPDATE run_status_counts SET n = n - 1 WHERE status = OLD.status;
        INSERT INTO run_status_counts (status, n) VALUES (NEW.status, 1) ON CONFLICT (status) DO UPDATE SET n = n + 1;
      END;
      CREATE TRIGGER runs_count_delete AFTER DELETE ON runs BEGIN
        UPDATE run_status_counts SET n = n - 1 WHERE status = OLD.status;
      END;
      ${signalsDdl('INTEGER')}
  `;
}

/** PostgreSQL migration 5: the new statuses in the runs CHECK constraint, and the signal tables. */
export function postgresWaitsMigration(): string {
  return `
      ALTER TABLE runs DROP CONSTRAINT runs_status_check;
      ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN (${RUN_STATUS_SQL}));
      ${signalsDdl('BIGINT')}
  `;
}

export type SignalRow = {
  run_id: string;
  name: string;
  payload: string;
  source: string;
  received_at: number | string;
  consumed_at: number | string | null;
};
export type CallbackRow = { token_hash: string; run_id: string; name: string; created_at: number | string };

export const toSignal = (r: SignalRow): SignalRecord => ({
  runId: r.run_id,
  name: r.name,
  payload: JSON.parse(r.payload) as unknown,
  source: r.source as SignalRecord['source'],
  receivedAt: Number(r.received_at),
  consumedAt: r.consumed_at === null ? null : Number(r.consumed_at),
});

export const toCallback = (r: CallbackRow): CallbackRecord => ({
  tokenHash: r.token_hash,
  runId: r.run_id,
  name: r.name,
  createdAt: Number(r.created_at),
});
