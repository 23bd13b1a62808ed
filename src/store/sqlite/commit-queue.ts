import type Database from 'better-sqlite3';
import { StoreError } from '../port/index.ts';
import type { FileWriteLock } from './file-write-lock.ts';

type WriteOp = { fn: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void };

/** Writes committed together at most (see `CommitQueue.write`). */
const MAX_BATCH = 256;

/** The longest stretch of store work before the event loop gets a turn (see `CommitQueue.pace`). */
const PACE_MS = 5;

/**
 * Turn-taking on one better-sqlite3 connection. The driver is synchronous, and a transaction spans
 * awaits of its caller: every operation takes its turn on one promise chain, so nothing runs on the
 * connection inside someone else's transaction. Single writes share transactions (group commit).
 */
export class CommitQueue {
  private readonly db: Database.Database;
  private tail: Promise<unknown> = Promise.resolve();
  // The open group-commit batch that new single writes may join (see `write`).
  private batch: WriteOp[] | undefined;
  // Since when a turn of the event loop has been awaited (see `pace`).
  private turnAwaitedSince: number | undefined;
  private closed = false;
  private commits = 0;
  /** Told how long each write transaction took, in seconds, from its start to its commit (see Store.observeCommits). */
  onCommit: ((seconds: number) => void) | undefined;

  private readonly afterCommit: (() => void) | undefined;
  /** The turns to write the file among this process's stores (none for `:memory:`), and how long a turn may be waited for. */
  private readonly fileLock: { lock: FileWriteLock; timeoutMs: number } | undefined;

  // What the open write transaction's work asked to do once it commits (see `whenCommitted`).
  private onThisCommit: Array<() => void> = [];

  private transactions = 0;

  /** Which write transaction is open (or was the last): a new number as each starts (see `writing`), for state that lives as long as one. */
  get transactionNumber(): number {
    return this.transactions;
  }

  private committed(startedAt: number): void {
    this.commits++;
    const done = this.onThisCommit;
    this.onThisCommit = [];
    for (const fn of done) fn();
    this.afterCommit?.();
    this.onCommit?.((performance.now() - startedAt) / 1000);
  }

  /**
   * Runs `fn` once the write transaction now open commits; never if the work that asked rolls back
   * (see `undoTo`). For caches of what is stored: they must not learn a row that a rollback undid.
   */
  whenCommitted(fn: () => void): void {
    this.onThisCommit.push(fn);
  }

  /** Where the work about to run starts in the list of `whenCommitted` callbacks, to undo it (see `undoTo`). */
  mark(): number {
    return this.onThisCommit.length;
  }

  /** Forgets the callbacks registered since `mark` (that work rolled back); `undoTo(0)` forgets the transaction's. */
  undoTo(mark: number): void {
    this.onThisCommit.length = Math.min(mark, this.onThisCommit.length);
  }

  /**
   * The transaction statements, prepared once: `exec` parses its SQL at each call (~1 µs a
   * statement, two or more a transaction).
   */
  private readonly control: Record<
    'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo',
    Database.Statement
  >;

