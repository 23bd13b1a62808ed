/**
 * The notices role of the SQLite backend (`store.notices`): change notices from the file's local
 * bus (live-relay.ts, commit-notices.ts, local-bus.ts: ADR-0035) and from SQLite's `data_version`
 * for commits off the bus, and for a file (not `:memory:`) broadcasts on that bus and `caughtUp`,
 * a barrier on it.
 */
import type Database from 'better-sqlite3';
import type { JsonObject, NoticeOps, StoreChange } from '../port/index.ts';
import type { CommitQueue } from './commit-queue.ts';
import { LiveRelay } from './live-relay.ts';

/**
 * While other processes on the file are on its local bus (ADR-0035), they tell of their commits
 * themselves, with the session and seq: SQLite's data_version, which changes with each of them
 * as well, tells of commits off the bus (a `keel` command, an older Keel) at most this often,
 * instead of at every 50 ms poll (each time the session log reads every followed session).
 */
const OFF_BUS_CHANGES_MS = 1_000;

export interface SqliteNoticesOptions {
  /** The database file (`:memory:` or '' for a private database: no bus, no broadcast). */
  path: string;
  /** The store's connection, for `data_version`. */
  db: Database.Database;
  /** The store's queue: `data_version` is read at its turn, and own commits are noticed on commit. */
  queue: CommitQueue;
}

/**
 * Change notices (see `changes` below), and for a file (not `:memory:`, which has no other
 * process): `broadcast` to the other processes (and store instances) on the same file, through
 * the file's local bus (ADR-0035), and `caughtUp`, a barrier on that bus. The store tells it of
 * the appends it commits (`appended`) and closes it when it closes.
 */
export class SqliteNotices implements NoticeOps {
  declare readonly broadcast?: (sessionId: string, message: JsonObject) => void;
  declare readonly caughtUp?: () => Promise<void>;
  private readonly path: string;
  private readonly db: Database.Database;
  private readonly queue: CommitQueue;
  private closed = false;
  /** The live feed's relay on the file's local bus: joined by the first `changes` or `broadcast`, left on close. */
  private relay: LiveRelay | undefined;

  constructor(options: SqliteNoticesOptions) {
    this.path = options.path;
    this.db = options.db;
    this.queue = options.queue;
    if (this.path !== ':memory:' && this.path !== '') {
      Object.assign(this, {
        broadcast: (sessionId: string, message: JsonObject) => this.joinRelay()?.broadcast(sessionId, message),
        caughtUp: () => this.relay?.caughtUp() ?? Promise.resolve(),
      });
    }
  }

  /** Joins the file's local bus, once (not for `:memory:`, nor once closed). */
  private joinRelay(): LiveRelay | undefined {
    if (this.relay || this.closed || !this.broadcast) return this.relay;
    this.relay = new LiveRelay(this.path, (change) => {
      for (const l of [...this.changeListeners]) l(change);
    });
    return this.relay;
  }

  /** Where this store listens on its file's local bus (a Unix socket), once it joined; undefined before, and for `:memory:`. */
  get socket(): string | undefined {
    return this.relay?.socket;
  }

  /** Broadcast messages not delivered to another process: dropped for a slow one, or too large (1 MB). */
  get dropped(): number {
    return this.relay?.dropped ?? 0;
  }

  /**
   * The store appended seqs `first`..`last` to the session in the write being run: its commit is
   * noticed on the local bus, at once on commit (before anything else runs: a barrier's answer
   * written later comes after it), while the store is a member.
   */
  appended(sessionId: string, first: number, last: number): void {
    const relay = this.relay;
    if (relay !== undefined) this.queue.whenCommitted(() => relay.committed(sessionId, first, last));
  }

  private readonly changeListeners = new Set<(change?: StoreChange) => void>();
  private changeTimer: ReturnType<typeof setInterval> | undefined;
  /** data_version changed since its listeners were last told (see OFF_BUS_CHANGES_MS), and when they were. */
  private untoldChange = false;
  private changeToldAt = 0;
  private dataVersion: number | undefined;
  private dataVersionStatement: Database.Statement<[], number> | undefined;

  /** SQLite's `data_version`, from a prepared statement (`db.pragma` prepares it again at each call: ~30 µs). */
  private readDataVersion(): number {
    this.dataVersionStatement ??= this.db.prepare<[], number>('PRAGMA data_version').pluck();
    return this.dataVersionStatement.get()!;
  }

  /**
   * Commits and broadcasts of the other processes on the file, through its local bus (ADR-0035):
   * every member's commits, this store's own included, with their session and seq, and the
   * members' broadcasts. And commits of connections that are not on the bus (a command-line tool,
   * an older Keel), without details, noticed by SQLite's `data_version` (it changes when another
   * connection commits), read every 50 ms while someone listens: a cheap read, no scan (told at
   * most every OFF_BUS_CHANGES_MS while other processes are on the bus).
   */
  readonly changes = (listener: (change?: StoreChange) => void): (() => void) => {
    this.changeListeners.add(listener);
    this.joinRelay();
    if (!this.changeTimer) {
      // The version now: a commit of another connection right after this call is a change (the
      // first tick would otherwise take it as where it started from).
      try {
        this.dataVersion = this.readDataVersion();
      } catch {
        // The connection is busy (a statement is being iterated): the first tick starts from its version.
      }
      this.changeTimer = setInterval(() => {
        void this.queue
          .serial(() => this.readDataVersion())
          .then((v) => {
            if (this.dataVersion !== undefined && v !== this.dataVersion) this.untoldChange = true;
            this.dataVersion = v;
            if (!this.untoldChange) return;
            // Other processes on the bus tell of their commits themselves; data_version changes with
            // each of them too, and is told at most every OFF_BUS_CHANGES_MS then.
            const now = Date.now();
            if ((this.relay?.peers ?? 0) > 0 && now - this.changeToldAt < OFF_BUS_CHANGES_MS) return;
            this.untoldChange = false;
            this.changeToldAt = now;
            for (const l of [...this.changeListeners]) l();
          })
          .catch(() => {});
      }, 50);
      this.changeTimer.unref?.();
    }
    return () => {
      this.changeListeners.delete(listener);
      if (this.changeListeners.size === 0 && this.changeTimer) {
        clearInterval(this.changeTimer);
        this.changeTimer = undefined;
        this.dataVersion = undefined;
        this.untoldChange = false;
      }
    };
  };

  /** The store closes: the bus is left, and no listener is told anything more. */
  close(): void {
    this.closed = true;
    this.relay?.close();
    clearInterval(this.changeTimer);
    this.changeTimer = undefined;
    this.changeListeners.clear();
  }
}
