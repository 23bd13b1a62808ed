import type Database from 'better-sqlite3';
import { SchemaVersionError, type StoredEvent } from '../port/index.ts';
import { blobHashesIn } from '../blob-refs.ts';
import { schedulesDdl } from '../schedule-rows.ts';
import { sqliteWaitsMigration } from '../wait-rows.ts';
import { SQLITE_DUE_RUNS_MIGRATION } from '../due-runs.ts';
import { limitsDdl } from '../limit-rows.ts';
import { decodeBatch, encodeOpen0, OPEN_CODECS_SQL, seal, SEALED_CODEC } from './event-batch-codec.ts';
import { idKey, idKeyOrNull } from './id-keys.ts';
import { addWebhookColumns, WEBHOOKS_MIGRATION_SQL } from './webhooks.ts';
import { RUN_TENANTS_MIGRATION_SQL } from '../run-tenants.ts';

/**
 * Versioned schema migrations, applied in order at open. The database's `user_version` records the
 * last one applied; a database written by a newer Keel (a higher version) is refused.
 */
export const migrations: ReadonlyArray<{ version: number; sql: string; run?: (db: Database.Database) => void }> = [
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
  {
    version: 5,
    sql: `
      -- The log in rows of consecutive events (ADR-0009): an append writes one open row (codec 0,
      -- JSON); sealing replaces a session's open rows with one sealed row (codec 1, compressed)
      -- holding the same events. Every seq of a session is in exactly one row once a transaction
      -- commits; the rows after sealed_seq are the open ones. Ids are stored as their 16 bytes
      -- when they are UUIDs (see id-keys.ts).
      CREATE TABLE event_batches (
        session_id BLOB NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        codec INTEGER NOT NULL,
        data BLOB NOT NULL
      );
      -- With the codec: a sealed row and the open rows it replaces coexist inside the sealing
      -- transaction.
      CREATE UNIQUE INDEX event_batches_position ON event_batches(session_id, first_seq, codec);
      ALTER TABLE sessions ADD COLUMN sealed_seq INTEGER NOT NULL DEFAULT 0;

      -- The conversation tree: every entry event by its session and id, with its seq and its parent.
      -- Event ids are unique within their session (an import under a new session id keeps them).
      CREATE TABLE entries (
        session_id BLOB NOT NULL,
        id BLOB NOT NULL,
        seq INTEGER NOT NULL,
        parent_id BLOB,
        PRIMARY KEY (session_id, id)
      ) WITHOUT ROWID;

      -- The log is append-only: no code path may change or remove an event. A row is never
      -- changed; an open row may only be removed once a sealed row holds its events.
      CREATE TRIGGER event_batches_no_update BEFORE UPDATE ON event_batches
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN OLD.codec <> 0 OR NOT EXISTS (
          SELECT 1 FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.codec <> 0 AND s.first_seq <= OLD.first_seq AND s.last_seq >= OLD.last_seq
        )
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
    run: moveEventsIntoBatches,
  },
  {
    version: 6,
    sql: `
      -- An enqueued message is a run at once, queued behind the session's active run: not
      -- claimable, and outside the one-active-run guarantee, until that run ends.
      ALTER TABLE runs ADD COLUMN queued_behind INTEGER NOT NULL DEFAULT 0;
      DROP INDEX runs_one_active;
      CREATE UNIQUE INDEX runs_one_active ON runs(session_id)
        WHERE status NOT IN ('completed','failed','cancelled','timed_out') AND queued_behind = 0;
      CREATE INDEX runs_queued_behind ON runs(session_id, created_at, id) WHERE queued_behind = 1;
    `,
  },
  {
    version: 7,
    sql: `
      -- Runs by status, kept by the database itself as runs are created and move: /metrics reads
      -- a handful of rows, not the runs.
      CREATE TABLE run_status_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
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

      -- Idempotency records expire: pruned by age.
      CREATE INDEX idempotency_keys_age ON idempotency_keys(created_at);
    `,
  },
  {
    version: 8,
    sql: `
      -- Erasure: a session's owner can erase it. What remains is the session row as a tombstone.
      ALTER TABLE sessions ADD COLUMN erased_at INTEGER;
      ALTER TABLE sessions ADD COLUMN erased_totals TEXT;

      -- Which sessions refer to each blob (blobs are shared by content): an erasure removes the
      -- blobs no other session refers to. Kept by append from the hashes in the events it writes.
      CREATE TABLE blob_refs (session_id BLOB NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, hash)) WITHOUT ROWID;
      CREATE INDEX blob_refs_hash ON blob_refs(hash);

      -- The log's rows may be removed only for a session being erased: it is listed here first, in
      -- the erasing transaction. Every other removal is still refused.
      CREATE TABLE erased_logs (session_id BLOB PRIMARY KEY) WITHOUT ROWID;
      DROP TRIGGER event_batches_no_delete;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
         AND (OLD.codec <> 0 OR NOT EXISTS (
          SELECT 1 FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.codec <> 0 AND s.first_seq <= OLD.first_seq AND s.last_seq >= OLD.last_seq
        ))
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      DROP TRIGGER entries_no_delete;
      CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
    run: indexBlobReferences,
  },
  {
    version: 9,
    sql: `
      -- Usage by time (usageTotals): the runs that ended in a range, from the index.
      CREATE INDEX runs_ended ON runs(ended_at) WHERE ended_at IS NOT NULL;
    `,
  },
  {
    // The waiting model (ADR-0015): sleeping and waiting_for_signal runs, signals and callback tokens.
    version: 10,
    sql: sqliteWaitsMigration(),
  },
  {
    // Schedules and their fires (ADR-0016); 10 and 12 are reserved for other features.
    version: 11,
    sql: schedulesDdl('INTEGER'),
  },
  {
    // Webhooks (ADR-0017): subscriptions, the outbox of deliveries, their attempts.
    version: 12,
    sql: WEBHOOKS_MIGRATION_SQL,
  },
  {
    // Provider flow control (docs/flow-control.md): limit slots, windows, pauses and waiters.
    version: 13,
    sql: limitsDdl('INTEGER'),
  },
  {
    version: 14,
    sql: `
      -- Lean rows (ADR-0020): appends write open rows of codec 2, sealing writes codec 3. Codecs 0
      -- and 2 are open, 1 and 3 sealed: an open row of either may be removed once a sealed row of
      -- either holds its seqs.
      DROP TRIGGER event_batches_no_delete;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
         AND (OLD.codec NOT IN ${OPEN_CODECS_SQL} OR NOT EXISTS (
          SELECT 1 FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.codec NOT IN ${OPEN_CODECS_SQL} AND s.first_seq <= OLD.first_seq AND s.last_seq >= OLD.last_seq
        ))
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
  },
  {
    version: 15,
    sql: `
      -- The same guard, checked against one row: sealed rows never overlap, so only the last sealed
      -- row starting at or before an open row can hold it. The guard of v14 scanned every row of
      -- the session before the one removed, for each open row a sealing removes: a seal cost grew
      -- with the session's history (2.4 ms a seal over turns 300 to 500, 73 µs now, measured).
      DROP TRIGGER event_batches_no_delete;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
         AND (OLD.codec NOT IN ${OPEN_CODECS_SQL} OR coalesce((
          SELECT s.last_seq >= OLD.last_seq FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.first_seq <= OLD.first_seq AND s.codec NOT IN ${OPEN_CODECS_SQL}
          ORDER BY s.first_seq DESC LIMIT 1
        ), 0) = 0)
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
  },
  {
    // Sealed rows of codec 4 (Zstandard, ADR-0024). No table changes: the number tells an older
    // Keel, which cannot read those rows, to refuse the database instead of failing on them later.
    version: 16,
    sql: `SELECT 1;`,
  },
  {
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
  },
  {
    // When an idle run is next due (ADR-0034): a generated column and its partial index, so that a
    // sweep reads what is due from the index instead of listing the idle runs. Why Keel paused a
    // schedule by itself (its target session was archived or erased).
    version: 18,
    sql: `${SQLITE_DUE_RUNS_MIGRATION}
      ALTER TABLE schedules ADD COLUMN paused_reason TEXT;`,
  },
  {
    // Webhooks, issue 38: delivery end times (retention) and sessions (erasure), rotated secrets (see addWebhookColumns).
    version: 19,
    sql: `SELECT 1;`,
    run: addWebhookColumns,
  },
  {
    // Each run's tenant on its row, and the runs waiting for a person indexed by tenant (the inbox
    // filters by tenant in its query: run-tenants.ts).
    version: 20,
    sql: RUN_TENANTS_MIGRATION_SQL,
  },
];

