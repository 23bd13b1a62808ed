import type Database from 'better-sqlite3';
import type { FlatOpsOf } from '../port/layout.ts';

type LimitStoreOps = FlatOpsOf<'limits'>;

type LimitOpName = keyof LimitStoreOps;
type SyncLimitOps = {
  [K in LimitOpName]: (...args: Parameters<LimitStoreOps[K]>) => Awaited<ReturnType<LimitStoreOps[K]>>;
};

/**
 * How each operation runs (see PLAN in store.ts): an acquisition reads and writes under the write
 * lock (BEGIN IMMEDIATE), so two processes on one file never both take the last slot.
 */
export const LIMIT_PLAN: {
  readonly [K in LimitOpName]: { outside: 'serial' | 'write' | 'immediate' | 'autocommit'; savepoint?: true };
} = {
  acquireLimit: { outside: 'immediate', savepoint: true },
  releaseLimit: { outside: 'autocommit' },
  renewLimit: { outside: 'autocommit' },
  settleLimit: { outside: 'autocommit' },
  pauseLimit: { outside: 'autocommit' },
  leaveLimitQueue: { outside: 'autocommit' },
  limitState: { outside: 'serial' },
};

/** Provider flow control (schema v13, docs/flow-control.md). */
export function createLimitOperations(db: Database.Database): SyncLimitOps {
  const purgeSlots = db.prepare('DELETE FROM model_limit_slots WHERE key = ? AND expires_at <= ?');
  const purgeUsage = db.prepare('DELETE FROM model_limit_usage WHERE key = ? AND at <= ?');
  const purgeWaiters = db.prepare('DELETE FROM model_limit_waiters WHERE key = ? AND expires_at <= ?');
  const paused = db.prepare<[string], { paused_until: number }>(
    'SELECT paused_until FROM model_limit_state WHERE key = ?',
  );
  const ahead = db.prepare<[string, string, number, number, number], { x: number }>(
    'SELECT 1 AS x FROM model_limit_waiters WHERE key = ? AND waiter <> ? AND (rank < ? OR (rank = ? AND since < ?)) LIMIT 1',
  );
  const slots = db.prepare<[string], { n: number; oldest: number | null }>(
    'SELECT count(*) AS n, min(expires_at) AS oldest FROM model_limit_slots WHERE key = ?',
  );
  const usage = db.prepare<[string], { n: number; tokens: number | null }>(
    'SELECT count(*) AS n, sum(tokens) AS tokens FROM model_limit_usage WHERE key = ?',
  );
  const usageRows = db.prepare<[string], { at: number; tokens: number }>(
    'SELECT at, tokens FROM model_limit_usage WHERE key = ? ORDER BY at',
  );
  const upsertWaiter = db.prepare(
    'INSERT INTO model_limit_waiters (key, waiter, rank, since, expires_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (key, waiter) DO UPDATE SET rank = excluded.rank, since = excluded.since, expires_at = excluded.expires_at',
  );
  const deleteWaiter = db.prepare('DELETE FROM model_limit_waiters WHERE key = ? AND waiter = ?');
  const insertSlot = db.prepare('INSERT INTO model_limit_slots (key, id, expires_at) VALUES (?, ?, ?)');
  const insertUsage = db.prepare('INSERT INTO model_limit_usage (key, id, at, tokens) VALUES (?, ?, ?, ?)');
  const release = db.prepare('DELETE FROM model_limit_slots WHERE key = ? AND id = ?');
  const renew = db.prepare('UPDATE model_limit_slots SET expires_at = ? WHERE key = ? AND id = ?');
  const settle = db.prepare('UPDATE model_limit_usage SET tokens = ? WHERE key = ? AND id = ?');
  const pause = db.prepare(
    'INSERT INTO model_limit_state (key, paused_until) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET paused_until = max(paused_until, excluded.paused_until)',
  );
  const waiters = db.prepare<[string, number], { n: number }>(
    'SELECT count(*) AS n FROM model_limit_waiters WHERE key = ? AND expires_at > ?',
  );

  return {
    acquireLimit: (a, decide) => {
      purgeSlots.run(a.key, a.now);
      purgeUsage.run(a.key, a.now - a.windowMs);
      purgeWaiters.run(a.key, a.now);
      const s = slots.get(a.key)!;
      const u = usage.get(a.key)!;
      const decision = decide(a, {
        pausedUntil: paused.get(a.key)?.paused_until ?? 0,
        ahead: ahead.get(a.key, a.waiter, a.rank, a.rank, a.since) !== undefined,
        slots: s.n,
        oldestSlotExpiry: s.oldest,
        requests: u.n,
        tokens: u.tokens ?? 0,
        usage: () => usageRows.all(a.key),
      });
      if (!decision.granted) {
        upsertWaiter.run(a.key, a.waiter, a.rank, a.since, a.now + a.waiterLeaseMs);
        return decision;
      }
      deleteWaiter.run(a.key, a.waiter);
      if (a.concurrency !== undefined) insertSlot.run(a.key, a.id, a.now + a.slotLeaseMs);
      if (a.requestsPerWindow !== undefined || a.tokensPerWindow !== undefined) {
        insertUsage.run(
          a.key,
          a.id,
          a.now,
          a.tokensPerWindow !== undefined ? Math.min(a.tokens, a.tokensPerWindow) : a.tokens,
        );
      }
      return decision;
    },
    releaseLimit: (key, id) => void release.run(key, id),
    renewLimit: (key, id, expiresAt) => renew.run(expiresAt, key, id).changes === 1,
    settleLimit: (key, id, tokens) => void settle.run(Math.max(0, Math.round(tokens)), key, id),
    pauseLimit: (key, until) => void pause.run(key, until),
    leaveLimitQueue: (key, waiter) => void deleteWaiter.run(key, waiter),
    limitState: (key, now, windowMs = 60_000) => {
      const s = db
        .prepare<[string, number], { n: number }>(
          'SELECT count(*) AS n FROM model_limit_slots WHERE key = ? AND expires_at > ?',
        )
        .get(key, now)!;
      const u = db
        .prepare<[string, number], { n: number; tokens: number | null }>(
          'SELECT count(*) AS n, sum(tokens) AS tokens FROM model_limit_usage WHERE key = ? AND at > ?',
        )
        .get(key, now - windowMs)!;
      return {
        pausedUntil: paused.get(key)?.paused_until ?? 0,
        slots: s.n,
        requests: u.n,
        tokens: u.tokens ?? 0,
        waiters: waiters.get(key, now)!.n,
      };
    },
  };
}
