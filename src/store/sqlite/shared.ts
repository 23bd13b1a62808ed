/** What the SQLite operations of several concepts share: helpers, and the per-connection state made by createShared. */
import type Database from 'better-sqlite3';
import { NotFoundError, StoreError } from '../port/index.ts';
import { decodeBatch, sealLean } from './event-batch-codec.ts';
import { idKey, idKeyOrNull, type IdKey } from './id-keys.ts';
import { SessionHeads } from './session-heads.ts';
import { NO_ENTRIES, OpenEntries, type OpenEntrySet, type OpenHead, type TreeEntry } from './open-entries.ts';
import { type SessionRow } from '../rows.ts';
import { type OpenHeadColumns, type SessionHeadRow, type Statements } from './statements.ts';
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
 * What the operations of every concept share, made once per connection (see createShared). Written
 * out (not inferred) so that the declarations the build emits can name every type in it.
 */
export interface Shared {
  db: Database.Database;
  st: Statements;
  hooks: OperationHooks;
  knownRefs: KnownBlobRefs;
  heads: SessionHeads;
  openEntries: OpenEntries;
  openEntriesOf(sessionId: string, head: OpenHead & { erased_at: number | null }): OpenEntrySet;
  shapes: Map<string, Database.Statement>;
  prepared(sql: string): Database.Statement;
  limited<S extends { source: string }>(statement: S, limit: number | undefined): S;
  withOpenHead<H extends { last_seq: number; leaf_id: string | null; last_turn: number } & OpenHeadColumns>(h: H): H;
  headOf(sessionId: string): (SessionHeadRow & OpenHeadColumns) | undefined;
  sessionRow(id: string): SessionRow;
  indexEntries(sessionKey: IdKey, entries: OpenEntrySet): void;
  sealOpenRows(sessionId: string, sessionKey: IdKey, sealedSeq: number, lastSeq: number, entries: OpenEntrySet): number;
  self: SyncOps;
}

/**
 * What the operations of every concept share, made once per connection: the statements, the
 * session heads and open entries this connection knows, prepared query shapes, the append (the
 * log's one write) and the reads of heads and batches. `self` is every operation once composed
 * (operations.ts), for an operation that calls another.
 */
export function createShared(db: Database.Database, st: Statements, hooks: OperationHooks): Shared {
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
    self: undefined as unknown as SyncOps,
  };
}

/**
 * Runs `fn` with SQLite's `secure_delete` on: what it deletes is overwritten with zeros in the
 * database's pages (and so in the WAL frames it writes), not left in free space (ADR-0041). On for
 * erasures only: everything else deletes as fast as before.
 */
export function withSecureDelete<T>(db: Database.Database, fn: () => T): T {
  const before = db.pragma('secure_delete', { simple: true }) as number;
  db.pragma('secure_delete = ON');
  try {
    return fn();
  } finally {
    db.pragma(`secure_delete = ${before}`);
  }
}