/** Schema v8: which sessions refer to which blobs, from every stored event. */
function indexBlobReferences(db: Database.Database): void {
  const insert = db.prepare('INSERT OR IGNORE INTO blob_refs (session_id, hash) VALUES (?, ?)');
  const sessions = db.prepare('SELECT DISTINCT session_id FROM event_batches').pluck().all() as Array<Buffer | string>;
  const rows = db.prepare('SELECT first_seq, codec, data FROM event_batches WHERE session_id = ? ORDER BY first_seq');
  for (const key of sessions) {
    for (const r of rows.all(key) as Array<{ first_seq: number; codec: number; data: string | Buffer }>) {
      const json =
        r.codec === 0 || r.codec === 2
          ? String(r.data)
          : JSON.stringify(decodeBatch('?', r.first_seq, r.codec, r.data).map((e) => e.data));
      for (const hash of blobHashesIn(json)) insert.run(key, hash);
    }
  }
}

/** At most this many events of a session in one sealed row when an older database's log is moved. */
const MIGRATED_ROW = 1024;

type V4EventRow = {
  id: string;
  session_id: string;
  seq: number;
  type: string;
  v: number;
  time: number;
  run_id: string | null;
  turn: number | null;
  step: number | null;
  entry: number;
  parent_id: string | null;
  ignorable: number;
  data: string;
};

