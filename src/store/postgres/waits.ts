import { StoreError } from '../port/index.ts';
import { toCallback, toSignal, type CallbackRow, type SignalRow } from '../wait-rows.ts';
import type { FlatOpsOf } from '../port/layout.ts';

type WaitStoreOps = FlatOpsOf<'waits'>;
import type { OpContext } from './context.ts';
import { sqlState, UNIQUE_VIOLATION } from './sql.ts';
import { hasNul } from '../plain-text.ts';

type PgWaitOps = {
  [K in keyof WaitStoreOps]: (ctx: OpContext, ...args: Parameters<WaitStoreOps[K]>) => ReturnType<WaitStoreOps[K]>;
};

/** Signals and callback tokens (schema v5, ADR-0015). */
export const pgWaitOperations: PgWaitOps = {
  putSignal: async ({ sql }, s) =>
    (await sql.run(
      'INSERT INTO run_signals (run_id, name, payload, source, received_at, consumed_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, name) DO NOTHING',
      [s.runId, s.name, JSON.stringify(s.payload ?? null), s.source, s.receivedAt, s.consumedAt],
    )) === 1,

  getSignal: async ({ sql }, runId, name) => {
    // A name with NUL cannot be stored (plain-text.ts): none was delivered, as on SQLite.
    if (hasNul(runId) || hasNul(name)) return undefined;
    const row = await sql.one<SignalRow>('SELECT * FROM run_signals WHERE run_id = $1 AND name = $2', [runId, name]);
    return row ? toSignal(row) : undefined;
  },

  consumeSignal: async ({ sql }, runId, name, at) =>
    (await sql.run('UPDATE run_signals SET consumed_at = $1 WHERE run_id = $2 AND name = $3 AND consumed_at IS NULL', [
      at,
      runId,
      name,
    ])) === 1,

  countSignals: async ({ sql }, runId) =>
    Number((await sql.one<{ n: string }>('SELECT count(*) AS n FROM run_signals WHERE run_id = $1', [runId]))!.n),

  putCallback: async ({ guarded }, c) => {
    try {
      await guarded((q) =>
        q.run('INSERT INTO run_callbacks (token_hash, run_id, name, created_at) VALUES ($1, $2, $3, $4)', [
          c.tokenHash,
          c.runId,
          c.name,
          c.createdAt,
        ]),
      );
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION) throw new StoreError('conflict', 'this callback token exists already');
      throw e;
    }
  },

  findCallback: async ({ sql }, hash) => {
    const row = await sql.one<CallbackRow>('SELECT * FROM run_callbacks WHERE token_hash = $1', [hash]);
    return row ? toCallback(row) : undefined;
  },
};
