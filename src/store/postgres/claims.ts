/** PostgreSQL: the claims operations of the port (`store.claims`). */
import { dueRunsSql } from '../due-runs.ts';
import { type RunStatus } from '../port/index.ts';
import { toRun, type RunRow } from '../rows.ts';
import { TERMINAL, statusList, limitOf } from './shared.ts';
import type { PgOpsOf } from './context.ts';

export const pgClaimsOps: PgOpsOf<'claims'> = {
  /**
   * One statement: the oldest claimable run, locked and skipped by concurrent claims
   * (FOR UPDATE SKIP LOCKED), moved to the policy's status with a lease and a new token.
   */
  claimRun: async ({ sql }, owner, leaseMs, now, policy, options) => {
    const ready = statusList(policy.ready);
    const recoverable = statusList(policy.recoverable);
    const to = statusList([policy.to]);
    const row = await sql.one<RunRow & { previous_status: RunStatus; previous_attempt: number }>(
      `UPDATE runs SET status = ${to}, lease_owner = $1, lease_expires_at = $2, fencing_token = runs.fencing_token + 1,
                       attempt = CASE WHEN runs.status IN (${recoverable}) OR runs.attempt = 0 THEN runs.attempt + 1 ELSE runs.attempt END,
                       started_at = COALESCE(runs.started_at, $3)
       FROM (SELECT id, status, attempt FROM runs
             WHERE ((status IN (${ready}) AND NOT queued_behind) OR (status IN (${recoverable}) AND lease_expires_at < $3)) AND ($4::text IS NULL OR id = $4)
             ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) picked
       WHERE runs.id = picked.id
       RETURNING runs.*, picked.status AS previous_status, picked.attempt AS previous_attempt`,
      [owner, now + leaseMs, now, options?.runId ?? null],
    );
    if (!row) return undefined;
    const { previous_status: previous, previous_attempt: attempt, ...run } = row;
    return { run: toRun(run), previous, firstStart: Number(attempt) === 0 };
  },

  renewLease: async ({ sql }, id, owner, fencingToken, expiresAt) =>
    (await sql.run(
      `UPDATE runs SET lease_expires_at = $1 WHERE id = $2 AND lease_owner = $3 AND fencing_token = $4 AND status NOT IN (${TERMINAL})`,
      [expiresAt, id, owner, fencingToken],
    )) === 1,

  dueRuns: async ({ sql }, now, page) => {
    const text = dueRunsSql(page.after !== undefined, (n) => `$${n}`);
    const args = page.after ? [now, page.after.dueAt, page.after.id, limitOf(page.limit)] : [now, limitOf(page.limit)];
    return (await sql.rows<RunRow & { due_at: string | number }>(text, args)).map((r) => ({
      run: toRun(r),
      dueAt: Number(r.due_at),
    }));
  },
};
