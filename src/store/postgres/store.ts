import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { StoreError, type AppendOptions, type NoticeOps, type Store, type StoreOps } from '../port/index.ts';
import { namespaced, type FlatName } from '../port/layout.ts';
import { migrate, quoteIdent } from './migrations.ts';
import { pgOperations } from './operations.ts';
import { appendsPipelined } from './events.ts';
import type { OpContext } from './context.ts';
import { PgCommitQueue } from './commit-queue.ts';
import { PgNotices } from './notices.ts';
import { clientClass, type StoreLogger } from './client.ts';
import { checkThroughPooler, poolerMode, type PoolerMode } from './pooler.ts';
import { localTimeouts, resolveTimeouts, startupTimeouts, type PostgresTimeouts } from './timeouts.ts';
import { rethrowUnavailable, watchCheckedOut } from './connection-errors.ts';
import { ReadBatch } from './read-batch.ts';
import { foldStatusCounts } from './status-count-folding.ts';
import {
  DEADLOCK_DETECTED,
  IN_FAILED_TRANSACTION,
  SERIALIZATION_FAILURE,
  Sql,
  sqlState,
  TransactionSql,
} from './sql.ts';

export interface PostgresStoreOptions extends PostgresTimeouts {
  /** A connection string: postgres://user:password@host:port/database (the pooler's, behind one). */
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
  /**
   * `transaction` when `url` is a pooler in transaction mode (PgBouncer pool_mode=transaction):
   * unnamed statements, timeouts set per transaction, the schema from the server's search_path
   * (checked at open), LISTEN on `listenUrl` (ADR-0046, pooler.ts). Default `none`.
   */
  pooler?: PoolerMode;
  /** Where LISTEN connects (one connection, outside the pool): straight to the server. Default `url`; required with `pooler: 'transaction'`. */
  listenUrl?: string;
  /** A statement slower than this is logged (warn, with its name and text) on `logger`. Default 1000 ms; 0 for none. */
  slowQueryMs?: number;
  /** Where the store logs slow statements and its warnings (the process's logger). Default: nowhere. */
  logger?: StoreLogger;
}

/** Operations are written flat (see STORE_LAYOUT): one name each. */
type OpName = FlatName;

const OP_NAMES = Object.keys(pgOperations) as OpName[];

/**
 * Operations of one statement and no savepoint: in a transaction, the next operation is sent
 * without waiting for their answer (the connection pipelines), so that reads a lifecycle
 * transaction makes side by side (Promise.all) share a round trip. So is an append that fails its
 * transaction when refused (`abortsTransaction`, events.ts appendsPipelined).
 */
const PIPELINED: ReadonlySet<OpName> = new Set<OpName>([
  'getRun',
  'listRuns',
  'getCheckpoint',
  'putCheckpoint',
  'listInputs',
  'takeInputs',
  'removeInput',
  'webhooksForSession',
]);

/**
 * Reads of one plain SELECT (no lock outside a transaction): outside a transaction, those called
 * in one turn of the event loop are written together on one connection (read-batch.ts).
 */
