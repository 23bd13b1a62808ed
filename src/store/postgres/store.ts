import { randomUUID } from 'node:crypto';
import pg from 'pg';
import {
  StoreError,
  type JsonObject,
  type NoticeOps,
  type Store,
  type StoreChange,
  type StoreOps,
} from '../port/index.ts';
import { namespaced, type FlatName } from '../port/layout.ts';
import { migrate, quoteIdent } from './migrations.ts';
import { pgOperations } from './operations.ts';
import type { OpContext } from './context.ts';
import { DEADLOCK_DETECTED, SERIALIZATION_FAILURE, Sql, sqlState, TransactionSql } from './sql.ts';

export interface PostgresStoreOptions {
  /** A connection string: postgres://user:password@host:port/database */
  url: string;
  /**
   * The schema Keel's tables live in (created if missing; default `keel`). Nodes that share a
   * database and a schema share everything; another schema is another, separate Keel.
   */
  schema?: string;
  /** Connections in the pool (default 10): each transaction holds one for its length. */
  poolSize?: number;
  /** How long to wait for a free connection before failing (default 30 s). */
  connectionTimeoutMs?: number;
}

/** Operations are written flat (see STORE_LAYOUT): one name each. */
type OpName = FlatName;

const OP_NAMES = Object.keys(pgOperations) as OpName[];

/** What one notification carries at most (PostgreSQL's limit is 8,000 bytes), with room to spare. */
const MAX_NOTIFY_BYTES = 7_800;

/** A notification of broadcasts that failed is sent again, this many times in all, after 25, 50, 100… ms. */
const NOTIFY_ATTEMPTS = 5;
const NOTIFY_RETRY_MS = 25;

/** A single operation outside a transaction that lost a deadlock is tried again, this many times in all. */
const ATTEMPTS = 4;

const retryable = (e: unknown): boolean => {
  const s = sqlState(e);
  return s === DEADLOCK_DETECTED || s === SERIALIZATION_FAILURE;
};

/** BIGINT columns (times in ms, seqs, tokens) as numbers: they stay far below 2^53. */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8
      ? (v: string) => Number.parseInt(v, 10)
      : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

// Typed as having every namespace of the port: PostgresStore's constructor puts them on the instance.
const WithStoreOps = class {} as unknown as abstract new () => StoreOps;

/**
 * The PostgreSQL backend (node-postgres): for several API servers and workers on one database.
 *
 * Isolation (ADR-0011): PostgreSQL's default READ COMMITTED, with the locks each operation takes
 * stated where it takes them: an append locks its session row (seqs are allocated one transaction
 * at a time per session), a claim skips runs another claim holds (FOR UPDATE SKIP LOCKED), a run
 * read inside a transaction is locked until it ends (read-modify-write of runs, such as two
 * approvals of one run or the usage roll-up of children, take turns), inputs are taken by one
 * DELETE … RETURNING. A transaction that still loses a deadlock fails with StoreError `conflict`;
 * a single operation outside one is tried again.
 */
export class PostgresStore extends WithStoreOps implements Store {
  readonly kind = 'postgres';
  /** Change notices by LISTEN, broadcasts by NOTIFY on the schema's channel, and a ping through it as the barrier. */
  readonly notices: Required<NoticeOps> = {
    changes: (listener) => this.onChanges(listener),
    broadcast: (sessionId, message) => this.sendBroadcast(sessionId, message),
    caughtUp: () => this.caughtUp(),
  };
  readonly schema: string;
  private readonly pool: pg.Pool;
  private readonly url: string;
  private readonly ready: Promise<void>;
  private closed = false;

