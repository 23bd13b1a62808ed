import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import {
  FencedError,
  NotFoundError,
  RunBusyError,
  RunConflictError,
  SchemaVersionError,
  SeqConflictError,
  StoreError,
  TERMINAL_STATUSES,
  type ApiKeyRecord,
  type AppendOptions,
  type Checkpoint,
  type IdempotencyRecord,
  type NewRun,
  type RunGuard,
  type RunInput,
  type RunPatch,
  type RunQuery,
  type RunRecord,
  type RunStatus,
  type EventDraft,
  type JsonObject,
  type NewSession,
  type ReadEventsOptions,
  type SessionPage,
  type SessionRecord,
  type Snapshot,
  type Store,
  type StoreOps,
  type StoredEvent,
} from '../port.ts';
import { latestSchemaVersion, migrations } from './migrations.ts';

export interface SqliteStoreOptions {
  /** Database file; `:memory:` for a private in-memory database. Default: $KEEL_DB or ./.keel/keel.db */
  path?: string;
  /** FULL (default) makes every commit durable across power loss; NORMAL may lose the last commits. */
  synchronous?: 'FULL' | 'NORMAL' | 'OFF';
  /** How long a writer waits for another process's write lock. */
  busyTimeoutMs?: number;
}

type WriteOp = { fn: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void };

/** Writes committed together at most (see `SqliteStore.write`). */
const MAX_BATCH = 256;

/** The longest stretch of store work before the event loop gets a turn (see `SqliteStore.pace`). */
const PACE_MS = 5;

export const defaultDbPath = (): string => process.env.KEEL_DB || resolve('.keel', 'keel.db');

type SessionRow = {
  id: string;
  tenant: string;
  created_at: number;
  title: string | null;
  metadata: string;
  agent: string | null;
  last_seq: number;
  leaf_id: string | null;
  origin_session_id: string | null;
  origin_entry_id: string | null;
  archived_at: number | null;
};