/**
 * Schema v5: the one-row-per-event log of v1–v4 moved into sealed rows of up to MIGRATED_ROW
 * consecutive events of a session, every event kept as it was; then the old table goes.
 */
function moveEventsIntoBatches(db: Database.Database): void {
  const insertRow = db.prepare(
    'INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES (?, ?, ?, ?, ?)',
  );
  const insertEntry = db.prepare('INSERT INTO entries (id, session_id, seq, parent_id) VALUES (?, ?, ?, ?)');
  const sealedUpTo = db.prepare('UPDATE sessions SET sealed_seq = ? WHERE id = ?');
  // One session at a time, a page at a time (a connection cannot write while it iterates a read).
  const sessions = db.prepare('SELECT DISTINCT session_id FROM events').pluck().all() as string[];
  const page = db.prepare('SELECT * FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT 1024');
  for (const sessionId of sessions) {
    let after = 0;
    for (;;) {
      const rows = page.all(sessionId, after) as V4EventRow[];
      if (rows.length === 0) break;
      // Seqs are 1..last_seq without a gap; a row holds consecutive ones.
      let run: StoredEvent[] = [];
      const flush = () => {
        if (run.length > 0)
          insertRow.run(idKey(sessionId), run[0]!.seq, run.at(-1)!.seq, SEALED_CODEC, seal([encodeOpen0(run)]));
        run = [];
      };
      for (const r of rows) {
        if (run.length > 0 && (run.at(-1)!.seq + 1 !== r.seq || run.length >= MIGRATED_ROW)) flush();
        const e: StoredEvent = {
          id: r.id,
          sessionId,
          seq: r.seq,
          type: r.type,
          v: r.v,
          time: r.time,
          entry: r.entry === 1,
          ignorable: r.ignorable === 1,
          data: JSON.parse(r.data) as unknown,
        };
        if (r.run_id !== null) e.runId = r.run_id;
        if (r.turn !== null) e.turn = r.turn;
        if (r.step !== null) e.step = r.step;
        if (r.parent_id !== null) e.parentId = r.parent_id;
        run.push(e);
        if (e.entry) insertEntry.run(idKey(e.id), idKey(sessionId), e.seq, idKeyOrNull(r.parent_id));
      }
      flush();
      after = rows.at(-1)!.seq;
    }
    sealedUpTo.run(after, sessionId);
  }
  db.exec(`
    DROP TRIGGER events_no_update;
    DROP TRIGGER events_no_delete;
    DROP TABLE events;
  `);
}

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
      m.run?.(db);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
  }
}
