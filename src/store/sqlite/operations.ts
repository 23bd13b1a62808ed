import { PAUSED_FOR_ERASED_SESSION } from '../schedule-rows.ts';
import type Database from 'better-sqlite3';
import {
  FencedError,
  NotFoundError,
  RunBusyError,
  RunConflictError,
  SeqConflictError,
  StoreError,
  RUN_STATUSES,
  type AppendOptions,
  type ClaimPolicy,
  type EventDraft,
  type RunStatus,
  type StoredEvent,
} from '../port/index.ts';
import { blobHashesIn } from '../blob-refs.ts';
import { erasedTotals, storedEvent } from '../records.ts';
import { decodeBatch, encodeOpen, OPEN_CODEC, sealLean } from './event-batch-codec.ts';
import { idKey, idKeyOrNull, type IdKey } from './id-keys.ts';
import { SessionHeads, type At } from './session-heads.ts';
import { NO_ENTRIES, OpenEntries, type OpenEntrySet, type OpenHead, type TreeEntry } from './open-entries.ts';
import { dueRunsSql } from '../due-runs.ts';
import {
  RUN_COLUMNS,
  toIdempotency,
  toInput,
  toKey,
  toRun,
  toSession,
  toUsageTotals,
  usageGroupSql,
  type RunRow,
  type SessionRow,
  type UsageRow,
} from '../rows.ts';
import { USAGE_OWN_SQL, type OpenHeadColumns, type Statements } from './statements.ts';
import { createWebhookOperations } from './webhooks.ts';
import { createWaitOperations } from './waits.ts';
import { createLimitOperations } from './limits.ts';
import { scheduleOperations } from './schedules.ts';
import type { OperationHooks, SyncOps } from './context.ts';

/**
 * A session's open rows are sealed at the end of a turn (`sealEvents`), and also once this many
 * events are open, so that a long turn's log does not stay uncompressed (ADR-0009).
 */
const SEAL_AT = 1024;

/** No open row after the sessions row's head (see OpenHeadColumns). */
const NO_OPEN_HEAD: OpenHeadColumns = { open_last_seq: null, open_leaf_id: null, open_turn: null };

/** Rows of `entries` one statement inserts at a seal: a turn's in one or two (SQLite takes up to 32,766 parameters). */
const ENTRIES_PER_INSERT = 64;

/** Reports a uniqueness violation as a conflict, not as a driver error. */
function guard<T>(message: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw uniqueViolation(e, message);
  }
}

/** Whether the driver refused a row for a primary key or unique index it would repeat. */
function isUniqueViolation(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** A uniqueness violation as a conflict, not as a driver error; anything else as it is. */
function uniqueViolation(e: unknown, message: string): unknown {
  return isUniqueViolation(e) ? new StoreError('conflict', message, { cause: e }) : e;
}

/**
 * The data operations, each written once: synchronous, run directly on the connection. The caller
 * holds the connection's turn and chooses the transaction (see `SqliteStore`).
 */
/** A row limit as SQL: a non-negative integer. */
function limitOf(limit: number): number {
  if (!Number.isFinite(limit) || limit < 0) return -1;
  return Math.floor(limit);
}

/**
 * The (session, blob hash) pairs this connection knows `blob_refs` holds, learnt only from its own
 * commits: a request header names the system prompt's and tools' hashes at every step, and the
 * pair needs one row. Rows of a session go only with its erasure, after which it takes no append.
 */
class KnownBlobRefs {
  private readonly sessions = new Map<string, Set<string>>();
  has(sessionId: string, hash: string): boolean {
    return this.sessions.get(sessionId)?.has(hash) ?? false;
  }
  add(sessionId: string, hash: string): void {
    let hashes = this.sessions.get(sessionId);
    if (!hashes) {
      // Bounded: a busy server forgets and re-inserts (INSERT OR IGNORE) now and then.
      if (this.sessions.size >= 4096) this.sessions.clear();
      this.sessions.set(sessionId, (hashes = new Set()));
    }
    hashes.add(hash);
  }
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }
}

