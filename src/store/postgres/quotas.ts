/** PostgreSQL: the quotas operations of the port (`store.quotas`, ADR-0043). */
import type { QuotaUsage } from '../port/index.ts';
import { overLimit, quotaUsageSql, refusal, toQuotaUsage, type QuotaUsageRow } from '../quota-rows.ts';
import type { PgOpsOf } from './context.ts';
import type { Sql } from './sql.ts';

const dollar = (n: number) => `$${n}`;
const USAGE = quotaUsageSql(dollar, false);
const USAGE_EXCEPT = quotaUsageSql(dollar, true);

const held = async (q: Sql, scope: string, day: number, month: number, call: string): Promise<QuotaUsage> =>
  toQuotaUsage(await q.rows<QuotaUsageRow>(USAGE_EXCEPT, [scope, day, month, call]));

/**
 * A reservation takes a transaction-scoped advisory lock per scope (in a fixed order): reservations
 * of one tenant on every node take turns; other tenants do not wait.
 */
export const pgQuotasOps: PgOpsOf<'quotas'> = {
  reserveQuota: ({ atomic }, r) =>
    atomic(async (q) => {
      const scopes = [...r.scopes].sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0));
      for (const s of scopes)
        await q.run("SELECT pg_advisory_xact_lock(hashtextextended('keel.quota:' || $1, 0))", [s.scope]);
      for (const s of r.scopes) {
        const u = await held(q, s.scope, r.day, r.month, r.callId);
        const over = overLimit(r, s.budget, {
          tokensDay: u.tokensDay.used + u.tokensDay.reserved,
          costDay: u.costDay.used + u.costDay.reserved,
          costMonth: u.costMonth.used + u.costMonth.reserved,
        });
        if (over) return refusal(s.scope, over, u);
      }
      for (const s of r.scopes)
        await q.run(
          `INSERT INTO quota_charges (scope, call_id, run_id, day, month, tokens, cost, settled, at) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8)
           ON CONFLICT (scope, call_id) DO UPDATE SET run_id = excluded.run_id, day = excluded.day, month = excluded.month,
             tokens = excluded.tokens, cost = excluded.cost, settled = 0, at = excluded.at`,
          [s.scope, r.callId, r.runId, r.day, r.month, Math.max(0, Math.round(r.tokens)), r.cost, r.now],
        );
      return { granted: true as const };
    }),
  settleQuota: async ({ sql }, callId, tokens, cost) => {
    await sql.run('UPDATE quota_charges SET tokens = $1, cost = $2, settled = 1 WHERE call_id = $3', [
      Math.max(0, Math.round(tokens)),
      cost,
      callId,
    ]);
  },
  releaseQuota: async ({ sql }, callId) => {
    await sql.run('DELETE FROM quota_charges WHERE call_id = $1 AND settled = 0', [callId]);
  },
  quotaUsage: async ({ sql }, scope, day, month) =>
    toQuotaUsage(await sql.rows<QuotaUsageRow>(USAGE, [scope, day, month])),
};
