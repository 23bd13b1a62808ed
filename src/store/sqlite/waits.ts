import type Database from 'better-sqlite3';
import { StoreError } from '../port/index.ts';
import { toCallback, toSignal, type CallbackRow, type SignalRow } from '../wait-rows.ts';
import type { FlatOpsOf } from '../port/layout.ts';

type WaitStoreOps = FlatOpsOf<'waits'>;

type WaitOpName = keyof WaitStoreOps;
type SyncWaitOps = {
  [K in WaitOpName]: (...args: Parameters<WaitStoreOps[K]>) => Awaited<ReturnType<WaitStoreOps[K]>>;
};

/** How each operation runs (see PLAN in store.ts). */
export const WAIT_PLAN: {
  readonly [K in WaitOpName]: { outside: 'serial' | 'write' | 'immediate' | 'autocommit'; savepoint?: true };
} = {
  putSignal: { outside: 'write' },
  getSignal: { outside: 'serial' },
  consumeSignal: { outside: 'write' },
  countSignals: { outside: 'serial' },
  putCallback: { outside: 'write' },
  findCallback: { outside: 'serial' },
};

/** Signals and callback tokens (schema v10, ADR-0015). */
export function createWaitOperations(db: Database.Database): SyncWaitOps {
  const putSignal = db.prepare(
    'INSERT INTO run_signals (run_id, name, payload, source, received_at, consumed_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, name) DO NOTHING',
  );
  const getSignal = db.prepare<[string, string], SignalRow>('SELECT * FROM run_signals WHERE run_id = ? AND name = ?');
  const consume = db.prepare(
    'UPDATE run_signals SET consumed_at = ? WHERE run_id = ? AND name = ? AND consumed_at IS NULL',
  );
  const countSignals = db.prepare<[string], number>('SELECT count(*) FROM run_signals WHERE run_id = ?').pluck();
  const putCallback = db.prepare(
    'INSERT INTO run_callbacks (token_hash, run_id, name, created_at) VALUES (?, ?, ?, ?)',
  );
  const findCallback = db.prepare<[string], CallbackRow>('SELECT * FROM run_callbacks WHERE token_hash = ?');
  return {
    putSignal: (s) =>
      putSignal.run(s.runId, s.name, JSON.stringify(s.payload ?? null), s.source, s.receivedAt, s.consumedAt)
        .changes === 1,
    getSignal: (runId, name) => {
      const row = getSignal.get(runId, name);
      return row ? toSignal(row) : undefined;
    },
    consumeSignal: (runId, name, at) => consume.run(at, runId, name).changes === 1,
    countSignals: (runId) => countSignals.get(runId)!,
    putCallback: (c) => {
      try {
        putCallback.run(c.tokenHash, c.runId, c.name, c.createdAt);
      } catch (e) {
        if ((e as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
          throw new StoreError('conflict', 'this callback token exists already');
        throw e;
      }
    },
    findCallback: (hash) => {
      const row = findCallback.get(hash);
      return row ? toCallback(row) : undefined;
    },
  };
}