  constructor(options: PostgresStoreOptions) {
    super();
    // One function per operation of the port, each its own unit of work (see `outside`).
    Object.assign(
      this,
      namespaced(
        (name) =>
          (...args: unknown[]) =>
            this.outside(name, args),
      ),
    );
    this.url = options.url;
    this.schema = options.schema ?? 'keel';
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,50}$/.test(this.schema))
      throw new StoreError(
        'invalid_schema',
        `schema name ${JSON.stringify(this.schema)}: letters, digits and _ only, at most 51`,
      );
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.connectionTimeoutMs ?? 30_000,
      options: `-c search_path=${quoteIdent(this.schema)}`,
      types,
    });
    // An idle connection that the server drops is the pool's to replace, not a crash of the process.
    this.pool.on('error', () => {});
    this.ready = this.migrateSchema();
    this.ready.catch(() => {});
  }

  private async migrateSchema(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await migrate(client, this.schema);
    } finally {
      client.release();
    }
  }

  /** Resolves once the schema is migrated; rejects with why the database cannot be used. */
  opened(): Promise<void> {
    return this.ready;
  }

  /** Work started and not yet finished: close() lets it finish. */
  private readonly inFlight = new Set<Promise<unknown>>();

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    void work.catch(() => {}).finally(() => this.inFlight.delete(work));
    return work;
  }

  private outside(name: OpName, args: unknown[]): Promise<unknown> {
    if (this.closed) return Promise.reject(new StoreError('closed', 'the store is closed'));
    return this.track(this.runOutside(name, args));
  }

  private async runOutside(name: OpName, args: unknown[]): Promise<unknown> {
    await this.ready;
    // An append notifies its commit: the deltas broadcast before it go first.
    if (name === 'append') await this.broadcastsSent();
    // An append outside a transaction is one (keel_append, in one round trip): timed as a commit.
    const t0 = name === 'append' && this.commitObservers.size > 0 ? performance.now() : undefined;
    const sql = new Sql(this.pool);
    const ctx: OpContext = {
      sql,
      inTransaction: false,
      atomic: (fn) => this.inOwnTransaction(fn),
      guarded: (fn) => fn(sql),
    };
    const op = pgOperations[name] as unknown as (ctx: OpContext, ...a: unknown[]) => Promise<unknown>;
    for (let attempt = 1; ; attempt++) {
      try {
        const value = await op(ctx, ...args);
        if (t0 !== undefined) this.committed(t0);
        return value;
      } catch (e) {
        if (!retryable(e) || attempt >= ATTEMPTS) throw e;
        await new Promise((r) => setTimeout(r, 5 * attempt * Math.random()));
      }
    }
  }

  /**
   * Runs `fn` on a pooled connection. `fn` reports a connection it could not bring back to a clean
   * state (a failed ROLLBACK: the connection is gone or mid-protocol): it is then closed, not reused.
   */
  private async withClient<T>(fn: (client: pg.PoolClient, broken: (e: Error) => void) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      return await fn(client, (e) => (broken = e));
    } finally {
      client.release(broken);
    }
  }

  /** `fn` in a transaction of its own (an atomic operation outside the caller's transactions). */
  private inOwnTransaction<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    return this.withClient(async (client, broken) => {
      const sql = new TransactionSql(client);
      try {
        const value = await fn(sql);
        await sql.commit();
        return value;
      } catch (e) {
        await sql.rollback().catch(broken);
        throw e;
      }
    });
  }

  transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreError('closed', 'the store is closed'));
    return this.track(this.runTransaction(fn));
  }

  private async runTransaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> {
    await this.ready;
    // What this transaction commits is notified on commit: the deltas broadcast before it go first.
    await this.broadcastsSent();
    try {
      return await this.withClient(async (client, broken) => {
        const sql = new TransactionSql(client);
        // One operation at a time on the transaction's connection: savepoints nest properly.
        let tail: Promise<unknown> = Promise.resolve();
        const savepoint = <V>(inner: (sql: Sql) => Promise<V>): Promise<V> => sql.savepoint(() => inner(sql));
        const ctx: OpContext = { sql, inTransaction: true, atomic: savepoint, guarded: savepoint };
        const ops: Partial<Record<OpName, (...args: unknown[]) => Promise<unknown>>> = {};
        for (const name of OP_NAMES) {
          const op = pgOperations[name] as unknown as (ctx: OpContext, ...a: unknown[]) => Promise<unknown>;
          ops[name] = (...args) => {
            const run = tail.then(() => op(ctx, ...args));
            tail = run.catch(() => {});
            return run;
          };
        }
        const t0 = performance.now();
        try {
          const value = await fn(namespaced((name) => ops[name]!));
          await tail;
          await sql.commit();
          if (this.commitObservers.size > 0) this.committed(t0);
          return value;
        } catch (e) {
          await sql.rollback().catch(broken);
          throw e;
        }
      });
    } catch (e) {
      if (retryable(e))
        throw new StoreError(
          'conflict',
          `the transaction lost a lock race with another one and was rolled back (${(e as Error).message}): try again`,
          { cause: e },
        );
      throw e;
    }
  }

  private readonly changeListeners = new Set<(change?: StoreChange) => void>();
  private listener: pg.Client | undefined;
  private listening: Promise<void> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * Commits of any node, as PostgreSQL tells them (LISTEN on the schema's channel; every append's
   * transaction notifies on commit with its session and last seq: see the migrations).
   */
  private onChanges(listener: (change?: StoreChange) => void): () => void {
    this.changeListeners.add(listener);
    if (!this.listening) this.listening = this.listen();
    return () => {
      this.changeListeners.delete(listener);
      if (this.changeListeners.size === 0) this.unlisten();
    };
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    this.listener = client;
    const reconnect = () => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.removeAllListeners('notification');
      void client.end().catch(() => {});
      if (this.closed || this.changeListeners.size === 0) {
        this.listening = undefined;
        return;
      }
      // Reconnect; whatever was committed meanwhile is told as a change without details.
      this.retryTimer = setTimeout(() => {
        this.listening = this.listen();
      }, 500);
      this.retryTimer.unref?.();
    };
    client.on('error', reconnect);
    client.on('end', reconnect);
    client.on('notification', (n) => {
      let p: { s?: unknown; q?: unknown; o?: unknown; b?: unknown };
      try {
        p = JSON.parse(n.payload ?? '') as typeof p;
      } catch {
        p = {};
      }
      if (p.o !== undefined) {
        // This instance's ping (see noticesCaughtUp): what was notified before it has arrived.
        if (p.o === this.instanceId && typeof (p as { ping?: unknown }).ping === 'number')
          return this.pinged((p as { ping: number }).ping);
        // Broadcast messages: another node's (this instance's own are not for it).
        if (p.o === this.instanceId || !Array.isArray(p.b)) return;
        for (const m of p.b as Array<{ s?: unknown; m?: unknown }>) {
          if (typeof m.s !== 'string' || typeof m.m !== 'object' || m.m === null) continue;
          for (const l of [...this.changeListeners]) l({ sessionId: m.s, message: m.m as JsonObject });
        }
        return;
      }
      const change: StoreChange | undefined =
        typeof p.s === 'string' && typeof p.q === 'number' ? { sessionId: p.s, lastSeq: p.q } : undefined;
      for (const l of [...this.changeListeners]) l(change);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(`keel_${this.schema}`)}`);
      for (const l of [...this.changeListeners]) l();
    } catch {
      reconnect();
    }
  }

  private readonly commitObservers = new Set<(seconds: number) => void>();

  observeCommits(listener: (seconds: number) => void): () => void {
    this.commitObservers.add(listener);
    return () => void this.commitObservers.delete(listener);
  }

  private committed(startedAt: number): void {
    const seconds = (performance.now() - startedAt) / 1000;
    for (const l of this.commitObservers) l(seconds);
  }

  /** Tells this instance's own broadcasts apart from other nodes'. */
  private readonly instanceId = randomUUID();
  private outbox: Array<{ s: string; m: JsonObject; n: number }> = [];
  private sending = false;
  /** Broadcasts numbered as sent here, and the last one whose notification went out (or was dropped). */
  private broadcastCount = 0;
  private broadcastSent = 0;
  private readonly sentWaiters: Array<{ upTo: number; resolve: () => void }> = [];
  /**
   * Broadcast messages not sent: too big for one notification (PostgreSQL's limit is 8,000
   * bytes), or whose notification failed every attempt (see notify).
   */
  droppedBroadcasts = 0;

  /**
   * NOTIFY on the schema's channel, after everything this instance committed before (a delta is
   * numbered after the events it follows: they are committed, so their notice went first). One
   * notification at a time, in order; what comes meanwhile is sent together in the next.
   */
  private sendBroadcast(sessionId: string, message: JsonObject): void {
    if (this.closed) return;
    this.outbox.push({ s: sessionId, m: message, n: ++this.broadcastCount });
    if (!this.sending) void this.flushBroadcasts();
  }

  /**
   * Resolves once every broadcast made before the call went out: a write waits for it, so that a
   * delta's notification is never delivered after the commit of the message it streams.
   */
  private broadcastsSent(): Promise<void> {
    const upTo = this.broadcastCount;
    if (this.broadcastSent >= upTo) return Promise.resolve();
    return new Promise((resolve) => this.sentWaiters.push({ upTo, resolve }));
  }

  private markSent(n: number): void {
    this.broadcastSent = Math.max(this.broadcastSent, n);
    for (let i = this.sentWaiters.length - 1; i >= 0; i--) {
      if (this.sentWaiters[i]!.upTo <= this.broadcastSent) this.sentWaiters.splice(i, 1)[0]!.resolve();
    }
  }

  private async flushBroadcasts(): Promise<void> {
    this.sending = true;
    try {
      while (this.outbox.length > 0 && !this.closed) {
        const batch: Array<{ s: string; m: JsonObject }> = [];
        let size = 64;
        let last = 0;
        while (this.outbox.length > 0) {
          const { s: sessionId, m, n } = this.outbox[0]!;
          const bytes = Buffer.byteLength(JSON.stringify({ s: sessionId, m }));
          if (bytes > MAX_NOTIFY_BYTES - 64) {
            this.outbox.shift();
            this.droppedBroadcasts++;
            last = n;
            continue;
          }
          if (size + bytes > MAX_NOTIFY_BYTES) break;
          this.outbox.shift();
          batch.push({ s: sessionId, m });
          last = n;
          size += bytes + 1;
        }
        if (batch.length > 0) {
          await this.ready;
          await this.notify(JSON.stringify({ o: this.instanceId, b: batch }), batch.length);
        }
        this.markSent(last);
      }
    } finally {
      this.sending = false;
      // Closed with broadcasts unsent: nobody waits for them.
      if (this.closed) this.markSent(this.broadcastCount);
    }
  }

  /**
   * Sends one notification of broadcasts. A failure (a connection of the pool broken, the server
   * restarting) is tried again after a pause, NOTIFY_ATTEMPTS times in all, before the messages are
   * given up (counted in droppedBroadcasts): the commits waiting for them wait that long at most.
   */
  private async notify(payload: string, messages: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.pool.query('SELECT pg_notify($1, $2)', [`keel_${this.schema}`, payload]);
        return;
      } catch {
        if (attempt >= NOTIFY_ATTEMPTS || this.closed) {
          this.droppedBroadcasts += messages;
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, NOTIFY_RETRY_MS * 2 ** (attempt - 1)));
      }
    }
  }

  private pings = 0;
  private readonly pingWaiters: Array<{ ping: number; resolve: () => void }> = [];

  /**
   * A ping through the schema's channel, from this instance to itself: PostgreSQL delivers
   * notifications in the order their transactions committed, so once it comes back, every notice
   * committed before it has reached the listeners. Never resolves while notices cannot arrive.
   */
  private caughtUp(): Promise<void> {
    if (this.closed) return Promise.resolve();
    const ping = ++this.pings;
    return new Promise<void>((resolve) => {
      this.pingWaiters.push({ ping, resolve });
      void (async () => {
        // Listening first: a ping sent before LISTEN would never come back.
        await this.listening;
        await this.pool.query('SELECT pg_notify($1, $2)', [
          `keel_${this.schema}`,
          JSON.stringify({ o: this.instanceId, ping }),
        ]);
      })().catch(() => {});
    });
  }

  /** Pings come back in the order sent: every waiter up to this one is answered. */
  private pinged(ping: number): void {
    for (let i = this.pingWaiters.length - 1; i >= 0; i--) {
      if (this.pingWaiters[i]!.ping <= ping) this.pingWaiters.splice(i, 1)[0]!.resolve();
    }
  }

  private unlisten(): void {
    clearTimeout(this.retryTimer);
    const client = this.listener;
    this.listener = undefined;
    this.listening = undefined;
    if (client) {
      client.removeAllListeners();
      client.on('error', () => {});
      void client.end().catch(() => {});
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.changeListeners.clear();
    this.unlisten();
    this.pinged(Infinity);
    await this.ready.catch(() => {});
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.pool.end();
  }
}

/** Opens (and migrates) a PostgreSQL store; rejects when the database cannot be reached or used. */
export async function openPostgresStore(options: PostgresStoreOptions | string): Promise<PostgresStore> {
  const store = new PostgresStore(typeof options === 'string' ? { url: options } : options);
  try {
    await store.opened();
  } catch (e) {
    await store.close().catch(() => {});
    throw e;
  }
  return store;
}
