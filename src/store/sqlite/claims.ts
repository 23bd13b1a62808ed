/** SQLite: the claims operations of the port (`store.claims`), synchronous, on the connection's shared state. */
import { type RunStatus, type ClaimPolicy } from '../port/index.ts';
import { dueRunsSql } from '../due-runs.ts';
import { toRun, type RunRow } from '../rows.ts';
import { limitOf } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function claimOps(c: Shared): SyncOpsOf<'claims'> {
  const { st, prepared } = c;

  /**
   * The statements of a claim under a policy (the runs layer's lifecycle, see ClaimPolicy), prepared
   * once per policy. The attempt counts interruptions (see RunRecord.attempt): a first start or the
   * recovery of a run whose lease expired starts a new attempt; resuming after a wait, a pause or a
   * graceful hand-back does not.
   */
  const claimStatements = (policy: ClaimPolicy) => {
    const list = (xs: readonly RunStatus[]) => xs.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL';
    const ready = list(policy.ready);
    const recoverable = list(policy.recoverable);
    return {
      pick: prepared(
        `SELECT id, status, attempt FROM runs
         WHERE ((status IN (${ready}) AND queued_behind = 0) OR (status IN (${recoverable}) AND lease_expires_at < ?)) AND (? IS NULL OR id = ?)
         ORDER BY created_at, id LIMIT 1`,
      ),
      claim: prepared(
        `UPDATE runs SET status = '${policy.to.replace(/'/g, '')}', lease_owner = ?, lease_expires_at = ?, fencing_token = fencing_token + 1,
                         attempt = CASE WHEN status IN (${recoverable}) OR attempt = 0 THEN attempt + 1 ELSE attempt END, started_at = COALESCE(started_at, ?)
         WHERE id = ? RETURNING *`,
      ),
    };
  };

  return {
    // Runs inside the caller's write transaction: the pick and the update are one atomic step.
    claimRun: (owner, leaseMs, now, policy, options) => {
      const runId = options?.runId ?? null;
      const { pick, claim } = claimStatements(policy);
      const picked = pick.get(now, runId, runId) as { id: string; status: RunStatus; attempt: number } | undefined;
      if (!picked) return undefined;
      const row = claim.get(owner, now + leaseMs, now, picked.id) as RunRow;
      return { run: toRun(row), previous: picked.status, firstStart: picked.attempt === 0 };
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
