/** SQLite: the claims operations of the port (`store.claims`), synchronous, on the connection's shared state. */
import { type RunStatus, type ClaimPolicy } from '../port/index.ts';
import { dueRunsSql } from '../due-runs.ts';
import { chargeSql, readyRunsTable, readySql, tenantsToServeSql } from '../fair-dispatch.ts';
import { toCheckpoint, toRun, type RunRow } from '../rows.ts';
import { limitOf } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function claimOps(c: Shared): SyncOpsOf<'claims'> {
  const { st, prepared } = c;

  /**
   * The statements of a claim under a policy (the runs layer's lifecycle, see ClaimPolicy), prepared
   * once per policy. The attempt counts interruptions (see RunRecord.attempt): a first start or the
   * recovery of a run whose lease expired starts a new attempt; resuming after a wait, a pause or a
   * graceful hand-back does not. Which run is taken is fair dispatch's (store/fair-dispatch.ts).
   */
  const statementsOf = (policy: ClaimPolicy) => {
    const list = (xs: readonly RunStatus[]) => xs.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL';
    const ready = readySql(policy, 'sqlite');
    const recoverable = list(policy.recoverable);
    return {
      byId: prepared(
        `SELECT id, status, attempt, tenant, ${ready} AS ready FROM runs
         WHERE ((${ready}) OR (status IN (${recoverable}) AND lease_expires_at < ?)) AND id = ?`,
      ),
      recoverable: prepared(
        `SELECT id, status, attempt FROM runs WHERE status IN (${recoverable}) AND lease_expires_at < ? ORDER BY created_at, id LIMIT 1`,
      ),
      tenant: prepared(tenantsToServeSql(policy, 'sqlite', '1')),
      head: prepared(
        `SELECT id, status, attempt FROM ${readyRunsTable(policy, 'sqlite')} WHERE ${ready} AND tenant = ? ORDER BY created_at, id LIMIT 1`,
      ),
      charge: prepared(chargeSql('sqlite', ['@tenant', '@tenant'], true)),
      chargeNamed: prepared(chargeSql('sqlite', ['@tenant', '@tenant'], false)),
      claim: prepared(
        `UPDATE runs SET status = '${policy.to.replace(/'/g, '')}', lease_owner = ?, lease_expires_at = ?, fencing_token = fencing_token + 1,
                         attempt = CASE WHEN status IN (${recoverable}) OR attempt = 0 THEN attempt + 1 ELSE attempt END, started_at = COALESCE(started_at, ?)
         WHERE id = ? RETURNING *`,
      ),
    };
  };

  /** Built once per policy (the runs layer passes one constant policy): a claim builds no SQL text. */
  const byPolicy = new WeakMap<ClaimPolicy, ReturnType<typeof statementsOf>>();
  const claimStatements = (policy: ClaimPolicy) => {
    let s = byPolicy.get(policy);
    if (!s) byPolicy.set(policy, (s = statementsOf(policy)));
    return s;
  };

  type Picked = { id: string; status: RunStatus; attempt: number };

  /** The run to claim and the tenant its claim charges (none for a recovery): see fair-dispatch.ts. */
  const pick = (s: ReturnType<typeof claimStatements>, now: number, runId: string | null) => {
    if (runId !== null) {
      const r = s.byId.get(now, runId) as (Picked & { tenant: string | null; ready: number }) | undefined;
      return r ? { picked: r, charge: r.ready ? r.tenant : null } : undefined;
    }
    const recovered = s.recoverable.get(now) as Picked | undefined;
    if (recovered) return { picked: recovered, charge: null };
    const tenant = (s.tenant.get() as { tenant: string } | undefined)?.tenant;
    if (tenant === undefined) return undefined;
    return { picked: s.head.get(tenant) as Picked, charge: tenant };
  };

  return {
    // Runs inside the caller's write transaction: the pick, the charge and the update are one atomic step.
    claimRun: (owner, leaseMs, now, policy, options) => {
      const s = claimStatements(policy);
      const got = pick(s, now, options?.runId ?? null);
      if (!got) return undefined;
      const { picked, charge } = got;
      if (charge !== null) (options?.runId ? s.chargeNamed : s.charge).run({ tenant: charge });
      const row = s.claim.get(owner, now + leaseMs, now, picked.id) as RunRow;
      const firstStart = picked.attempt === 0;
      const k = firstStart ? undefined : st.getCheckpoint.get(picked.id);
      return {
        run: toRun(row),
        previous: picked.status,
        firstStart,
        checkpoint: k ? toCheckpoint(picked.id, k) : undefined,
      };
    },
    renewLease: (id, owner, fencingToken, expiresAt) => st.renew.run(expiresAt, id, owner, fencingToken).changes === 1,
    dueRuns: (now, page) => {
      const sql = dueRunsSql(page.after !== undefined, () => '?');
      const args = page.after
        ? [now, page.after.dueAt, page.after.id, limitOf(page.limit)]
        : [now, limitOf(page.limit)];
      return (prepared(sql).all(...args) as Array<RunRow & { due_at: number }>).map((r) => ({
        run: toRun(r),
        dueAt: r.due_at,
      }));
    },
  };
}
