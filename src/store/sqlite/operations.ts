/** Every SQLite operation of the port, flat (see STORE_LAYOUT), synchronous: composed from one file per concept. */
import type Database from 'better-sqlite3';
import type { Statements } from './statements.ts';
import { createShared } from './shared.ts';
import { sessionOps } from './sessions.ts';
import { eventOps } from './events.ts';
import { runOps } from './runs.ts';
import { claimOps } from './claims.ts';
import { inputOps } from './inputs.ts';
import { keyOps } from './keys.ts';
import { tenantOps } from './tenants.ts';
import { idempotencyOps } from './idempotency.ts';
import { createWebhookOperations } from './webhooks.ts';
import { createWaitOperations } from './waits.ts';
import { createLimitOperations } from './limits.ts';
import { scheduleOperations } from './schedules.ts';
import { datasetOps } from './datasets.ts';
import { batchOps } from './batches.ts';
import { quotaOps } from './quotas.ts';
import { erasureOps } from './erasure.ts';
import { retentionOps } from './retention.ts';
import type { OperationHooks, SyncOps } from './context.ts';

/**
 * The data operations, each written once: synchronous, run directly on the connection. The caller
 * holds the connection's turn and chooses the transaction (see `SqliteStore`).
 */
export function createOperations(db: Database.Database, st: Statements, hooks: OperationHooks): SyncOps {
  const c = createShared(db, st, hooks);
  const { heads } = c;
  const ops: SyncOps = {
    ...sessionOps(c),
    ...eventOps(c),
    ...runOps(c),
    ...claimOps(c),
    ...inputOps(c),
    ...keyOps(c),
    ...tenantOps(c),
    ...idempotencyOps(c),
    ...createWebhookOperations(db),
    ...createWaitOperations(db),
    ...createLimitOperations(db),
    ...scheduleOperations(c.prepared),
    ...datasetOps(c),
    ...batchOps(c),
    ...quotaOps(db),
    ...erasureOps(db),
    ...retentionOps(c),
  };
  // Any operation may change a session's head or a run's fencing token (another run's append, one
  // without a fence, a claim, a seal): SessionHeads counts them all, and a run's append takes the
  // head its last append left only if nothing ran in between.
  for (const name of Object.keys(ops) as Array<keyof SyncOps>) {
    const op = ops[name] as (...args: unknown[]) => unknown;
    (ops as Record<string, unknown>)[name] = (...args: unknown[]) => {
      heads.counted();
      return op(...args);
    };
  }
  c.self = ops;
  return ops;
}
