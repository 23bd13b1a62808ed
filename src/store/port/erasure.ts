/**
 * The erasure namespace of the port (`store.erasure`, issue 42 part 3, ADR-0041): what erasing more
 * than one session needs of the store (which sessions a tenant or a date reaches, a tenant's own
 * rows), the audit of erasures, and the scan that proves what an erasure left. Erasing one session
 * is `store.sessions.erase`.
 */

/** What an erasure reached: one session, every session (and row) of a tenant, or every session idle since before a date. */
export type ErasureScope = 'session' | 'tenant' | 'before';

/**
 * One erasure, as the audit keeps it: that it happened, by whom, when, and how much it removed.
 * The target (a session id, a tenant's name, a date) is kept only as a hash (`targetHash`, SHA-256
 * of `scope:target`): enough to answer "was this one erased?" for who knows the target, and
 * nothing of it for who does not.
 */
export interface ErasureRecord {
  id: string;
  scope: ErasureScope;
  targetHash: string;
  /** The API key id that asked, or `operator` (the CLI, or a server without keys). */
  by: string;
  at: number;
  /** What it removed, by kind (sessions, keys, schedules, …): numbers only. */
  counts: Record<string, number>;
}

/** Which not yet erased sessions an erasure reaches, a page of them at a time (by id). */
export interface ErasableSessionsQuery {
  /** Only this tenant's. */
  tenant?: string;
  /**
   * Only sessions whose last activity is before this time (ms): created before it, with no run
   * created or ended at or after it, and no run not ended yet (not terminal).
   */
  idleBefore?: number;
  after?: string;
  limit: number;
}

/**
 * A place where a needle was found: the table, the column and the row's key (its primary key
 * columns, `k=v` joined by `,`). A physical finding (SQLite) names `(database file)` or `(WAL file)`
 * as its table, `bytes` as its column and `offset=N` as its row: the needle is in the file's bytes
 * though in no row (freed space not overwritten yet); reported only for needles no row holds.
 */
export interface ErasureFinding {
  table: string;
  column: string;
  row: string;
  /** Which needle was found (as given). */
  needle: string;
  /**
   * Set when the value is one an erasure keeps by design (ADR-0010, ADR-0041): the id or tenant of
   * a tombstone (the erased session's row, its runs' billing rows), a revoked key's tenant, a
   * paused schedule's target. Findings without it are remnants.
   */
  kept?: string;
}

/** The erasure namespace of the port (`store.erasure`). */
export interface ErasureOps {
  /** Ids of sessions not erased yet that the query reaches, by id, after `after`. */
  sessions(q: ErasableSessionsQuery): Promise<string[]>;
  /**
   * Erases a tenant's own rows, once its sessions are erased: its API keys are revoked (at `at`,
   * unless revoked before) and their names removed; its schedules and their fires, its webhooks,
   * their deliveries and attempts, its datasets and their items, its batches and their items, and
   * its idempotency records are deleted. Returns how many of each, in one transaction. The
   * sessions' tombstones and the keys' rows stay (billing, and the keys' ids in the audit).
   */
  eraseTenant(tenant: string, at: number): Promise<Record<string, number>>;
  /** Keeps one erasure in the audit. */
  record(r: ErasureRecord): Promise<void>;
  /** The audit, newest first. */
  list(page: { before?: string; limit: number }): Promise<ErasureRecord[]>;
  /**
   * Every place any needle is found: every column that can hold text of every table of the store
   * (found in the database's catalog, so tables added later are searched too), the log's
   * compressed rows decompressed, ids also in the binary form the log's index keeps them in.
   * Findings the store keeps by design carry `kept` (see ErasureFinding).
   */
  scan(needles: readonly string[]): Promise<ErasureFinding[]>;
  /**
   * Leaves as few physical copies of what erasures deleted as the backend can, and says what it
   * did and what it cannot. SQLite checkpoints its WAL into the database file and truncates it (an
   * erasure's own deletes zero what they free, `secure_delete`); with `vacuum`, it first rebuilds
   * the database file (VACUUM: free space that earlier ordinary deletes left, e.g. a seal's, is
   * gone). PostgreSQL does nothing by itself; with `vacuum`, it runs VACUUM on every table of the
   * schema (dead row versions are reclaimed, not overwritten: WAL segments and backups keep them
   * until they expire). Outside a transaction.
   */
  purge(options?: { vacuum?: boolean }): Promise<string>;
}
