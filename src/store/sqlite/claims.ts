/** SQLite: the claims operations of the port (`store.claims`), synchronous, on the connection's shared state. */
import { type RunStatus } from '../port/index.ts';
import { dueRunsSql } from '../due-runs.ts';
import { toRun, type RunRow } from '../rows.ts';
import { limitOf } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function claimOps(c: Shared): SyncOpsOf<'claims'> {
  const { st, prepared, claimStatements } = c;
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
