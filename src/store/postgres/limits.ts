import type { FlatOpsOf } from '../port/layout.ts';

type LimitStoreOps = FlatOpsOf<'limits'>;
import type { OpContext } from './context.ts';

type PgLimitOps = {
  [K in keyof LimitStoreOps]: (ctx: OpContext, ...args: Parameters<LimitStoreOps[K]>) => ReturnType<LimitStoreOps[K]>;
};

const n = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));

/**
 * Provider flow control (schema v8, docs/flow-control.md). An acquisition locks the key's state
 * row (SELECT … FOR UPDATE): acquisitions of one key on every node take turns; other keys do not wait.
 */
export const pgLimitOperations: PgLimitOps = {
  acquireLimit: ({ atomic }, a, decide) =>
    atomic(async (q) => {
      await q.run('INSERT INTO model_limit_state (key, paused_until) VALUES ($1, 0) ON CONFLICT (key) DO NOTHING', [
        a.key,
      ]);
      const state = await q.one<{ paused_until: number }>(
        'SELECT paused_until FROM model_limit_state WHERE key = $1 FOR UPDATE',
        [a.key],
      );
      await q.run('DELETE FROM model_limit_slots WHERE key = $1 AND expires_at <= $2', [a.key, a.now]);
      await q.run('DELETE FROM model_limit_usage WHERE key = $1 AND at <= $2', [a.key, a.now - a.windowMs]);
      await q.run('DELETE FROM model_limit_waiters WHERE key = $1 AND expires_at <= $2', [a.key, a.now]);
      const ahead = await q.one(
        'SELECT 1 AS x FROM model_limit_waiters WHERE key = $1 AND waiter <> $2 AND (rank < $3 OR (rank = $3 AND since < $4)) LIMIT 1',
        [a.key, a.waiter, a.rank, a.since],
      );
      const s = (await q.one<{ n: string; oldest: number | null }>(
        'SELECT count(*) AS n, min(expires_at) AS oldest FROM model_limit_slots WHERE key = $1',
        [a.key],
      ))!;
      const u = (await q.one<{ n: string; tokens: string | null }>(
        'SELECT count(*) AS n, sum(tokens) AS tokens FROM model_limit_usage WHERE key = $1',
        [a.key],
      ))!;
      const rows = await q.rows<{ at: number; tokens: number }>(
        'SELECT at, tokens FROM model_limit_usage WHERE key = $1 ORDER BY at',
        [a.key],
      );
      const decision = decide(a, {
        pausedUntil: n(state?.paused_until),
        ahead: ahead !== undefined,
        slots: n(s.n),
        oldestSlotExpiry: s.oldest === null ? null : n(s.oldest),
        requests: n(u.n),
        tokens: n(u.tokens),
        usage: () => rows.map((r) => ({ at: n(r.at), tokens: n(r.tokens) })),
      });
      if (!decision.granted) {
        await q.run(
          'INSERT INTO model_limit_waiters (key, waiter, rank, since, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key, waiter) DO UPDATE SET rank = excluded.rank, since = excluded.since, expires_at = excluded.expires_at',
          [a.key, a.waiter, a.rank, a.since, a.now + a.waiterLeaseMs],
        );
        return decision;
      }
      await q.run('DELETE FROM model_limit_waiters WHERE key = $1 AND waiter = $2', [a.key, a.waiter]);
      if (a.concurrency !== undefined)
        await q.run('INSERT INTO model_limit_slots (key, id, expires_at) VALUES ($1, $2, $3)', [
          a.key,
          a.id,
          a.now + a.slotLeaseMs,
        ]);
      if (a.requestsPerWindow !== undefined || a.tokensPerWindow !== undefined) {
        await q.run('INSERT INTO model_limit_usage (key, id, at, tokens) VALUES ($1, $2, $3, $4)', [
          a.key,
          a.id,
          a.now,
          a.tokensPerWindow !== undefined ? Math.min(a.tokens, a.tokensPerWindow) : a.tokens,
        ]);
      }
      return decision;
    }),

  releaseLimit: async ({ sql }, key, id) => {
    await sql.run('DELETE FROM model_limit_slots WHERE key = $1 AND id = $2', [key, id]);
  },

  renewLimit: async ({ sql }, key, id, expiresAt) =>
    (await sql.run('UPDATE model_limit_slots SET expires_at = $1 WHERE key = $2 AND id = $3', [expiresAt, key, id])) ===
    1,

  settleLimit: async ({ sql }, key, id, tokens) => {
    await sql.run('UPDATE model_limit_usage SET tokens = $1 WHERE key = $2 AND id = $3', [
      Math.max(0, Math.round(tokens)),
      key,
      id,
    ]);
  },

  pauseLimit: async ({ sql }, key, until) => {
    await sql.run(
      'INSERT INTO model_limit_state (key, paused_until) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET paused_until = GREATEST(model_limit_state.paused_until, excluded.paused_until)',
      [key, until],
    );
  },

  leaveLimitQueue: async ({ sql }, key, waiter) => {
    await sql.run('DELETE FROM model_limit_waiters WHERE key = $1 AND waiter = $2', [key, waiter]);
  },

  limitState: async ({ sql }, key, now, windowMs = 60_000) => {
    const state = await sql.one<{ paused_until: number }>('SELECT paused_until FROM model_limit_state WHERE key = $1', [
      key,
    ]);
    const s = await sql.one<{ n: string }>(
      'SELECT count(*) AS n FROM model_limit_slots WHERE key = $1 AND expires_at > $2',
      [key, now],
    );
    const u = await sql.one<{ n: string; tokens: string | null }>(
      'SELECT count(*) AS n, sum(tokens) AS tokens FROM model_limit_usage WHERE key = $1 AND at > $2',
      [key, now - windowMs],
    );
    const w = await sql.one<{ n: string }>(
      'SELECT count(*) AS n FROM model_limit_waiters WHERE key = $1 AND expires_at > $2',
      [key, now],
    );
    return {
      pausedUntil: n(state?.paused_until),
      slots: n(s?.n),
      requests: n(u?.n),
      tokens: n(u?.tokens),
      waiters: n(w?.n),
    };
  },
};
