/**
 * The store's part of provider flow control (docs/flow-control.md): the state shared by every
 * worker of every process on one store, so that a model's limits hold across a cluster.
 *
 * - `model_limit_state`: one row per limit key: a pause (a provider's 429 with retry-after pauses
 *   the key for everyone); on PostgreSQL it is also the row an acquisition locks (FOR UPDATE).
 * - `model_limit_slots`: concurrency slots, each leased until `expires_at` (a crashed holder's
 *   slot frees itself when its lease is over).
 * - `model_limit_usage`: the requests and tokens granted in the sliding window (one row per
 *   request: its time and its tokens, reserved then settled with the actual usage).
 * - `model_limit_waiters`: the head waiter of each process, with its priority and the time it
 *   started waiting: another process's acquisition yields to a waiter ahead of it (FIFO per key,
 *   priorities first), while the waiter's lease holds.
 */

/** SQLite migration 13 and PostgreSQL migration 8. */
export function limitsDdl(int: 'INTEGER' | 'BIGINT'): string {
  const rowid = int === 'INTEGER' ? ' WITHOUT ROWID' : '';
  return `
      CREATE TABLE model_limit_state (
        key TEXT PRIMARY KEY,
        paused_until ${int} NOT NULL DEFAULT 0
      )${rowid};
      CREATE TABLE model_limit_slots (
        key TEXT NOT NULL,
        id TEXT NOT NULL,
        expires_at ${int} NOT NULL,
        PRIMARY KEY (key, id)
      )${rowid};
      CREATE TABLE model_limit_usage (
        key TEXT NOT NULL,
        id TEXT NOT NULL,
        at ${int} NOT NULL,
        tokens ${int} NOT NULL,
        PRIMARY KEY (key, id)
      )${rowid};
      CREATE INDEX model_limit_usage_at ON model_limit_usage (key, at);
      CREATE TABLE model_limit_waiters (
        key TEXT NOT NULL,
        waiter TEXT NOT NULL,
        rank ${int} NOT NULL,
        since ${int} NOT NULL,
        expires_at ${int} NOT NULL,
        PRIMARY KEY (key, waiter)
      )${rowid};
  `;
}