type EventRow = {
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

type RunRow = {
  id: string;
  session_id: string;
  parent_run_id: string | null;
  parent_tool_call_id: string | null;
  agent_name: string;
  agent_version: string;
  agent_spec: string;
  status: RunStatus;
  trigger_message_id: string | null;
  turn: number | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  attempt: number;
  usage: string;
  cost: number;
  error: string | null;
  waiting: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  fencing_token: number;
  cancel_requested: number;
  pause_requested: number;
  deadline_at: number | null;
  options: string;
};

const json = <T>(s: string | null): T | null => (s === null ? null : (JSON.parse(s) as T));

function toRun(r: RunRow): RunRecord {
  return {
    id: r.id,
    sessionId: r.session_id,
    parentRunId: r.parent_run_id,
    parentToolCallId: r.parent_tool_call_id,
    agent: { name: r.agent_name, version: r.agent_version },
    agentSpec: JSON.parse(r.agent_spec) as JsonObject,
    status: r.status,
    triggerMessageId: r.trigger_message_id,
    turn: r.turn,
    createdAt: r.created_at,
    startedAt: r.started_at,
    endedAt: r.ended_at,
    attempt: r.attempt,
    usage: JSON.parse(r.usage) as JsonObject,
    cost: r.cost,
    error: json<JsonObject>(r.error),
    waiting: json<JsonObject>(r.waiting),
    lease: r.lease_owner !== null && r.lease_expires_at !== null ? { owner: r.lease_owner, expiresAt: r.lease_expires_at } : null,
    fencingToken: r.fencing_token,
    cancelRequested: r.cancel_requested === 1,
    pauseRequested: r.pause_requested === 1,
    deadlineAt: r.deadline_at,
    options: JSON.parse(r.options) as JsonObject,
  };
}

const TERMINAL_SQL = TERMINAL_STATUSES.map((t) => `'${t}'`).join(', ');

/** Columns a RunPatch may set, and how each value is stored. */
const RUN_COLUMNS: Record<string, [string, (v: unknown) => unknown]> = {
  status: ['status', (v) => v],
  startedAt: ['started_at', (v) => v],
  endedAt: ['ended_at', (v) => v],
  usage: ['usage', (v) => JSON.stringify(v)],
  cost: ['cost', (v) => v],
  error: ['error', (v) => (v === null ? null : JSON.stringify(v))],
  waiting: ['waiting', (v) => (v === null ? null : JSON.stringify(v))],
  cancelRequested: ['cancel_requested', (v) => (v ? 1 : 0)],
  pauseRequested: ['pause_requested', (v) => (v ? 1 : 0)],
  deadlineAt: ['deadline_at', (v) => v],
  turn: ['turn', (v) => v],
  attempt: ['attempt', (v) => v],
};

type KeyRow = { id: string; tenant: string; name: string | null; hash: string; prefix: string; rate_per_minute: number | null; created_at: number; revoked_at: number | null };
const toKey = (r: KeyRow): ApiKeyRecord => ({
  id: r.id,
  tenant: r.tenant,
  name: r.name,
  hash: r.hash,
  prefix: r.prefix,
  ratePerMinute: r.rate_per_minute,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
});

function toSession(r: SessionRow): SessionRecord {
  return {
    id: r.id,
    tenant: r.tenant,
    createdAt: r.created_at,
    title: r.title,
    metadata: JSON.parse(r.metadata) as JsonObject,
    agent: r.agent,
    lastSeq: r.last_seq,
    leafId: r.leaf_id,
    origin: r.origin_session_id && r.origin_entry_id ? { sessionId: r.origin_session_id, entryId: r.origin_entry_id } : null,
    archivedAt: r.archived_at,
  };
}

function toEvent(r: EventRow): StoredEvent {
  return {
    id: r.id,
    sessionId: r.session_id,
    seq: r.seq,
    type: r.type,
    v: r.v,
    time: r.time,
    ...(r.run_id !== null ? { runId: r.run_id } : {}),
    ...(r.turn !== null ? { turn: r.turn } : {}),
    ...(r.step !== null ? { step: r.step } : {}),
    entry: r.entry === 1,
    ...(r.parent_id !== null ? { parentId: r.parent_id } : {}),
    ignorable: r.ignorable === 1,
    data: JSON.parse(r.data) as unknown,
  };
}

function migrate(db: Database.Database): void {
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

/** The embedded backend: one better-sqlite3 connection, WAL mode, durable commits by default. */
export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  readonly path: string;
  private readonly db: Database.Database;
  private readonly ops: StoreOps;
  private readonly sync: ReturnType<SqliteStore['makeSync']>;
  // better-sqlite3 is synchronous, and a transaction spans awaits of its caller: every operation
  // takes its turn on this chain, so nothing runs on the connection inside someone else's transaction.
  private tail: Promise<unknown> = Promise.resolve();
  // The open group-commit batch that new single writes may join (see `write`).
  private batch: WriteOp[] | undefined;
  // Since when a turn of the event loop has been awaited (see `pace`).
  private turnAwaitedSince: number | undefined;
  private closed = false;
  private readonly stmt;

  constructor(options: SqliteStoreOptions = {}) {
    this.path = options.path ?? defaultDbPath();
    if (this.path !== ':memory:') mkdirSync(dirname(resolve(this.path)), { recursive: true });
    this.db = new Database(this.path);
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
      this.db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
      this.db.pragma('foreign_keys = ON');
      migrate(this.db);
    } catch (e) {
      this.db.close();
      throw e;
    }
    const db = this.db;
    this.stmt = {
      insertSession: db.prepare(
        `INSERT INTO sessions (id, tenant, created_at, title, metadata, agent, origin_session_id, origin_entry_id)
         VALUES (@id, @tenant, @created_at, @title, @metadata, @agent, @origin_session_id, @origin_entry_id)`,
      ),
      getSession: db.prepare<[string], SessionRow>('SELECT * FROM sessions WHERE id = ?'),
      listSessions: db.prepare<[string, number, string | null, string | null, number], SessionRow>(
        'SELECT * FROM sessions WHERE id > ? AND (archived_at IS NULL OR ?) AND (? IS NULL OR tenant = ?) ORDER BY id LIMIT ?',
      ),
      insertKey: db.prepare(
        'INSERT INTO api_keys (id, tenant, name, hash, prefix, rate_per_minute, created_at, revoked_at) VALUES (@id, @tenant, @name, @hash, @prefix, @rate_per_minute, @created_at, @revoked_at)',
      ),
      findKey: db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE hash = ?'),
      listKeys: db.prepare<[string | null, string | null], KeyRow>('SELECT * FROM api_keys WHERE (? IS NULL OR tenant = ?) ORDER BY created_at, id'),
      revokeKey: db.prepare('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?'),
      getIdem: db.prepare<[string, string], { tenant: string; key: string; fingerprint: string; status: number; body: string; created_at: number }>(
        'SELECT * FROM idempotency_keys WHERE tenant = ? AND key = ?',
      ),
      putIdem: db.prepare('INSERT INTO idempotency_keys (tenant, key, fingerprint, status, body, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING'),
      pruneIdem: db.prepare('DELETE FROM idempotency_keys WHERE created_at < ?'),
      advance: db.prepare('UPDATE sessions SET last_seq = ?, leaf_id = ? WHERE id = ?'),
      updateSession: db.prepare('UPDATE sessions SET title = ?, metadata = ?, archived_at = ? WHERE id = ?'),
      insertEvent: db.prepare(
        `INSERT INTO events (id, session_id, seq, type, v, time, run_id, turn, step, entry, parent_id, ignorable, data)
         VALUES (@id, @session_id, @seq, @type, @v, @time, @run_id, @turn, @step, @entry, @parent_id, @ignorable, @data)`,
      ),
      readEvents: db.prepare<[string, number, number, number], EventRow>(
        'SELECT * FROM events WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?',
      ),
      readRunEvents: db.prepare<[string, string, number, number, number], EventRow>(
        'SELECT * FROM events WHERE run_id = ? AND session_id = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?',
      ),
      getEvent: db.prepare<[string, string], EventRow>('SELECT * FROM events WHERE session_id = ? AND id = ?'),
      entryExists: db.prepare<[string, string], { one: number }>('SELECT 1 AS one FROM events WHERE session_id = ? AND id = ? AND entry = 1'),
      // Every step of the walk stays inside the session, even if a parentId points elsewhere.
      ancestors: db.prepare<[{ session: string; from: string; limit: number }], EventRow>(
        `WITH RECURSIVE path(id, parent_id, depth) AS (
           SELECT id, parent_id, 0 FROM events WHERE session_id = @session AND id = @from AND @limit > 0
           UNION ALL
           SELECT e.id, e.parent_id, p.depth + 1 FROM path p JOIN events e ON e.id = p.parent_id AND e.session_id = @session
           WHERE p.depth + 1 < @limit
         )
         SELECT events.* FROM path JOIN events ON events.id = path.id ORDER BY path.depth`,
      ),
      putBlob: db.prepare('INSERT INTO blobs (hash, data, size, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING'),
      getBlob: db.prepare<[string], { data: string }>('SELECT data FROM blobs WHERE hash = ?'),
      putSnapshot: db.prepare(
        `INSERT INTO snapshots (session_id, projection, version, as_of_seq, leaf_id, state, created_at)
         VALUES (@session_id, @projection, @version, @as_of_seq, @leaf_id, @state, @created_at)
         ON CONFLICT (session_id, projection, version) DO UPDATE SET
           as_of_seq = excluded.as_of_seq, leaf_id = excluded.leaf_id, state = excluded.state, created_at = excluded.created_at
         WHERE excluded.as_of_seq >= snapshots.as_of_seq`,
      ),
      insertRun: db.prepare(
        `INSERT INTO runs (id, session_id, parent_run_id, parent_tool_call_id, agent_name, agent_version, agent_spec, status,
                           trigger_message_id, turn, created_at, deadline_at, options, usage)
         VALUES (@id, @session_id, @parent_run_id, @parent_tool_call_id, @agent_name, @agent_version, @agent_spec, 'queued',
                 @trigger_message_id, @turn, @created_at, @deadline_at, @options, @usage)`,
      ),
      getRun: db.prepare<[string], RunRow>('SELECT * FROM runs WHERE id = ?'),
      activeRun: db.prepare<[string], RunRow>(`SELECT * FROM runs WHERE session_id = ? AND status NOT IN (${TERMINAL_SQL})`),
      fenceOf: db.prepare<[string], { fencing_token: number }>('SELECT fencing_token FROM runs WHERE id = ?'),
      claimable: db.prepare<[number, string | null, string | null], { id: string; status: RunStatus }>(
        `SELECT id, status FROM runs
         WHERE (status = 'queued' OR (status = 'running' AND lease_expires_at < ?)) AND (? IS NULL OR id = ?)
         ORDER BY created_at, id LIMIT 1`,
      ),
      // The attempt counts interruptions (see RunRecord.attempt): a first start or the recovery of
      // a running run whose lease expired starts a new attempt; resuming after a wait, a pause or a
      // graceful hand-back by a stopping worker does not (rolling restarts must not fail runs).
      claim: db.prepare<[string, number, number, string], RunRow>(
        `UPDATE runs SET status = 'running', lease_owner = ?, lease_expires_at = ?, fencing_token = fencing_token + 1,
                         attempt = CASE WHEN status = 'running' OR attempt = 0 THEN attempt + 1 ELSE attempt END, started_at = COALESCE(started_at, ?)
         WHERE id = ? RETURNING *`,
      ),
      renew: db.prepare(
        `UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? AND fencing_token = ? AND status NOT IN (${TERMINAL_SQL})`,
      ),
      putCheckpoint: db.prepare(
        `INSERT INTO run_checkpoints (run_id, step, seq, state, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, seq = excluded.seq, state = excluded.state, created_at = excluded.created_at`,
      ),
      getCheckpoint: db.prepare<[string], { step: number; seq: number; state: string }>('SELECT step, seq, state FROM run_checkpoints WHERE run_id = ?'),
      addInput: db.prepare('INSERT INTO run_inputs (id, session_id, kind, run_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
      takeInputs: db.prepare<[string, string, number, string | null, string | null, number], { id: string; session_id: string; kind: 'steer' | 'message'; run_id: string | null; payload: string; created_at: number }>(
        `SELECT * FROM run_inputs WHERE session_id = ? AND kind = ? AND (? = 0 OR run_id IS ? OR run_id = ?)
         ORDER BY created_at, id LIMIT ?`,
      ),
      deleteInput: db.prepare('DELETE FROM run_inputs WHERE id = ?'),
      countInputs: db.prepare<[string, string], { n: number }>('SELECT count(*) AS n FROM run_inputs WHERE session_id = ? AND kind = ?'),
      getSnapshot: db.prepare<[string, string, number], { as_of_seq: number; leaf_id: string | null; state: string }>(
        'SELECT as_of_seq, leaf_id, state FROM snapshots WHERE session_id = ? AND projection = ? AND version = ?',
      ),
    };
    this.sync = this.makeSync();
    const sync = this.sync;
    // Inside a transaction the caller already holds the connection: operations run directly.
    this.ops = {
      createSession: async (x) => sync.createSession(x),
      getSession: async (id) => sync.getSession(id),
      listSessions: async (page) => sync.listSessions(page),
      updateSession: async (id, patch) => sync.updateSession(id, patch),
      // A savepoint: a batch that fails inside a transaction leaves nothing behind, even if the caller
      // catches the error and commits.
      append: async (id, drafts, o) => this.db.transaction(() => sync.append(id, drafts, o))(),
      readEvents: async (id, o) => sync.readEvents(id, o),
      getEvents: async (id, ids) => sync.getEvents(id, ids),
      ancestors: async (id, from, limit) => sync.ancestors(id, from, limit),
      putBlobs: async (blobs) => sync.putBlobs(blobs),
      getBlobs: async (hashes) => sync.getBlobs(hashes),
      putSnapshot: async (snap) => sync.putSnapshot(snap),
      getSnapshot: async (id, p, v) => sync.getSnapshot(id, p, v),
      createRun: async (r) => this.db.transaction(() => sync.createRun(r))(),
      getRun: async (id) => sync.getRun(id),
      listRuns: async (q) => sync.listRuns(q),
      activeRun: async (id) => sync.activeRun(id),
      updateRun: async (id, patch, guard) => sync.updateRun(id, patch, guard),
      claimRun: async (owner, leaseMs, now, o) => sync.claimRun(owner, leaseMs, now, o),
      renewLease: async (id, owner, token, exp) => sync.renewLease(id, owner, token, exp),
      putCheckpoint: async (c) => sync.putCheckpoint(c),
      getCheckpoint: async (id) => sync.getCheckpoint(id),
      addInput: async (i) => sync.addInput(i),
      takeInputs: async (sid, kind, runId, limit) => sync.takeInputs(sid, kind, runId, limit),
      listInputs: async (sid, kind, runId, limit) => sync.listInputs(sid, kind, runId, limit),
      removeInput: async (id) => sync.removeInput(id),
      createApiKey: async (k) => sync.createApiKey(k),
      findApiKey: async (h) => sync.findApiKey(h),
      listApiKeys: async (t) => sync.listApiKeys(t),
      revokeApiKey: async (id, at) => sync.revokeApiKey(id, at),
      getIdempotency: async (t, k) => sync.getIdempotency(t, k),
      putIdempotency: async (r) => sync.putIdempotency(r),
      pruneIdempotency: async (b) => sync.pruneIdempotency(b),
      countInputs: async (sid, kind) => sync.countInputs(sid, kind),
    };
  }

  private serial<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreError('closed', 'the store is closed'));
    // Whatever comes after this must not jump ahead of it into an earlier batch.
    this.batch = undefined;
    const run = this.tail.then(() => this.pace()).then(fn);
    this.tail = run.catch(() => {});
    return run;
  }

  /**
   * Group commit: single writes issued while earlier work is still queued share one transaction,
   * each in its own savepoint (a failing write is undone alone). Every caller is answered only
   * after the shared COMMIT, so each write is as durable as if it had committed alone; with many
   * runs on one worker, one fsync then serves many of them.
   */
  private write<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreError('closed', 'the store is closed'));
    return new Promise<T>((resolve, reject) => {
      const op: WriteOp = { fn, resolve: resolve as (v: unknown) => void, reject };
      if (this.batch && this.batch.length < MAX_BATCH) {
        this.batch.push(op);
        return;
      }
      const batch: WriteOp[] = [op];
      void this.serial(() => this.flush(batch)).catch(() => {});
      // After serial(), which closes any earlier batch: later writes may join this one.
      this.batch = batch;
    });
  }

  private async flush(batch: WriteOp[]): Promise<void> {
    if (this.batch === batch) this.batch = undefined;
    try {
      this.db.exec('BEGIN IMMEDIATE');
    } catch (e) {
      for (const op of batch) op.reject(e);
      return;
    }
    const results: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    for (const op of batch) {
      this.db.exec('SAVEPOINT keel_write');
      try {
        // Single writes are synchronous: without an await, the whole flush holds the connection's
        // write lock within one turn of the event loop (another connection never waits on it).
        let value = op.fn();
        if (value instanceof Promise) value = await value;
        this.db.exec('RELEASE keel_write');
        results.push({ ok: true, value });
      } catch (error) {
        // Undo this unit of work alone; the others commit.
        this.db.exec('ROLLBACK TO keel_write');
        this.db.exec('RELEASE keel_write');
        results.push({ ok: false, error });
      }
    }
    try {
      this.db.exec('COMMIT');
    } catch (e) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      for (const op of batch) op.reject(e);
      return;
    }
    batch.forEach((op, i) => {
      const r = results[i]!;
      if (r.ok) op.resolve(r.value);
      else op.reject(r.error);
    });
  }

  /**
   * The driver is synchronous, so a queue of operations (many runs on one worker) completes as one
   * long chain of microtasks during which no timer fires: lease renewals, deadlines and polls
   * would starve until the queue drains. Between operations (never inside a transaction): when the
   * event loop has not had a turn for PACE_MS, wait for it.
   */
  private pace(): Promise<void> | undefined {
    const now = performance.now();
    if (this.turnAwaitedSince === undefined) {
      this.turnAwaitedSince = now;
      setImmediate(() => (this.turnAwaitedSince = undefined));
      return undefined;
    }
    if (now - this.turnAwaitedSince < PACE_MS) return undefined;
    return new Promise((resolve) => setImmediate(resolve));
  }

  private sessionRow(id: string): SessionRow {
    const row = this.stmt.getSession.get(id);
    if (!row) throw new NotFoundError('session', id);
    return row;
  }

  private insertEvent(row: Record<string, unknown>): void {
    this.guard(`event ${String(row.id)} already exists`, () => this.stmt.insertEvent.run(row));
  }

  /** Reports a uniqueness violation as a conflict, not as a driver error. */
  private guard<T>(message: string, fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE') throw new StoreError('conflict', message, { cause: e });
      throw e;
    }
  }

  private appendSync(sessionId: string, drafts: readonly EventDraft[], options: AppendOptions = {}): StoredEvent[] {
    const { expectLastSeq, fence } = options;
    if (fence) {
      const row = this.stmt.fenceOf.get(fence.runId);
      if (!row || row.fencing_token !== fence.token) throw new FencedError(fence.runId, fence.token, row?.fencing_token);
    }
    const s = this.sessionRow(sessionId);
    if (expectLastSeq !== undefined && s.last_seq !== expectLastSeq) throw new SeqConflictError(sessionId, expectLastSeq, s.last_seq);
    let seq = s.last_seq;
    let leaf = s.leaf_id;
    const out: StoredEvent[] = [];
    for (const d of drafts) {
      seq++;
      let parent: string | null = null;
      if (d.entry) {
        parent = d.parentId !== undefined ? d.parentId : leaf;
        // The tree never spans sessions (an explicit parent is checked; the leaf always belongs).
        if (d.parentId && !this.stmt.entryExists.get(sessionId, d.parentId)) {
          throw new StoreError('invalid_parent', `event ${d.id}: parent ${d.parentId} is not an entry of session ${sessionId}`);
        }
        leaf = d.id;
      } else if (d.leaf !== undefined) {
        leaf = d.leaf;
      }
      const data = JSON.stringify(d.data);
      this.insertEvent({
        id: d.id,
        session_id: sessionId,
        seq,
        type: d.type,
        v: d.v,
        time: d.time,
        run_id: d.runId ?? null,
        turn: d.turn ?? null,
        step: d.step ?? null,
        entry: d.entry ? 1 : 0,
        parent_id: parent,
        ignorable: d.ignorable ? 1 : 0,
        data,
      });
      out.push({
        id: d.id,
        sessionId,
        seq,
        type: d.type,
        v: d.v,
        time: d.time,
        ...(d.runId !== undefined ? { runId: d.runId } : {}),
        ...(d.turn !== undefined ? { turn: d.turn } : {}),
        ...(d.step !== undefined ? { step: d.step } : {}),
        entry: d.entry,
        ...(parent !== null ? { parentId: parent } : {}),
        ignorable: d.ignorable ?? false,
        data: JSON.parse(data) as unknown,
      });
    }
    this.stmt.advance.run(seq, leaf, sessionId);
    return out;
  }

  /** The data operations, synchronous, run directly on the connection (the caller holds the turn). */
  private makeSync() {
    const st = this.stmt;
    return {
      createSession: (s: NewSession): SessionRecord => {
        this.guard(`session ${s.id} already exists`, () => st.insertSession.run({
          id: s.id,
          tenant: s.tenant ?? 'default',
          created_at: s.createdAt,
          title: s.title ?? null,
          metadata: JSON.stringify(s.metadata ?? {}),
          agent: s.agent ?? null,
          origin_session_id: s.origin?.sessionId ?? null,
          origin_entry_id: s.origin?.entryId ?? null,
        }));
        return toSession(this.sessionRow(s.id));
      },
      getSession: (id: string): SessionRecord | undefined => {
        const row = st.getSession.get(id);
        return row ? toSession(row) : undefined;
      },
      listSessions: (page: SessionPage): SessionRecord[] =>
        st.listSessions.all(page.after ?? '', page.includeArchived ? 1 : 0, page.tenant ?? null, page.tenant ?? null, page.limit).map(toSession),
      updateSession: (id: string, patch: Parameters<StoreOps['updateSession']>[1]): void => {
        const row = this.sessionRow(id);
        st.updateSession.run(
          patch.title !== undefined ? patch.title : row.title,
          patch.metadata !== undefined ? JSON.stringify(patch.metadata) : row.metadata,
          patch.archivedAt !== undefined ? patch.archivedAt : row.archived_at,
          id,
        );
      },
      append: (sessionId: string, drafts: readonly EventDraft[], options?: AppendOptions): StoredEvent[] =>
        this.appendSync(sessionId, drafts, options),
      readEvents: (sessionId: string, o: ReadEventsOptions = {}): StoredEvent[] =>
        (o.runId !== undefined
          ? st.readRunEvents.all(o.runId, sessionId, o.afterSeq ?? 0, o.untilSeq ?? Number.MAX_SAFE_INTEGER, o.limit ?? -1)
          : st.readEvents.all(sessionId, o.afterSeq ?? 0, o.untilSeq ?? Number.MAX_SAFE_INTEGER, o.limit ?? -1)
        ).map(toEvent),
      getEvents: (sessionId: string, ids: readonly string[]): StoredEvent[] => {
        const out: StoredEvent[] = [];
        for (const id of ids) {
          const row = st.getEvent.get(sessionId, id);
          if (row) out.push(toEvent(row));
        }
        return out;
      },
      ancestors: (sessionId: string, fromId: string, limit: number): StoredEvent[] =>
        st.ancestors.all({ session: sessionId, from: fromId, limit }).map(toEvent),
      putBlobs: (blobs: ReadonlyArray<{ hash: string; data: string }>): void => {
        const now = Date.now();
        for (const b of blobs) st.putBlob.run(b.hash, b.data, Buffer.byteLength(b.data), now);
      },
      getBlobs: (hashes: readonly string[]): Map<string, string> => {
        const out = new Map<string, string>();
        for (const h of hashes) {
          const row = st.getBlob.get(h);
          if (row) out.set(h, row.data);
        }
        return out;
      },
      putSnapshot: (s: Snapshot): void => {
        st.putSnapshot.run({
          session_id: s.sessionId,
          projection: s.projection,
          version: s.version,
          as_of_seq: s.asOfSeq,
          leaf_id: s.leafId,
          state: JSON.stringify(s.state),
          created_at: Date.now(),
        });
      },
      createRun: (r: NewRun): RunRecord => {
        try {
          st.insertRun.run({
            id: r.id,
            session_id: r.sessionId,
            parent_run_id: r.parentRunId ?? null,
            parent_tool_call_id: r.parentToolCallId ?? null,
            agent_name: r.agent.name,
            agent_version: r.agent.version,
            agent_spec: JSON.stringify(r.agentSpec),
            trigger_message_id: r.triggerMessageId ?? null,
            turn: r.turn ?? null,
            created_at: r.createdAt,
            deadline_at: r.deadlineAt ?? null,
            options: JSON.stringify(r.options ?? {}),
            usage: JSON.stringify(r.usage ?? {}),
          });
        } catch (e) {
          const code = (e as { code?: unknown }).code;
          if (code === 'SQLITE_CONSTRAINT_UNIQUE' && /runs\.session_id/.test((e as Error).message)) {
            throw new RunBusyError(r.sessionId, st.activeRun.get(r.sessionId)?.id ?? 'unknown');
          }
          if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new StoreError('conflict', `run ${r.id} already exists`, { cause: e });
          if (code === 'SQLITE_CONSTRAINT_FOREIGNKEY') throw new NotFoundError('session or parent run of run', r.id);
          throw e;
        }
        return toRun(st.getRun.get(r.id)!);
      },
      getRun: (id: string): RunRecord | undefined => {
        const row = st.getRun.get(id);
        return row ? toRun(row) : undefined;
      },
      listRuns: (q: RunQuery): RunRecord[] => {
        const where: string[] = [];
        const args: unknown[] = [];
        if (q.sessionId !== undefined) {
          where.push('session_id = ?');
          args.push(q.sessionId);
        }
        if (q.parentRunId !== undefined) {
          where.push('parent_run_id = ?');
          args.push(q.parentRunId);
        }
        if (q.statuses) where.push(`status IN (${q.statuses.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL'})`);
        if (q.after !== undefined) {
          where.push('id > ?');
          args.push(q.after);
        }
        const sql = `SELECT * FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ?`;
        return (this.db.prepare(sql).all(...args, q.limit) as RunRow[]).map(toRun);
      },
      activeRun: (sessionId: string): RunRecord | undefined => {
        const row = st.activeRun.get(sessionId);
        return row ? toRun(row) : undefined;
      },
      updateRun: (id: string, patch: RunPatch, guard: RunGuard = {}): RunRecord => {
        const sets: string[] = [];
        const args: unknown[] = [];
        for (const [k, v] of Object.entries(patch)) {
          if (v === undefined) continue;
          if (k === 'lease') sets.push('lease_owner = NULL, lease_expires_at = NULL');
          else if (k === 'fence') sets.push('fencing_token = fencing_token + 1');
          else {
            const col = RUN_COLUMNS[k];
            if (!col) throw new StoreError('invalid_patch', `runs have no field ${k} to update`);
            sets.push(`${col[0]} = ?`);
            args.push(col[1](v));
          }
        }
        const where = ['id = ?'];
        args.push(id);
        if (guard.statuses) where.push(`status IN (${guard.statuses.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL'})`);
        if (guard.fencingToken !== undefined) {
          where.push('fencing_token = ?');
          args.push(guard.fencingToken);
        }
        const row = sets.length
          ? (this.db.prepare(`UPDATE runs SET ${sets.join(', ')} WHERE ${where.join(' AND ')} RETURNING *`).get(...args) as RunRow | undefined)
          : (this.db.prepare(`SELECT * FROM runs WHERE ${where.join(' AND ')}`).get(...args) as RunRow | undefined);
        if (!row) {
          const current = st.getRun.get(id);
          throw new RunConflictError(id, current ? toRun(current) : undefined, guard);
        }
        return toRun(row);
      },
      // Runs inside the caller's write transaction: the pick and the update are one atomic step.
      claimRun: (owner: string, leaseMs: number, now: number, options?: { runId?: string }): { run: RunRecord; previous: RunStatus } | undefined => {
        const runId = options?.runId ?? null;
        const pick = st.claimable.get(now, runId, runId);
        if (!pick) return undefined;
        const row = st.claim.get(owner, now + leaseMs, now, pick.id)!;
        return { run: toRun(row), previous: pick.status };
      },
      renewLease: (id: string, owner: string, fencingToken: number, expiresAt: number): boolean =>
        st.renew.run(expiresAt, id, owner, fencingToken).changes === 1,
      putCheckpoint: (c: Checkpoint): void => {
        st.putCheckpoint.run(c.runId, c.step, c.seq, JSON.stringify(c.state), Date.now());
      },
      getCheckpoint: (runId: string): Checkpoint | undefined => {
        const row = st.getCheckpoint.get(runId);
        return row ? { runId, step: row.step, seq: row.seq, state: JSON.parse(row.state) as unknown } : undefined;
      },
      addInput: (i: RunInput): void => {
        st.addInput.run(i.id, i.sessionId, i.kind, i.runId, JSON.stringify(i.payload), i.createdAt);
      },
      listInputs: (sessionId: string, kind: RunInput['kind'], runId?: string | null, limit = 1000): RunInput[] => {
        const filter = runId === undefined ? 0 : 1;
        return st.takeInputs
          .all(sessionId, kind, filter, runId ?? null, runId ?? null, limit)
          .map((r) => ({ id: r.id, sessionId: r.session_id, kind: r.kind, runId: r.run_id, payload: JSON.parse(r.payload) as unknown, createdAt: r.created_at }));
      },
      takeInputs: (sessionId: string, kind: RunInput['kind'], runId?: string | null, limit = 1000): RunInput[] => {
        const inputs = this.sync.listInputs(sessionId, kind, runId, limit);
        for (const i of inputs) st.deleteInput.run(i.id);
        return inputs;
      },
      removeInput: (id: string): boolean => st.deleteInput.run(id).changes === 1,
      countInputs: (sessionId: string, kind: RunInput['kind']): number => st.countInputs.get(sessionId, kind)!.n,
      createApiKey: (k: ApiKeyRecord): void => {
        this.guard(`api key ${k.id} already exists`, () =>
          st.insertKey.run({ id: k.id, tenant: k.tenant, name: k.name, hash: k.hash, prefix: k.prefix, rate_per_minute: k.ratePerMinute, created_at: k.createdAt, revoked_at: k.revokedAt }),
        );
      },
      findApiKey: (hash: string): ApiKeyRecord | undefined => {
        const row = st.findKey.get(hash);
        return row ? toKey(row) : undefined;
      },
      listApiKeys: (tenant?: string): ApiKeyRecord[] => st.listKeys.all(tenant ?? null, tenant ?? null).map(toKey),
      revokeApiKey: (id: string, at: number): boolean => st.revokeKey.run(at, id).changes === 1,
      getIdempotency: (tenant: string, key: string): IdempotencyRecord | undefined => {
        const r = st.getIdem.get(tenant, key);
        return r ? { tenant: r.tenant, key: r.key, fingerprint: r.fingerprint, status: r.status, body: r.body, createdAt: r.created_at } : undefined;
      },
      putIdempotency: (r: IdempotencyRecord): IdempotencyRecord => {
        st.putIdem.run(r.tenant, r.key, r.fingerprint, r.status, r.body, r.createdAt);
        return this.sync.getIdempotency(r.tenant, r.key)!;
      },
      pruneIdempotency: (before: number): number => st.pruneIdem.run(before).changes,
      getSnapshot: (sessionId: string, projection: string, version: number): Snapshot | undefined => {
        const row = st.getSnapshot.get(sessionId, projection, version);
        return row
          ? { sessionId, projection, version, asOfSeq: row.as_of_seq, leafId: row.leaf_id, state: JSON.parse(row.state) as unknown }
          : undefined;
      },
    };
  }

  transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> {
    // A unit of work joins the group commit like any single write: its own savepoint, the shared COMMIT.
    return this.write(() => fn(this.ops));
  }

  // Outside a transaction each operation is its own unit of work; writes take the write lock at once.
  createSession(s: NewSession) { return this.serial(() => this.sync.createSession(s)); }
  getSession(id: string) { return this.serial(() => this.sync.getSession(id)); }
  listSessions(page: SessionPage) { return this.serial(() => this.sync.listSessions(page)); }
  // Read-merge-write under the write lock, so another process's concurrent patch is not lost.
  updateSession(id: string, patch: Parameters<StoreOps['updateSession']>[1]) {
    return this.serial(() => this.db.transaction(() => this.sync.updateSession(id, patch)).immediate());
  }
  append(sessionId: string, drafts: readonly EventDraft[], options?: AppendOptions) {
    return this.write(() => this.sync.append(sessionId, drafts, options));
  }
  readEvents(sessionId: string, options?: ReadEventsOptions) { return this.serial(() => this.sync.readEvents(sessionId, options)); }
  getEvents(sessionId: string, ids: readonly string[]) { return this.serial(() => this.sync.getEvents(sessionId, ids)); }
  ancestors(sessionId: string, fromId: string, limit: number) { return this.serial(() => this.sync.ancestors(sessionId, fromId, limit)); }
  putBlobs(blobs: ReadonlyArray<{ hash: string; data: string }>) {
    return this.write(() => this.sync.putBlobs(blobs));
  }
  getBlobs(hashes: readonly string[]) { return this.serial(() => this.sync.getBlobs(hashes)); }
  putSnapshot(s: Snapshot) { return this.write(() => this.sync.putSnapshot(s)); }
  getSnapshot(sessionId: string, projection: string, version: number) { return this.serial(() => this.sync.getSnapshot(sessionId, projection, version)); }
  createRun(r: NewRun) { return this.write(() => this.sync.createRun(r)); }
  getRun(id: string) { return this.serial(() => this.sync.getRun(id)); }
  listRuns(q: RunQuery) { return this.serial(() => this.sync.listRuns(q)); }
  activeRun(sessionId: string) { return this.serial(() => this.sync.activeRun(sessionId)); }
  updateRun(id: string, patch: RunPatch, guard?: RunGuard) { return this.write(() => this.sync.updateRun(id, patch, guard)); }
  claimRun(owner: string, leaseMs: number, now: number, options?: { runId?: string }) {
    return this.serial(() => this.db.transaction(() => this.sync.claimRun(owner, leaseMs, now, options)).immediate());
  }
  renewLease(id: string, owner: string, fencingToken: number, expiresAt: number) { return this.write(() => this.sync.renewLease(id, owner, fencingToken, expiresAt)); }
  putCheckpoint(c: Checkpoint) { return this.write(() => this.sync.putCheckpoint(c)); }
  getCheckpoint(runId: string) { return this.serial(() => this.sync.getCheckpoint(runId)); }
  addInput(i: RunInput) { return this.write(() => this.sync.addInput(i)); }
  takeInputs(sessionId: string, kind: RunInput['kind'], runId?: string | null, limit?: number) {
    return this.serial(() => this.db.transaction(() => this.sync.takeInputs(sessionId, kind, runId, limit)).immediate());
  }
  countInputs(sessionId: string, kind: RunInput['kind']) { return this.serial(() => this.sync.countInputs(sessionId, kind)); }
  listInputs(sessionId: string, kind: RunInput['kind'], runId?: string | null, limit?: number) {
    return this.serial(() => this.sync.listInputs(sessionId, kind, runId, limit));
  }
  removeInput(id: string) { return this.write(() => this.sync.removeInput(id)); }
  createApiKey(k: ApiKeyRecord) { return this.serial(() => this.sync.createApiKey(k)); }
  findApiKey(hash: string) { return this.serial(() => this.sync.findApiKey(hash)); }
  listApiKeys(tenant?: string) { return this.serial(() => this.sync.listApiKeys(tenant)); }
  revokeApiKey(id: string, at: number) { return this.serial(() => this.sync.revokeApiKey(id, at)); }
  getIdempotency(tenant: string, key: string) { return this.serial(() => this.sync.getIdempotency(tenant, key)); }
  putIdempotency(r: IdempotencyRecord) { return this.serial(() => this.db.transaction(() => this.sync.putIdempotency(r)).immediate()); }
  pruneIdempotency(before: number) { return this.serial(() => this.sync.pruneIdempotency(before)); }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.tail;
    this.closed = true;
    this.db.close();
  }
}

export function openSqliteStore(options: SqliteStoreOptions = {}): SqliteStore {
  return new SqliteStore(options);
}