export function createOperations(db: Database.Database, st: Statements, hooks: OperationHooks): SyncOps {
  const knownRefs = new KnownBlobRefs();
  const heads = new SessionHeads(db);
  const openEntries = new OpenEntries(
    () => (db.inTransaction ? hooks.transactionNumber() : undefined),
    (sessionId, sealedSeq) => {
      const out = new Map<string, TreeEntry>();
      for (const row of st.openRows.all(idKey(sessionId), sealedSeq)) {
        for (const e of decodeBatch(sessionId, row.first_seq, row.codec, row.data))
          if (e.entry) out.set(e.id, { seq: e.seq, parent: e.parentId ?? null });
      }
      return out;
    },
  );
  /** The entries of a session's open rows; none for an erased session (its rows are gone). */
  const openEntriesOf = (sessionId: string, head: OpenHead & { erased_at: number | null }): OpenEntrySet =>
    head.erased_at !== null ? NO_ENTRIES : openEntries.of(sessionId, head);
  // Queries built from their arguments (which filters, which columns) take few shapes: each shape
  // is prepared once, not at every call.
  const shapes = new Map<string, Database.Statement>();
  const prepared = (sql: string): Database.Statement => {
    let s = shapes.get(sql);
    if (!s) {
      if (shapes.size >= 256) shapes.clear();
      shapes.set(sql, (s = db.prepare(sql)));
    }
    return s;
  };
  /** A statement with its limit written in (a bound `LIMIT ?` costs ~15 µs a query); none for undefined or negative. */
  const limited = <S extends { source: string }>(statement: S, limit: number | undefined): S =>
    limit === undefined || limit < 0
      ? statement
      : (prepared(`${statement.source} LIMIT ${limitOf(limit)}`) as unknown as S);

  /**
   * A session's head: its sessions row's, moved by the last open row written after it (an append
   * leaves the head in its open row, not in the sessions row; a seal puts it there; ADR-0026).
   */
  const withOpenHead = <H extends { last_seq: number; leaf_id: string | null; last_turn: number } & OpenHeadColumns>(
    h: H,
  ): H =>
    h.open_last_seq === null
      ? h
      : {
          ...h,
          last_seq: h.open_last_seq,
          leaf_id: h.open_leaf_id,
          last_turn: Math.max(h.last_turn, h.open_turn ?? 0),
        };
  const headOf = (sessionId: string) => {
    const h = st.sessionHead.get(idKey(sessionId), sessionId);
    return h && withOpenHead(h);
  };

  /** The session's row with its current head. */
  const sessionRow = (id: string): SessionRow => {
    const row = st.getSession.get(idKey(id), id);
    if (!row) throw new NotFoundError('session', id);
    return withOpenHead(row);
  };

  /**
   * Indexes a session's entries in `entries`, ENTRIES_PER_INSERT rows a statement (a turn's ~40
   * rows cost about two thirds of what one statement each does). `INSERT OR IGNORE`: open rows written
   * before ADR-0022 part 3 have theirs indexed already.
   */
  const indexEntries = (sessionKey: IdKey, entries: OpenEntrySet): void => {
    const values: Array<IdKey | number | null> = [];
    const flush = (rows: number) => {
      if (rows === 1) st.indexEntry.run(...(values as [IdKey, IdKey, number, IdKey | null]));
      else
        prepared(
          `INSERT OR IGNORE INTO entries (id, session_id, seq, parent_id) VALUES ${'(?, ?, ?, ?), '.repeat(rows - 1)}(?, ?, ?, ?)`,
        ).run(values);
      values.length = 0;
    };
    let rows = 0;
    // An entry's parent is most often the entry before it: its key is made once.
    let lastId: string | undefined;
    let lastKey: IdKey | undefined;
    for (const [id, e] of entries) {
      const key = idKey(id);
      values.push(key, sessionKey, e.seq, e.parent !== null && e.parent === lastId ? lastKey! : idKeyOrNull(e.parent));
      lastId = id;
      lastKey = key;
      if (++rows === ENTRIES_PER_INSERT) {
        flush(rows);
        rows = 0;
      }
    }
    if (rows > 0) flush(rows);
  };

  /**
   * Replaces the session's open rows (after `sealedSeq`, up to `lastSeq`) with one sealed row
   * holding the same events (ADR-0009), and indexes their entries (ADR-0022); returns the new
   * sealed seq. Once committed, the session has no open entries.
   */
  const sealOpenRows = (
    sessionId: string,
    sessionKey: IdKey,
    sealedSeq: number,
    lastSeq: number,
    entries: OpenEntrySet,
  ): number => {
    const open = st.openRows.all(sessionKey, sealedSeq);
    if (open.length === 0) return sealedSeq;
    const sealed = sealLean(open);
    st.insertBatch.run(sessionKey, open[0]!.first_seq, lastSeq, sealed.codec, sealed.data);
    st.deleteOpenRows.run(sessionKey, sealedSeq);
    indexEntries(sessionKey, entries);
    hooks.whenCommitted(() => openEntries.forget(sessionId));
    return lastSeq;
  };

  /** Whether the session has this entry: among its open rows' or indexed. */
  const hasEntry = (sessionKey: IdKey, open: OpenEntrySet, id: string): boolean =>
    open.has(id) || st.getEntry.get(idKey(id), sessionKey) !== undefined;

  /** The returned events' `data` is the draft's own object, not a copy: the caller owns the drafts. */
  const append = (sessionId: string, drafts: readonly EventDraft[], options: AppendOptions = {}): StoredEvent[] => {
    const { expectLastSeq, fence } = options;
    const sessionKey = idKey(sessionId);
    // A fenced append reads its run's token with its session's head; the fence is checked first.
    let s;
    let at: At | undefined;
    if (fence) {
      // The head this run's last append left, when nothing can have changed it since; else read.
      at = heads.now();
      let head = heads.lookup(sessionId, fence.runId, at);
      if (!head) {
        const row = st.fencedSessionHead.get(fence.runId, sessionKey, sessionId);
        head = row && withOpenHead(row);
      }
      const token = head ? head.fencing_token : (st.fenceOf.get(fence.runId)?.fencing_token ?? null);
      if (token !== fence.token) throw new FencedError(fence.runId, fence.token, token ?? undefined);
      s = head;
    } else s = headOf(sessionId);
    if (!s) throw new NotFoundError('session', sessionId);
    if (s.erased_at !== null)
      throw new StoreError('session_erased', `session ${sessionId} was erased: its log takes nothing more`);
    if (expectLastSeq !== undefined && s.last_seq !== expectLastSeq)
      throw new SeqConflictError(sessionId, expectLastSeq, s.last_seq);
    const open = openEntriesOf(sessionId, s);
    let seq = s.last_seq;
    let leaf = s.leaf_id;
    let lastTurn = 0;
    const out: StoredEvent[] = [];
    const added = new Map<string, TreeEntry>();
    for (const d of drafts) {
      seq++;
      if (d.turn !== undefined && d.turn > lastTurn) lastTurn = d.turn;
      let parent: string | null = null;
      if (d.entry) {
        parent = d.parentId !== undefined ? d.parentId : leaf;
        // The tree never spans sessions (an explicit parent is checked; the leaf always belongs).
        if (d.parentId && !added.has(d.parentId) && !hasEntry(sessionKey, open, d.parentId)) {
          throw new StoreError(
            'invalid_parent',
            `event ${d.id}: parent ${d.parentId} is not an entry of session ${sessionId}`,
          );
        }
        // Entry ids are unique in their session (one lookup per id: `id IN (?, ?)` measured dearer
        // than two). An id minted for this draft cannot be taken: not looked up.
        if (added.has(d.id) || (!d.minted && hasEntry(sessionKey, open, d.id)))
          throw new StoreError('conflict', `event ${d.id} already exists`);
        added.set(d.id, { seq, parent });
        leaf = d.id;
      } else if (d.leaf !== undefined) {
        leaf = d.leaf;
      }
      out.push(storedEvent(d, sessionId, seq, parent));
    }
    if (out.length === 0) return out;
    // The session's open entries after this append (indexed in `entries` at the seal).
    const entries = added.size > 0 ? open.with(added, seq) : open;
    const json = encodeOpen(out);
    // The row carries the session's head after it: the sessions row is not written (ADR-0026).
    const turn = Math.max(s.last_turn, lastTurn);
    st.insertOpenRow.run(sessionKey, out[0]!.seq, seq, OPEN_CODEC, json, leaf, turn);
    // Which blobs the session refers to, for erasure: in the append's own transaction, once per
    // session and blob (the pairs known are learnt when their commit is done: a rollback undoes
    // them, and erasure would then miss a reference).
    for (const hash of blobHashesIn(json)) {
      if (knownRefs.has(sessionId, hash)) continue;
      st.insertBlobRef.run(sessionKey, hash);
      hooks.whenCommitted(() => knownRefs.add(sessionId, hash));
    }
    const sealed =
      seq - s.sealed_seq >= SEAL_AT ? sealOpenRows(sessionId, sessionKey, s.sealed_seq, seq, entries) : s.sealed_seq;
    // Sealed: no open row is left to carry the head.
    if (sealed !== s.sealed_seq) st.setHead.run(seq, leaf, turn, sealed, sessionId);
    if (fence && at) {
      const known = heads.learn(
        sessionId,
        fence.runId,
        {
          last_seq: seq,
          leaf_id: leaf,
          last_turn: turn,
          sealed_seq: sealed,
          erased_at: null,
          fencing_token: fence.token,
        },
        at,
      );
      hooks.whenCommitted(() => heads.keep(known));
    }
    openEntries.wrote(sessionId, seq, sealed, entries);
    if (sealed !== seq) hooks.whenCommitted(() => openEntries.keep(sessionId, seq, sealed, entries));
    return out;
  };

  /**
   * The statements of a claim under a policy (the runs layer's lifecycle, see ClaimPolicy), prepared
   * once per policy. The attempt counts interruptions (see RunRecord.attempt): a first start or the
   * recovery of a run whose lease expired starts a new attempt; resuming after a wait, a pause or a
   * graceful hand-back does not.
   */
  const claimStatements = (policy: ClaimPolicy) => {
    const list = (xs: readonly RunStatus[]) => xs.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL';
    const ready = list(policy.ready);
    const recoverable = list(policy.recoverable);
    return {
      pick: prepared(
        `SELECT id, status, attempt FROM runs
         WHERE ((status IN (${ready}) AND queued_behind = 0) OR (status IN (${recoverable}) AND lease_expires_at < ?)) AND (? IS NULL OR id = ?)
         ORDER BY created_at, id LIMIT 1`,
      ),
      claim: prepared(
        `UPDATE runs SET status = '${policy.to.replace(/'/g, '')}', lease_owner = ?, lease_expires_at = ?, fencing_token = fencing_token + 1,
                         attempt = CASE WHEN status IN (${recoverable}) OR attempt = 0 THEN attempt + 1 ELSE attempt END, started_at = COALESCE(started_at, ?)
         WHERE id = ? RETURNING *`,
      ),
    };
  };

  /** The events at these seqs of a session, in the order given; each batch is decoded once. */
  const eventsAt = (sessionId: string, seqs: readonly number[]): StoredEvent[] => {
    const sessionKey = idKey(sessionId);
    const decoded = new Map<number, StoredEvent[]>();
    let last: StoredEvent[] | undefined;
    const out: StoredEvent[] = [];
    for (const seq of seqs) {
      if (!last || seq < last[0]!.seq || seq > last.at(-1)!.seq) {
        const row = st.batchAt.get(sessionKey, seq);
        if (!row) throw new StoreError('corrupt_log', `session ${sessionId}: no stored batch holds seq ${seq}`);
        last = decoded.get(row.first_seq);
        if (!last) decoded.set(row.first_seq, (last = decodeBatch(sessionId, row.first_seq, row.codec, row.data)));
      }
      const e = last[seq - last[0]!.seq];
      if (!e) throw new StoreError('corrupt_log', `session ${sessionId}: no stored batch holds seq ${seq}`);
      out.push(e);
    }
    return out;
  };

  const ops: SyncOps = {
    createSession: (s) => {
      guard(`session ${s.id} already exists`, () =>
        st.insertSession.run({
          id: s.id,
          tenant: s.tenant ?? 'default',
          created_at: s.createdAt,
          title: s.title ?? null,
          metadata: JSON.stringify(s.metadata ?? {}),
          agent: s.agent ?? null,
          origin_session_id: s.origin?.sessionId ?? null,
          origin_entry_id: s.origin?.entryId ?? null,
        }),
      );
      return toSession(sessionRow(s.id));
    },
    getSession: (id) => {
      const row = st.getSession.get(idKey(id), id);
      return row ? toSession(withOpenHead(row)) : undefined;
    },
    listSessions: (page) =>
      (page.tenant !== undefined
        ? st.listTenantSessions.all(page.tenant, page.after ?? '', page.includeArchived ? 1 : 0, page.limit)
        : st.listSessions.all(page.after ?? '', page.includeArchived ? 1 : 0, page.limit)
      ).map((r) => toSession(withOpenHead({ ...r, ...(st.openHead.get(idKey(r.id), r.last_seq) ?? NO_OPEN_HEAD) }))),
    updateSession: (id, patch) => {
      const row = sessionRow(id);
      st.updateSession.run(
        patch.title !== undefined ? patch.title : row.title,
        patch.metadata !== undefined ? JSON.stringify(patch.metadata) : row.metadata,
        patch.archivedAt !== undefined ? patch.archivedAt : row.archived_at,
        id,
      );
    },
    append,
    readEvents: (sessionId, o = {}) => {
      const limit = o.limit === undefined || o.limit < 0 ? Infinity : limitOf(o.limit);
      let after = o.afterSeq ?? 0;
      const until = o.untilSeq ?? Number.MAX_SAFE_INTEGER;
      if (o.runId !== undefined) {
        // A run's events all follow its first one (see the runs table's first_seq).
        const first = st.runFirstSeq.get(o.runId)?.first_seq;
        if (first !== undefined && first !== null) after = Math.max(after, first - 1);
      }
      const out: StoredEvent[] = [];
      if (limit === 0 || after >= until) return out;
      for (const b of st.readBatches.iterate({ session: idKey(sessionId), from: after + 1, until })) {
        for (const e of decodeBatch(sessionId, b.first_seq, b.codec, b.data)) {
          if (e.seq <= after || e.seq > until || (o.runId !== undefined && e.runId !== o.runId)) continue;
          out.push(e);
          if (out.length >= limit) return out;
        }
      }
      return out;
    },
    getEntries: (sessionId, ids) => {
      const head = headOf(sessionId);
      if (!head) return [];
      const sessionKey = idKey(sessionId);
      const open = openEntriesOf(sessionId, head);
      const seqs: number[] = [];
      for (const id of ids) {
        const seq = open.get(id)?.seq ?? st.getEntry.get(idKey(id), sessionKey)?.seq;
        if (seq !== undefined) seqs.push(seq);
      }
      return eventsAt(sessionId, seqs);
    },
    eraseSession: (sessionId, erasedAt) => {
      knownRefs.forget(sessionId);
      openEntries.forget(sessionId);
      const row = sessionRow(sessionId);
      if (row.erased_at !== null) return toSession(row);
      const live = st.liveRun.get(sessionId);
      if (live) throw new RunBusyError(sessionId, live.id);
      // What it consumed stays, for billing.
      const totals = erasedTotals(st.runsOfSession.all(sessionId));
      const key = idKey(sessionId);
      // The head into the sessions row before the open rows that carry it go (its last seq stays).
      const head = headOf(sessionId)!;
      st.setHead.run(head.last_seq, head.leaf_id, head.last_turn, head.sealed_seq, sessionId);
      st.markErasing.run(key);
      st.eraseBatches.run(key);
      st.eraseEntries.run(key);
      st.eraseSnapshots.run(sessionId);
      st.eraseCheckpoints.run(sessionId);
      st.eraseInputs.run(sessionId);
      st.eraseSignals.run(sessionId);
      st.eraseCallbacks.run(sessionId);
      st.eraseScheduleFires.run(sessionId, sessionId);
      st.pauseTargetSchedules.run(erasedAt, PAUSED_FOR_ERASED_SESSION, erasedAt, sessionId);
      st.scrubRuns.run(sessionId);
      st.eraseOwnBlobs.run(key, key);
      st.eraseBlobRefs.run(key);
      st.eraseIdempotency.run(sessionId);
      st.eraseWebhookAttempts.run(sessionId);
      st.eraseWebhookDeliveries.run(sessionId);
      st.tombstone.run(erasedAt, JSON.stringify(totals), sessionId);
      return toSession(sessionRow(sessionId));
    },
    sealEvents: (sessionId) => {
      const s = headOf(sessionId);
      if (!s) throw new NotFoundError('session', sessionId);
      const sealed = sealOpenRows(sessionId, idKey(sessionId), s.sealed_seq, s.last_seq, openEntriesOf(sessionId, s));
      // The open rows that carried the head are gone: it goes into the sessions row (ADR-0026).
      if (sealed !== s.sealed_seq) st.setHead.run(s.last_seq, s.leaf_id, s.last_turn, sealed, sessionId);
    },
    ancestors: (sessionId, fromId, limit) => {
      const head = headOf(sessionId);
      if (!head) return [];
      // Nearest first: through the open rows' entries, then (from the first indexed one) in `entries`.
      const open = openEntriesOf(sessionId, head);
      const seqs: number[] = [];
      let id: string | null = fromId;
      for (let e = open.get(id); e && seqs.length < limit; e = id === null ? undefined : open.get(id)) {
        seqs.push(e.seq);
        id = e.parent;
      }
      if (id !== null && seqs.length < limit) {
        for (const r of st.ancestors.all({ session: idKey(sessionId), from: idKey(id), limit: limit - seqs.length }))
          seqs.push(r.seq);
      }
      return eventsAt(sessionId, seqs);
    },
    putBlobs: (blobs) => {
      const now = Date.now();
      for (const b of blobs) st.putBlob.run(b.hash, b.data, Buffer.byteLength(b.data), now);
    },
    getBlobs: (hashes) => {
      const out = new Map<string, string>();
      for (const h of hashes) {
        const row = st.getBlob.get(h);
        if (row) out.set(h, row.data);
      }
      return out;
    },
    putSnapshot: (s) => {
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
    getSnapshot: (sessionId, projection, version) => {
      const row = st.getSnapshot.get(sessionId, projection, version);
      return row
        ? {
            sessionId,
            projection,
            version,
            asOfSeq: row.as_of_seq,
            leafId: row.leaf_id,
            state: JSON.parse(row.state) as unknown,
          }
        : undefined;
    },
    createRun: (r) => {
      // Its events come after the session's head (none for no such session: the insert then fails on the session).
      const head = headOf(r.sessionId);
      const firstSeq = head ? head.last_seq + 1 : null;
      let row: RunRow;
      try {
        // The row as stored (its defaults filled in), from the insert itself: not read again.
        row = st.insertRun.get({
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
          queued_behind: r.queuedBehind ? 1 : 0,
          first_seq: firstSeq,
        }) as RunRow;
      } catch (e) {
        const code = (e as { code?: unknown }).code;
        if (code === 'SQLITE_CONSTRAINT_UNIQUE' && /runs\.session_id/.test((e as Error).message)) {
          throw new RunBusyError(r.sessionId, st.activeRun.get(r.sessionId)?.id ?? 'unknown');
        }
        if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
          throw new StoreError('conflict', `run ${r.id} already exists`, { cause: e });
        if (code === 'SQLITE_CONSTRAINT_FOREIGNKEY') throw new NotFoundError('session or parent run of run', r.id);
        throw e;
      }
      return toRun(row);
    },
    getRun: (id) => {
      const row = st.getRun.get(id);
      return row ? toRun(row) : undefined;
    },
    listRuns: (q) => {
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
      if (q.tenant !== undefined) {
        where.push('tenant = ?');
        args.push(q.tenant);
      }
      if (q.statuses)
        where.push(`status IN (${q.statuses.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL'})`);
      if (q.after !== undefined) {
        where.push('id > ?');
        args.push(q.after);
      }
      const sql = `SELECT * FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id`;
      return (prepared(`${sql} LIMIT ${limitOf(q.limit)}`).all(...args) as RunRow[]).map(toRun);
    },
    dueRuns: (now, page) => {
      const sql = dueRunsSql(page.after !== undefined, () => '?');
      const args = page.after
        ? [now, page.after.dueAt, page.after.id, limitOf(page.limit)]
        : [now, limitOf(page.limit)];
      return (prepared(sql).all(...args) as Array<RunRow & { due_at: number }>).map((r) => ({
        run: toRun(r),
        dueAt: r.due_at,
      }));
    },
    countRunsByStatus: () => {
      const counts = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0])) as Record<RunStatus, number>;
      for (const r of st.runStatusCounts.all()) counts[r.status] = r.n;
      return counts;
    },
    usageTotals: (q) => {
      const group = usageGroupSql(q.groupBy);
      const rows = prepared(USAGE_OWN_SQL + group.sql).all({
        from: q.from,
        to: q.to,
        tenant: q.tenant ?? null,
        agent: q.agent ?? null,
        model: q.model ?? null,
      }) as UsageRow[];
      // Without a grouping, no runs is one row of zeros: no group at all.
      return rows.map((r) => toUsageTotals(r, group.dimensions)).filter((t) => t.runs > 0);
    },
    activeRun: (sessionId) => {
      const row = st.activeRun.get(sessionId);
      return row ? toRun(row) : undefined;
    },
    updateRun: (id, patch, runGuard = {}) => {
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
      if (runGuard.statuses)
        where.push(`status IN (${runGuard.statuses.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL'})`);
      if (runGuard.fencingToken !== undefined) {
        where.push('fencing_token = ?');
        args.push(runGuard.fencingToken);
      }
      let row: RunRow | undefined;
      try {
        row = sets.length
          ? (prepared(`UPDATE runs SET ${sets.join(', ')} WHERE ${where.join(' AND ')} RETURNING *`).get(...args) as
              RunRow | undefined)
          : (prepared(`SELECT * FROM runs WHERE ${where.join(' AND ')}`).get(...args) as RunRow | undefined);
      } catch (e) {
        // A run queued behind cannot come up while its session has another active run.
        if (
          (e as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE' &&
          /runs\.session_id/.test((e as Error).message)
        ) {
          const sessionId = st.getRun.get(id)!.session_id;
          throw new RunBusyError(sessionId, st.activeRun.get(sessionId)?.id ?? 'unknown');
        }
        throw e;
      }
      if (!row) {
        const current = st.getRun.get(id);
        throw new RunConflictError(id, current ? toRun(current) : undefined, runGuard);
      }
      return toRun(row);
    },
    // Runs inside the caller's write transaction: the pick and the update are one atomic step.
    claimRun: (owner, leaseMs, now, policy, options) => {
      const runId = options?.runId ?? null;
      const { pick, claim } = claimStatements(policy);
      const picked = pick.get(now, runId, runId) as { id: string; status: RunStatus; attempt: number } | undefined;
      if (!picked) return undefined;
      const row = claim.get(owner, now + leaseMs, now, picked.id) as RunRow;
      return { run: toRun(row), previous: picked.status, firstStart: picked.attempt === 0 };
    },
    renewLease: (id, owner, fencingToken, expiresAt) => st.renew.run(expiresAt, id, owner, fencingToken).changes === 1,
    putCheckpoint: (c) => {
      st.putCheckpoint.run(c.runId, c.step, c.seq, JSON.stringify(c.state), Date.now());
    },
    getCheckpoint: (runId) => {
      const row = st.getCheckpoint.get(runId);
      return row ? { runId, step: row.step, seq: row.seq, state: JSON.parse(row.state) as unknown } : undefined;
    },
    addInput: (i) => {
      st.addInput.run(i.id, i.sessionId, i.kind, i.runId, JSON.stringify(i.payload), i.createdAt);
    },
    takeInputs: (sessionId, kind, runId, limit = 1000) => {
      const inputs = ops.listInputs(sessionId, kind, runId, limit);
      for (const i of inputs) st.deleteInput.run(i.id);
      return inputs;
    },
    listInputs: (sessionId, kind, runId, limit = 1000) => {
      const filter = runId === undefined ? 0 : 1;
      return limited(st.takeInputs, limit)
        .all(sessionId, kind, filter, runId ?? null, runId ?? null)
        .map(toInput);
    },
    removeInput: (id) => st.deleteInput.run(id).changes === 1,
    countInputs: (sessionId, kind) => st.countInputs.get(sessionId, kind)!.n,
    createApiKey: (k) => {
      guard(`api key ${k.id} already exists`, () =>
        st.insertKey.run({
          id: k.id,
          tenant: k.tenant,
          name: k.name,
          hash: k.hash,
          prefix: k.prefix,
          rate_per_minute: k.ratePerMinute,
          created_at: k.createdAt,
          revoked_at: k.revokedAt,
        }),
      );
    },
    findApiKey: (hash) => {
      const row = st.findKey.get(hash);
      return row ? toKey(row) : undefined;
    },
    listApiKeys: (tenant) => st.listKeys.all(tenant ?? null, tenant ?? null).map(toKey),
    revokeApiKey: (id, at) => st.revokeKey.run(at, id).changes === 1,
    getIdempotency: (tenant, key) => {
      const r = st.getIdem.get(tenant, key);
      return r ? toIdempotency(r) : undefined;
    },
    putIdempotency: (r) => {
      st.putIdem.run(r.tenant, r.key, r.fingerprint, r.status, r.body, r.createdAt);
      return ops.getIdempotency(r.tenant, r.key)!;
    },
    pruneIdempotency: (before) => st.pruneIdem.run(before).changes,
    ...createWebhookOperations(db),
    ...createWaitOperations(db),
    ...createLimitOperations(db),
    ...scheduleOperations(prepared),
  };
  // Any operation may change a session's head or a run's fencing token (another run's append, one
  // without a fence, a claim, a seal): SessionHeads counts them all, and a run's append takes the
  // head its last append left only if nothing ran in between.
  for (const name of Object.keys(ops) as Array<keyof SyncOps>) {
    const op = ops[name] as (...args: unknown[]) => unknown;
    (ops as Record<string, unknown>)[name] = (...args: unknown[]) => {
      heads.counted();
      return op(...args);
    };
  }
  return ops;
}
