import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import type { NoticeOps, Store, StoreOps } from '../port/index.ts';
import { namespaced, type FlatName } from '../port/layout.ts';
import { CommitQueue } from './commit-queue.ts';
import { migrate } from './migrations.ts';
import { createOperations } from './operations.ts';
import type { SyncOps } from './context.ts';
import { prepareStatements } from './statements.ts';
import { WEBHOOK_PLAN } from './webhooks.ts';
import { WAIT_PLAN } from './waits.ts';
import { WalFlusher } from './wal-flusher.ts';
import { FileWriteLock } from './file-write-lock.ts';
import { LIMIT_PLAN } from './limits.ts';
import { DATASET_PLAN } from './datasets.ts';
import { BATCH_PLAN } from './batches.ts';
import { QUOTA_PLAN } from './quotas.ts';
import { ERASURE_PLAN } from './erasure.ts';
import { RETENTION_PLAN } from './retention.ts';
import { SqliteNotices } from './notices.ts';

export interface SqliteStoreOptions {
  /** Database file; `:memory:` for a private in-memory database. Default: $KEEL_DB or ./.keel/keel.db */
  path?: string;
  /** FULL (default) makes every commit durable across power loss; NORMAL may lose the last commits. */
  synchronous?: 'FULL' | 'NORMAL' | 'OFF';
  /** How long a writer waits for another process's write lock. */
  busyTimeoutMs?: number;
}

/**
 * SQLite checkpoints its WAL into the database file when a commit leaves this many frames (of a
 * page each) in it, with synchronous=NORMAL; SQLite's default of 1,000 otherwise. The WAL file
 * grows to about this many pages (64 MB at 4 KB pages) and stays that size. A checkpoint runs
 * inside the commit that crosses the limit: it copies each page the frames changed once, however
 * often they changed it, and syncs the database file. Fewer, larger checkpoints copy and sync less
 * for the same commits (ADR-0033); 40,000 frames made each one a 12–18 ms pause.
 */
const FLUSHED_WAL_CHECKPOINT_FRAMES = 16_000;

export const defaultDbPath = (): string => process.env.KEEL_DB || resolve('.keel', 'keel.db');

/** Operations are written flat (see STORE_LAYOUT): one name each. */
type OpName = FlatName;

/**
 * How each operation runs.
 *
 * `outside`: called on the store itself, the operation is its own unit of work, at its turn on the
 * connection (see CommitQueue):
 * - `serial`: a read, outside any transaction;
 * - `write`: group-committed with the other single writes queued meanwhile, in its own savepoint;
 * - `immediate`: in its own `BEGIN IMMEDIATE` transaction: it reads and writes under the write
 *   lock, so that another process's concurrent write is not lost in between;
 * - `autocommit`: one write statement, in SQLite's implicit transaction.
 *
 * `savepoint`: inside `transaction`, every operation runs at once in the caller's transaction; one
 * with a savepoint leaves nothing behind when it fails, even if the caller catches the error and
 * commits.
 */
const PLAN: { readonly [K in OpName]: { outside: 'serial' | 'write' | 'immediate' | 'autocommit'; savepoint?: true } } =
  {
    createSession: { outside: 'autocommit' },
    getSession: { outside: 'serial' },
    listSessions: { outside: 'serial' },
    updateSession: { outside: 'immediate' },
    append: { outside: 'write', savepoint: true },
    readEvents: { outside: 'serial' },
    getEntries: { outside: 'serial' },
    ancestors: { outside: 'serial' },
    sealEvents: { outside: 'write', savepoint: true },
    eraseSession: { outside: 'immediate', savepoint: true },
    putBlobs: { outside: 'write' },
    getBlobs: { outside: 'serial' },
    blobInfo: { outside: 'serial' },
    blobHead: { outside: 'serial' },
    blobTenant: { outside: 'serial' },
    putSnapshot: { outside: 'write' },
    getSnapshot: { outside: 'serial' },
    createRun: { outside: 'write', savepoint: true },
    getRun: { outside: 'serial' },
    listRuns: { outside: 'serial' },
    dueRuns: { outside: 'serial' },
    activeRun: { outside: 'serial' },
    countRunsByStatus: { outside: 'serial' },
    usageTotals: { outside: 'serial' },
    updateRun: { outside: 'write' },
    claimRun: { outside: 'immediate' },
    renewLease: { outside: 'write' },
    putCheckpoint: { outside: 'write' },
    getCheckpoint: { outside: 'serial' },
    addInput: { outside: 'write' },
    takeInputs: { outside: 'immediate' },
    listInputs: { outside: 'serial' },
    removeInput: { outside: 'write' },
    countInputs: { outside: 'serial' },
    createApiKey: { outside: 'autocommit' },
    findApiKey: { outside: 'serial' },
    listApiKeys: { outside: 'serial' },
    revokeApiKey: { outside: 'autocommit' },
    putTenant: { outside: 'autocommit' },
    getTenant: { outside: 'serial' },
    listTenants: { outside: 'serial' },
    deleteTenant: { outside: 'autocommit' },
    getIdempotency: { outside: 'serial' },
    putIdempotency: { outside: 'immediate' },
    pruneIdempotency: { outside: 'autocommit' },
    ...WEBHOOK_PLAN,
    ...WAIT_PLAN,
    ...LIMIT_PLAN,
    createSchedule: { outside: 'write', savepoint: true },
    getSchedule: { outside: 'serial' },
    listSchedules: { outside: 'serial' },
    updateSchedule: { outside: 'write' },
    deleteSchedule: { outside: 'immediate', savepoint: true },
    dueSchedules: { outside: 'serial' },
    addScheduleFire: { outside: 'write' },
    listScheduleFires: { outside: 'serial' },
    ...DATASET_PLAN,
    ...BATCH_PLAN,
    ...QUOTA_PLAN,
    ...ERASURE_PLAN,
    ...RETENTION_PLAN,
  };