const BATCHED_READS: ReadonlySet<OpName> = new Set<OpName>([
  'getSession',
  'readEvents',
  'getEntries',
  'ancestors',
  'getSnapshot',
  'getRun',
  'listRuns',
  'getCheckpoint',
  'listInputs',
  'webhooksForSession',
]);

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
  /** Change notices by LISTEN, broadcasts by NOTIFY on the schema's channel, and a ping through it as the barrier (see notices.ts). */
  readonly notices: Required<NoticeOps>;
  readonly schema: string;
  readonly parallelTransactions: number;
  private readonly pool: pg.Pool;
  private readonly pooled: boolean;
  private readonly logger: StoreLogger | undefined;
  private readonly ready: Promise<void>;
  private readonly feed: PgNotices;
  /** Where appends outside a transaction and broadcasts go: one call commits all that wait (ADR-0047). */
  private readonly commits: PgCommitQueue;
  /** Where BATCHED_READS go outside a transaction; none behind a transaction pooler (each goes alone). */
  private readonly reads: ReadBatch | undefined;
  private closed = false;
  /** Stops folding the runs' status count deltas (status-count-folding.ts). */
  private readonly stopFolding: () => Promise<void>;

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
    this.schema = options.schema ?? 'keel';
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,50}$/.test(this.schema))
      throw new StoreError(
        'invalid_schema',
        `schema name ${JSON.stringify(this.schema)}: letters, digits and _ only, at most 51`,
      );
    this.parallelTransactions = Math.max(1, Math.floor((options.poolSize ?? 10) / 2));
    const pooled = poolerMode(options) === 'transaction';
    const timeouts = resolveTimeouts(options);
    const slowQueryMs = options.slowQueryMs ?? 1000;
    if (!Number.isInteger(slowQueryMs) || slowQueryMs < 0)
      throw new StoreError(
        'invalid_option',
        `slowQueryMs must be a whole number of milliseconds >= 0, not ${slowQueryMs}`,
      );
    this.logger = options.logger;
    this.pooled = pooled;
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.connectionTimeoutMs ?? 30_000,
      // Direct: the schema and the timeouts are the connection's own, from its startup. Behind a
      // transaction pooler neither passes (see pooler.ts): each transaction sets its timeouts.
      ...(pooled ? {} : { options: `-c search_path=${quoteIdent(this.schema)}`, ...startupTimeouts(timeouts) }),
      Client: clientClass({
        pooled,
        ...(pooled ? { begin: `BEGIN; ${localTimeouts(timeouts)}` } : {}),
        slowQueryMs,
        ...(options.logger ? { logger: options.logger } : {}),
      }),
      types,
      // A transaction's BEGIN and savepoints travel with the statement after them (TransactionSql).
      pipeline: true,
    });
    // An idle connection that the server drops is the pool's to replace, not a crash of the process.
    this.pool.on('error', () => {});
    // Behind a transaction pooler, statements pipelined on one client could be spread over several
    // server connections: each read goes on its own.
    this.reads = pooled ? undefined : new ReadBatch(this.pool);
    this.ready = this.migrateSchema();
    this.ready.catch(() => {});
    this.stopFolding = foldStatusCounts(this.pool, this.ready);
    const instanceId = randomUUID();
    this.commits = new PgCommitQueue(this.pool, this.ready, instanceId);
    this.commits.onCommit = (seconds) => {
      for (const l of this.commitObservers) l(seconds);
    };
    this.feed = new PgNotices({
      url: options.listenUrl ?? options.url,
      schema: this.schema,
      pool: this.pool,
      commits: this.commits,
      instanceId,
    });
    this.notices = this.feed;
  }

  private async migrateSchema(): Promise<void> {
    const client = await this.pool.connect();
    const watch = watchCheckedOut(client);
    try {
      if (this.pooled) await checkThroughPooler(client, this.schema, this.logger);
      await migrate(client, this.schema);
    } finally {
      watch.done();
      client.release(watch.lost());
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
    // A connection refused or cut is the port's `unavailable` (ADR-0045).
    return this.track(this.runOutside(name, args).catch(rethrowUnavailable));
  }

  private async runOutside(name: OpName, args: unknown[]): Promise<unknown> {
    await this.ready;
    // An append outside a transaction waits for the commit queue's next call, which sends the
    // broadcasts made before it first (a delta's notice before the commit of what it streams).
    if (name === 'append') return this.commits.append(...(args as Parameters<PgCommitQueue['append']>));
    const sql = new Sql(this.reads && BATCHED_READS.has(name) ? this.reads : this.pool);
    const ctx: OpContext = {
      sql,
      inTransaction: false,
      atomic: (fn) => this.inOwnTransaction(fn),
      guarded: (fn) => fn(sql),
    };
    const op = pgOperations[name] as unknown as (ctx: OpContext, ...a: unknown[]) => Promise<unknown>;
    for (let attempt = 1; ; attempt++) {
      try {
        return await op(ctx, ...args);
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
    const watch = watchCheckedOut(client);
    let broken: Error | undefined;
    try {
      return await fn(client, (e) => (broken = e));
    } finally {
      watch.done();
      client.release(broken ?? watch.lost());
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
    return this.track(this.runTransaction(fn).catch(rethrowUnavailable));
  }

  private async runTransaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> {
    await this.ready;
    // What this transaction commits is notified on commit: the deltas broadcast before it go first.
    await this.feed.broadcastsSent();
    try {
      return await this.withClient(async (client, broken) => {
        const sql = new TransactionSql(client);
        // The operations' statements go in the order the operations were called. An operation
        // starts once those before it were sent: a pipelined one (a single statement, no
        // savepoint) lets the next start as soon as its statement is on the connection, any other
        // once it has ended, so that nothing is sent inside a savepoint that is not its own.
        let sent: Promise<unknown> = Promise.resolve();
        // Operations not settled yet: the transaction commits once none is left.
        let unsettled = 0;
        let allSettled: (() => void) | undefined;
        const track = (run: Promise<unknown>) => {
          unsettled++;
          const settled = () => {
            if (--unsettled === 0) allSettled?.();
          };
          run.then(settled, settled);
        };
        // A pipelined statement's refusal aborts the transaction: what was sent after it is then
        // refused as "in a failed transaction". Its own failure is what those are told instead.
        let refused: { error: unknown } | undefined;
        const told = (answer: Promise<unknown>, pipelined: boolean) =>
          answer.catch((e: unknown) => {
            if (refused && sqlState(e) === IN_FAILED_TRANSACTION) throw refused.error;
            // (Only a refusal by the server aborts the transaction: an operation's own error does not.)
            if (pipelined && (sqlState(e) ?? sqlState((e as { cause?: unknown }).cause)) !== undefined)
              refused ??= { error: e };
            throw e;
          });
        const savepoint = <V>(inner: (sql: Sql) => Promise<V>): Promise<V> => sql.savepoint(() => inner(sql));
        const ctx: OpContext = {
          sql,
          inTransaction: true,
          atomic: savepoint,
          guarded: savepoint,
          atCommit: (text, values) => sql.atCommit(text, values),
          appended: new Set(),
        };
        type Op = (ctx: OpContext, ...a: unknown[]) => Promise<unknown>;
        // An operation of one statement and no savepoint: the next starts once its statement is sent.
        const pipelined = (op: Op, args: unknown[]) => {
          let markSent!: () => void;
          const statementSent = new Promise<void>((resolve) => (markSent = resolve));
          const run = sent.then(() => {
            sql.onNextStatement(markSent);
            const answer = told(op(ctx, ...args), true);
            answer.then(markSent, markSent); // (one that sent nothing)
            return answer;
          });
          sent = statementSent;
          track(run);
          return run;
        };
        // Any other: the next starts once it has ended.
        const inTurn = (op: Op, args: unknown[]) => {
          const run = sent.then(() => told(op(ctx, ...args), false));
          sent = run.catch(() => {});
          track(run);
          return run;
        };
        const ops: Partial<Record<OpName, (...args: unknown[]) => Promise<unknown>>> = {};
        for (const name of OP_NAMES) {
          const op = pgOperations[name] as unknown as Op;
          ops[name] = PIPELINED.has(name)
            ? (...args) => pipelined(op, args)
            : name === 'append'
              ? (...args) =>
                  appendsPipelined(ctx, args[2] as AppendOptions | undefined) ? pipelined(op, args) : inTurn(op, args)
              : (...args) => inTurn(op, args);
        }
        const t0 = performance.now();
        try {
          const value = await fn(namespaced((name) => ops[name]!));
          if (unsettled > 0) await new Promise<void>((resolve) => (allSettled = resolve));
          if (refused) throw refused.error; // (one nothing waited for: COMMIT would roll back)
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

  private readonly commitObservers = new Set<(seconds: number) => void>();

  observeCommits(listener: (seconds: number) => void): () => void {
    this.commitObservers.add(listener);
    return () => void this.commitObservers.delete(listener);
  }

  private committed(startedAt: number): void {
    const seconds = (performance.now() - startedAt) / 1000;
    for (const l of this.commitObservers) l(seconds);
  }

  /**
   * Broadcast messages not sent: too big for one notification (PostgreSQL's limit is 8,000
   * bytes), or whose notification failed every attempt (see PgNotices).
   */
  get droppedBroadcasts(): number {
    return this.commits.droppedBroadcasts;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.feed.close();
    await this.stopFolding();
    await this.ready.catch(() => {});
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    await this.commits.drained();
    this.commits.close();
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
