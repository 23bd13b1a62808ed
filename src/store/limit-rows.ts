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

/** One acquisition attempt: all limits of the key at once, atomically. */
export interface LimitAcquire {
  key: string;
  /** The grant's id: its slot and its usage row. */
  id: string;
  /** The waiting process's id (its queue for this key). */
  waiter: string;
  /** Lower goes first (interactive 0, batch 100). */
  rank: number;
  /** When the request started waiting (keeps its place). */
  since: number;
  now: number;
  concurrency?: number;
  requestsPerWindow?: number;
  tokensPerWindow?: number;
  /** Tokens reserved for this request (an estimate, settled after). */
  tokens: number;
  windowMs: number;
  /** The slot's lease (renewed while the call runs). */
  slotLeaseMs: number;
  /** How long a waiter's place holds without being renewed. */
  waiterLeaseMs: number;
}

export type LimitGrant =
  | { granted: true }
  | { granted: false; reason: 'paused' | 'queued' | 'concurrency' | 'requests' | 'tokens'; retryAt: number };

export interface LimitStoreOps {
  /** Takes a slot and a place in the window for `id`, or tells why not and when to try again. */
  acquireLimit(a: LimitAcquire): Promise<LimitGrant>;
  /** Frees the grant's concurrency slot (its usage stays in the window). */
  releaseLimit(key: string, id: string): Promise<void>;
  /** Extends the grant's slot lease; false when it is gone (expired and freed). */
  renewLimit(key: string, id: string, expiresAt: number): Promise<boolean>;
  /** Replaces the grant's reserved tokens with the actual count. */
  settleLimit(key: string, id: string, tokens: number): Promise<void>;
  /** Pauses the key for everyone until `until` (never shortens a pause). */
  pauseLimit(key: string, until: number): Promise<void>;
  /** Withdraws a waiter's place (it stopped waiting). */
  leaveLimitQueue(key: string, waiter: string): Promise<void>;
  /** What the key's state is now (tests, the inspector). */
  limitState(
    key: string,
    now: number,
    windowMs?: number,
  ): Promise<{ pausedUntil: number; slots: number; requests: number; tokens: number; waiters: number }>;
}

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

/**
 * The decision of an acquisition from what the key's rows say (the same for both backends, run
 * inside their transaction): pause, a waiter ahead, concurrency, requests, tokens, in that order.
 */
export function decideLimit(
  a: LimitAcquire,
  s: {
    pausedUntil: number;
    ahead: boolean;
    slots: number;
    oldestSlotExpiry: number | null;
    requests: number;
    tokens: number;
    usage: () => Array<{ at: number; tokens: number }>;
  },
): LimitGrant {
  const poll = a.now + 50;
  if (s.pausedUntil > a.now) return { granted: false, reason: 'paused', retryAt: s.pausedUntil };
  if (s.ahead) return { granted: false, reason: 'queued', retryAt: poll };
  if (a.concurrency !== undefined && s.slots >= a.concurrency) {
    return {
      granted: false,
      reason: 'concurrency',
      retryAt: Math.max(poll, Math.min(s.oldestSlotExpiry ?? poll, a.now + 1000)),
    };
  }
  const rpm = a.requestsPerWindow;
  const tpm = a.tokensPerWindow;
  const tokens = tpm !== undefined ? Math.min(a.tokens, tpm) : a.tokens;
  const overRequests = rpm !== undefined && s.requests + 1 > rpm;
  const overTokens = tpm !== undefined && s.tokens + tokens > tpm;
  if (overRequests || overTokens) {
    // When enough of the window's oldest grants leave it.
    const rows = s.usage();
    let requests = s.requests;
    let used = s.tokens;
    let retryAt = a.now + a.windowMs;
    for (const r of rows) {
      requests -= 1;
      used -= r.tokens;
      if ((rpm === undefined || requests + 1 <= rpm) && (tpm === undefined || used + tokens <= tpm)) {
        retryAt = r.at + a.windowMs;
        break;
      }
    }
    return { granted: false, reason: overRequests ? 'requests' : 'tokens', retryAt: Math.max(a.now + 1, retryAt) };
  }
  return { granted: true };
}