  /** `afterCommit` is called after each commit of a write transaction (see `WalFlusher`). */
  constructor(db: Database.Database, afterCommit?: () => void, fileLock?: { lock: FileWriteLock; timeoutMs: number }) {
    this.db = db;
    this.control = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT keel_write'),
      release: db.prepare('RELEASE keel_write'),
      rollbackTo: db.prepare('ROLLBACK TO keel_write'),
    };
    this.afterCommit = afterCommit;
    this.fileLock = fileLock;
  }

  /** Runs a write transaction (BEGIN to COMMIT) in this file's turn among the process's stores (see FileWriteLock). */
  private writing<T>(fn: () => T | Promise<T>): T | Promise<T> {
    const transaction = () => {
      this.transactions++;
      return fn();
    };
    return this.fileLock ? this.fileLock.lock.run(transaction, this.fileLock.timeoutMs) : transaction();
  }

  /** Write transactions committed through this queue (see `SqliteStore.commitCount`). */
  get commitCount(): number {
    return this.commits;
  }

  /** Runs `fn` at its turn, alone on the connection (a read, or work that manages its own transaction). */
  serial<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreError('closed', 'the store is closed'));
    // Whatever comes after this must not jump ahead of it into an earlier batch.
    this.batch = undefined;
    const run = this.tail.then(() => this.pace()).then(fn);
    this.tail = run.catch(() => {});
    return run;
  }

  /** Runs `fn` at its turn in its own `BEGIN IMMEDIATE` transaction: reads and writes under the write lock. */
  immediate<T>(fn: () => T): Promise<T> {
    return this.serial(() =>
      this.writing(() => {
        const t0 = performance.now();
        let value: T;
        // By hand, as `flush` does: `db.transaction(fn)` would build a transaction function per call.
        this.control.begin.run();
        try {
          value = fn();
          this.control.commit.run();
        } catch (e) {
          this.undoTo(0);
          if (this.db.inTransaction) this.control.rollback.run();
          throw e;
        }
        this.committed(t0);
        return value;
      }),
    );
  }

  /** Runs `fn`, one write statement, at its turn in SQLite's implicit (autocommit) transaction. */
  autocommit<T>(fn: () => T): Promise<T> {
    return this.serial(() =>
      this.writing(() => {
        const t0 = performance.now();
        let value: T;
        try {
          value = fn();
        } catch (e) {
          this.undoTo(0);
          throw e;
        }
        this.committed(t0);
        return value;
      }),
    );
  }

  /**
   * Group commit: single writes issued while earlier work is still queued share one transaction,
   * each in its own savepoint (a failing write is undone alone). Every caller is answered only
   * after the shared COMMIT, so each write is as durable as if it had committed alone; with many
   * runs on one worker, one fsync then serves many of them.
   */
  write<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreError('closed', 'the store is closed'));
    return new Promise<T>((resolve, reject) => {
      const op: WriteOp = { fn, resolve: resolve as (v: unknown) => void, reject };
      if (this.batch && this.batch.length < MAX_BATCH) {
        this.batch.push(op);
        return;
      }
      const batch: WriteOp[] = [op];
      void this.serial(() => this.writing(() => this.flush(batch))).catch((e: unknown) => {
        // The write lock's turn never came (see FileWriteLock): nothing of the batch ran, and no
        // later write may join it.
        if (this.batch === batch) this.batch = undefined;
        for (const op of batch) op.reject(e);
      });
      // After serial(), which closes any earlier batch: later writes may join this one.
      this.batch = batch;
    });
  }

  /** Waits for the queued work, then closes the connection; later calls are refused. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.tail;
    this.closed = true;
    this.db.close();
  }

  private async flush(batch: WriteOp[]): Promise<void> {
    if (this.batch === batch) this.batch = undefined;
    const t0 = performance.now();
    try {
      this.control.begin.run();
    } catch (e) {
      for (const op of batch) op.reject(e);
      return;
    }
    if (batch.length === 1) return this.flushOne(batch[0]!, t0);
    const results: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    for (const op of batch) {
      this.control.savepoint.run();
      const mark = this.mark();
      try {
        // Single writes are synchronous: without an await, the whole flush holds the connection's
        // write lock within one turn of the event loop (another connection never waits on it).
        let value = op.fn();
        if (value instanceof Promise) value = await value;
        this.control.release.run();
        results.push({ ok: true, value });
      } catch (error) {
        // Undo this unit of work alone; the others commit.
        this.undoTo(mark);
        this.control.rollbackTo.run();
        this.control.release.run();
        results.push({ ok: false, error });
      }
    }
    try {
      this.control.commit.run();
    } catch (e) {
      this.undoTo(0);
      if (this.db.inTransaction) this.control.rollback.run();
      for (const op of batch) op.reject(e);
      return;
    }
    this.committed(t0);
    batch.forEach((op, i) => {
      const r = results[i]!;
      if (r.ok) op.resolve(r.value);
      else op.reject(r.error);
    });
  }

  /** A batch of one write (the common case with one run at a time): its own transaction, no savepoint. */
  private async flushOne(op: WriteOp, t0: number): Promise<void> {
    let value: unknown;
    try {
      value = op.fn();
      if (value instanceof Promise) value = await value;
      this.control.commit.run();
    } catch (e) {
      this.undoTo(0);
      if (this.db.inTransaction) this.control.rollback.run();
      op.reject(e);
      return;
    }
    this.committed(t0);
    op.resolve(value);
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
}