const OP_NAMES = Object.keys(PLAN) as OpName[];

type AnyOp = (...args: unknown[]) => unknown;

/** The operations for `transaction`'s callback: the caller already holds the connection. */
function inTransaction(db: Database.Database, sync: SyncOps, queue: CommitQueue): StoreOps {
  const ops: Partial<Record<OpName, (...args: unknown[]) => Promise<unknown>>> = {};
  for (const name of OP_NAMES) {
    const op = sync[name] as unknown as AnyOp;
    // Made once: better-sqlite3 builds a transaction function's four variants at each `db.transaction`.
    const run = PLAN[name].savepoint
      ? db.transaction((args: unknown[]) => op(...args))
      : (args: unknown[]) => op(...args);
    // An operation that fails is undone (its savepoint), even if the caller goes on: what it
    // asked to do on commit is forgotten with it.
    ops[name] = async (...args) => {
      const mark = queue.mark();
      try {
        return run(args);
      } catch (e) {
        queue.undoTo(mark);
        throw e;
      }
    };
  }
  // Each entry wraps the synchronous operation of the same name, whose type follows the port's.
  return namespaced((name) => ops[name]!);
}

// Typed as having every namespace of the port: SqliteStore's constructor puts them on the instance.
const WithStoreOps = class {} as unknown as abstract new () => StoreOps;

/** The embedded backend: one better-sqlite3 connection, WAL mode, durable commits by default. */
export class SqliteStore extends WithStoreOps implements Store {
  readonly kind = 'sqlite';
  readonly path: string;
  private readonly db: Database.Database;
  private readonly queue: CommitQueue;
  private readonly flusher: WalFlusher | undefined;
  private readonly fileLock: FileWriteLock | undefined;
  private lockReleased = false;
  private readonly sync: SyncOps;
  private readonly ops: StoreOps;

  /**
   * Change notices, and for a file (not `:memory:`, which has no other process): `broadcast` to the
   * other processes (and store instances) on the same file, through the file's local bus
   * (ADR-0035), and `caughtUp`, a barrier on that bus (see notices.ts).
   */
  readonly notices: NoticeOps & Pick<Required<NoticeOps>, 'changes'>;
  private readonly feed: SqliteNotices;

