/** What the SQLite operations of several concepts share: helpers, and the per-connection state made by createShared. */
import type Database from 'better-sqlite3';
import {
  FencedError,
  NotFoundError,
  SeqConflictError,
  StoreError,
  type AppendOptions,
  type ClaimPolicy,
  type EventDraft,
  type RunStatus,
  type StoredEvent,
} from '../port/index.ts';
import { blobHashesIn } from '../blob-refs.ts';
import { storedEvent } from '../records.ts';
import { decodeBatch, encodeOpen, OPEN_CODEC, sealLean } from './event-batch-codec.ts';
import { idKey, idKeyOrNull, type IdKey } from './id-keys.ts';
import { SessionHeads, type At } from './session-heads.ts';
import { NO_ENTRIES, OpenEntries, type OpenEntrySet, type OpenHead, type TreeEntry } from './open-entries.ts';
import { type SessionRow } from '../rows.ts';
import { type OpenHeadColumns, type Statements } from './statements.ts';
import type { OperationHooks, SyncOps } from './context.ts';

/**
 * A session's open rows are sealed at the end of a turn (`sealEvents`), and also once this many
 * events are open, so that a long turn's log does not stay uncompressed (ADR-0009).
 */
export const SEAL_AT = 1024;

/** No open row after the sessions row's head (see OpenHeadColumns). */
export const NO_OPEN_HEAD: OpenHeadColumns = { open_last_seq: null, open_leaf_id: null, open_turn: null };

/** Rows of `entries` one statement inserts at a seal: a turn's in one or two (SQLite takes up to 32,766 parameters). */
export const ENTRIES_PER_INSERT = 64;

/** Reports a uniqueness violation as a conflict, not as a driver error. */
export function guard<T>(message: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw uniqueViolation(e, message);
  }
}

/** Whether the driver refused a row for a primary key or unique index it would repeat. */
export function isUniqueViolation(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** A uniqueness violation as a conflict, not as a driver error; anything else as it is. */
export function uniqueViolation(e: unknown, message: string): unknown {
  return isUniqueViolation(e) ? new StoreError('conflict', message, { cause: e }) : e;
}

/** A row limit as SQL: a non-negative integer. */
export function limitOf(limit: number): number {
  if (!Number.isFinite(limit) || limit < 0) return -1;
  return Math.floor(limit);
}

/**
 * The (session, blob hash) pairs this connection knows `blob_refs` holds, learnt only from its own
 * commits: a request header names the system prompt's and tools' hashes at every step, and the
 * pair needs one row. Rows of a session go only with its erasure, after which it takes no append.
 */
export class KnownBlobRefs {
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

/**
 * What the operations of every concept share, made once per connection: the statements, the
 * session heads and open entries this connection knows, prepared query shapes, the append (the
 * log's one write) and the reads of heads and batches. `self` is every operation once composed
 * (operations.ts), for an operation that calls another.
 */
export function createShared(db: Database.Database, st: Statements, hooks: OperationHooks) {
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
  return {
    db,
    st,
    hooks,
    knownRefs,
    heads,
    openEntries,
    openEntriesOf,
    shapes,
    prepared,
    limited,
    withOpenHead,
    headOf,
    sessionRow,
    indexEntries,
    sealOpenRows,
    hasEntry,
    append,
    claimStatements,
    eventsAt,
    self: undefined as unknown as SyncOps,
  };
}

export type Shared = ReturnType<typeof createShared>;
