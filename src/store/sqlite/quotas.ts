/** SQLite: the quotas operations of the port (`store.quotas`, ADR-0043), synchronous. */
import type Database from 'better-sqlite3';
import type { FlatOpsOf } from '../port/layout.ts';
import type { QuotaUsage } from '../port/index.ts';
import { overLimit, quotaUsageSql, refusal, toQuotaUsage, type QuotaUsageRow } from '../quota-rows.ts';
import type { SyncOpsOf } from './context.ts';

/**
 * How each operation runs (see PLAN in store.ts): a reservation reads and writes under the write
 * lock (BEGIN IMMEDIATE), so two processes on one file never both take the last of a budget.
 */
export const QUOTA_PLAN: {
  readonly [K in keyof FlatOpsOf<'quotas'>]: {
    outside: 'serial' | 'write' | 'immediate' | 'autocommit';
    savepoint?: true;
  };
} = {
  reserveQuota: { outside: 'immediate', savepoint: true },
  settleQuota: { outside: 'write' },
  releaseQuota: { outside: 'write' },
  quotaUsage: { outside: 'serial' },
};

export function quotaOps(db: Database.Database): SyncOpsOf<'quotas'> {
  const named = (n: number) => ['@scope', '@day', '@month', '@call'][n - 1]!;
  type Params = { scope: string; day: number; month: number; call?: string };
  const usage = db.prepare<[Params], QuotaUsageRow>(quotaUsageSql(named, false));
  const usageExcept = db.prepare<[Params], QuotaUsageRow>(quotaUsageSql(named, true));
  const upsert = db.prepare(
    `INSERT INTO quota_charges (scope, call_id, run_id, day, month, tokens, cost, settled, at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)
     ON CONFLICT (scope, call_id) DO UPDATE SET run_id = excluded.run_id, day = excluded.day, month = excluded.month,
       tokens = excluded.tokens, cost = excluded.cost, settled = 0, at = excluded.at`,
  );
  const settle = db.prepare('UPDATE quota_charges SET tokens = ?, cost = ?, settled = 1 WHERE call_id = ?');
  const release = db.prepare('DELETE FROM quota_charges WHERE call_id = ? AND settled = 0');
  const held = (scope: string, day: number, month: number, call: string): QuotaUsage =>
    toQuotaUsage(usageExcept.all({ scope, day, month, call }));
  return {
    reserveQuota: (r) => {
      for (const s of r.scopes) {
        const u = held(s.scope, r.day, r.month, r.callId);
        const over = overLimit(r, s.budget, {
          tokensDay: u.tokensDay.used + u.tokensDay.reserved,
          costDay: u.costDay.used + u.costDay.reserved,
          costMonth: u.costMonth.used + u.costMonth.reserved,
        });
        if (over) return refusal(s.scope, over, u);
      }
      for (const s of r.scopes)
        upsert.run(s.scope, r.callId, r.runId, r.day, r.month, Math.max(0, Math.round(r.tokens)), r.cost, r.now);
      return { granted: true };
    },
    settleQuota: (callId, tokens, cost) => void settle.run(Math.max(0, Math.round(tokens)), cost, callId),
    releaseQuota: (callId) => void release.run(callId),
    quotaUsage: (scope, day, month) => toQuotaUsage(usage.all({ scope, day, month })),
  };
}