  constructor(options: SqliteStoreOptions = {}) {
    super();
    // One function per operation of the port, each run as PLAN says (see `dispatch`).
    Object.assign(
      this,
      namespaced(
        (name) =>
          (...args: unknown[]) =>
            this.dispatch(name, args),
      ),
    );
    this.path = options.path ?? defaultDbPath();
    if (this.path !== ':memory:') mkdirSync(dirname(resolve(this.path)), { recursive: true });
    this.db = new Database(this.path);
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    try {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
      this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      this.db.pragma('foreign_keys = ON');
      migrate(this.db);
      // Temporary B-trees (a RETURNING clause's rows, a statement's journal inside a transaction, a
      // sort) in memory, not each in a pager of its own set up for a temporary file (none is even
      // opened: the set-up is the cost): an UPDATE ... RETURNING of a run took 110–135 µs in a
      // step's workload that way, 25 µs in memory (ADR-0029). After the migrations, whose index
      // builds may sort a whole table.
      this.db.pragma('temp_store = MEMORY');
    } catch (e) {
      this.db.close();
      throw e;
    }
    // With synchronous=NORMAL a commit does not sync the WAL: the checkpoint does, and waits for
    // every frame written since the last one. The flusher syncs it in the background meanwhile, and
    // checkpoints come less often (ADR-0020).
    const flusher =
      this.path !== ':memory:' && options.synchronous === 'NORMAL'
        ? new WalFlusher(`${resolve(this.path)}-wal`)
        : undefined;
    if (flusher) this.db.pragma(`wal_autocheckpoint = ${FLUSHED_WAL_CHECKPOINT_FRAMES}`);
    this.flusher = flusher;
    this.fileLock = this.path !== ':memory:' ? FileWriteLock.open(this.path) : undefined;
    this.queue = new CommitQueue(
      this.db,
      flusher ? () => flusher.committed() : undefined,
      this.fileLock ? { lock: this.fileLock, timeoutMs: busyTimeoutMs } : undefined,
    );
    const queue = this.queue;
    const sync = createOperations(this.db, prepareStatements(this.db), {
      whenCommitted: (fn) => queue.whenCommitted(fn),
      transactionNumber: () => queue.transactionNumber,
    });
    // An append's commit is noticed on the local bus, at once on commit (see SqliteNotices.appended).
    const append = sync.append;
    sync.append = (sessionId, drafts, options) => {
      const stored = append(sessionId, drafts, options);
      if (stored.length > 0) this.feed.appended(sessionId, stored[0]!.seq, stored[stored.length - 1]!.seq);
      return stored;
    };
    this.sync = sync;
    this.ops = inTransaction(this.db, this.sync, this.queue);
    this.feed = new SqliteNotices({ path: this.path, db: this.db, queue });
    this.notices = this.feed;
  }

  /** Where this store listens on its file's local bus (a Unix socket), once it joined; undefined before, and for `:memory:`. */
  get liveSocket(): string | undefined {
    return this.feed.socket;
  }

  /** Broadcast messages not delivered to another process: dropped for a slow one, or too large (1 MB). */
  get droppedBroadcasts(): number {
    return this.feed.dropped;
  }

  /**
   * Write transactions committed on this connection since the store opened (the schema migrations
   * at open are not counted). Used by benchmarks to count commits per step. Each group-commit
   * COMMIT counts 1, however many writes and `transaction` units it holds; each operation run in
   * its own immediate transaction counts 1, and so does each single-statement write run in
   * autocommit (see PLAN). A COMMIT counts once it succeeded, whether or not it changed a row.
   */
  get commitCount(): number {
    return this.queue.commitCount;
  }

  /** Background syncs of the WAL started so far (with synchronous=NORMAL; see WalFlusher). */
  get walFlushes(): number {
    return this.flusher?.flushes ?? 0;
  }

  private readonly commitObservers = new Set<(seconds: number) => void>();

  observeCommits(listener: (seconds: number) => void): () => void {
    this.commitObservers.add(listener);
    this.queue.onCommit = (seconds) => {
      for (const l of this.commitObservers) l(seconds);
    };
    return () => {
      this.commitObservers.delete(listener);
      if (this.commitObservers.size === 0) this.queue.onCommit = undefined;
    };
  }

  transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> {
    // A unit of work joins the group commit like any single write: its own savepoint, the shared COMMIT.
    return this.queue.write(() => fn(this.ops));
  }

  async close(): Promise<void> {
    this.feed.close();
    await this.queue.close();
    await this.flusher?.close();
    if (!this.lockReleased) this.fileLock?.release();
    this.lockReleased = true;
  }

  // Outside a transaction each operation is its own unit of work, run as PLAN says.
  private dispatch(name: OpName, args: unknown[]): Promise<unknown> {
    const op = this.sync[name] as unknown as AnyOp;
    const run = () => op(...args);
    switch (PLAN[name].outside) {
      case 'serial':
        return this.queue.serial(run);
      case 'write':
        return this.queue.write(run);
      case 'immediate':
        return this.queue.immediate(run);
      case 'autocommit':
        return this.queue.autocommit(run);
    }
  }
}

export function openSqliteStore(options: SqliteStoreOptions = {}): SqliteStore {
  return new SqliteStore(options);
}
