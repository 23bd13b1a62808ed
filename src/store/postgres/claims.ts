/** PostgreSQL: the claims operations of the port (`store.claims`). */
import { dueRunsSql } from '../due-runs.ts';
import { chargeSql, readySql, tenantsToServeSql } from '../fair-dispatch.ts';
import { type RunStatus } from '../port/index.ts';
import { toCheckpoint, toRun, type CheckpointRow, type RunRow } from '../rows.ts';
import { TERMINAL, statusList, limitOf } from './shared.ts';
import type { PgOpsOf } from './context.ts';

/** Runs a `neverWait` claim looks at, at most, for one whose session is free. */
const NEVER_WAIT_CANDIDATES = 8;

export const pgClaimsOps: PgOpsOf<'claims'> = {
  /**
   * The run to claim (fair dispatch, store/fair-dispatch.ts): a named run if it may be claimed; else
   * the oldest run whose lease expired (a recovery, which charges nobody); else the oldest ready run
   * of the tenant to serve first, then of the next one if every ready run of that tenant is locked
   * by a concurrent claim. Each run is locked and skipped by concurrent claims (FOR UPDATE SKIP
   * LOCKED) and moved to the policy's status with a lease and a new token in one statement; the
   * claim of a ready run then charges its tenant (one upsert of its `tenant_dispatch` row). The
   * run's checkpoint comes back with it (where it resumes from: no round trip of its own).
   * `neverWait` (a claim in a transaction that holds other rows): only a run whose session's row is
   * free, locked here too (FOR UPDATE SKIP LOCKED), so that the start's append waits for no lock.
   */
  claimRun: async ({ sql, atCommit }, owner, leaseMs, now, policy, options) => {
    const ready = readySql(policy, 'postgres');
    const recoverable = statusList(policy.recoverable);
    const to = statusList([policy.to]);
    // A run to take, locked (FOR UPDATE SKIP LOCKED: one another claim holds is passed over).
    // `neverWait`: then its session's row, passed over the same way; the candidates are locked one
    // by one as they are looked at, so a run is held needlessly only when its session was not free.
    const candidate = (where: string) =>
      options?.neverWait
        ? `(SELECT c.id, c.status, c.attempt, c.was_ready
              FROM (SELECT id, session_id, status, attempt, (${ready}) AS was_ready FROM runs WHERE ${where} LIMIT ${NEVER_WAIT_CANDIDATES} FOR UPDATE SKIP LOCKED) c
             WHERE EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id FOR UPDATE SKIP LOCKED)
             LIMIT 1)`
        : `(SELECT id, status, attempt, (${ready}) AS was_ready FROM runs WHERE ${where} LIMIT 1 FOR UPDATE SKIP LOCKED)`;
    type Taken = RunRow & {
      tenant: string | null;
      previous_status: RunStatus;
      previous_attempt: number;
      was_ready: boolean;
      checkpoint: CheckpointRow | null;
    };
    // The picked run moved to the policy's status with a lease and a new token, its checkpoint
    // read with it; `picked` is a subquery of one row at most.
    const update = (picked: string) =>
      `UPDATE runs SET status = ${to}, lease_owner = $1, lease_expires_at = $2, fencing_token = runs.fencing_token + 1,
                       attempt = CASE WHEN runs.status IN (${recoverable}) OR runs.attempt = 0 THEN runs.attempt + 1 ELSE runs.attempt END,
                       started_at = COALESCE(runs.started_at, $3)
       FROM ${picked} picked
       WHERE runs.id = picked.id
       RETURNING runs.*, picked.status AS previous_status, picked.attempt AS previous_attempt, picked.was_ready,
                 (SELECT json_build_object('step', k.step, 'seq', k.seq, 'state', k.state) FROM run_checkpoints k WHERE k.run_id = runs.id) AS checkpoint`;
    const take = (where: string, args: unknown[]) =>
      sql.one<Taken>(update(candidate(where)), [owner, now + leaseMs, now, ...args]);
    const expired = `status IN (${recoverable}) AND lease_expires_at < $3`;
    let row: Taken | undefined;
    if (options?.runId) row = await take(`((${ready}) OR (${expired})) AND id = $4`, [options.runId]);
    else {
      // One statement: the oldest run whose lease expired, else the oldest ready run of the tenant
      // to serve first (PostgreSQL's Append runs a UNION ALL's branches in order, and LIMIT 1 stops
      // it at the first row: the second branch, and its choice of a tenant, runs only when the
      // first found nothing). When it claims nothing, it says whether a ready run is left: every
      // ready run of that tenant was held by concurrent claims, and the next tenants are tried.
      const first = `(SELECT t.tenant FROM (${tenantsToServeSql(policy, 'postgres', '1')}) t)`;
      // (A locking clause may not be a UNION's own branch's: each branch reads its candidate as a subquery.)
      const picked = `(SELECT * FROM (SELECT * FROM ${candidate(`${expired} ORDER BY created_at, id`)} e
                                      UNION ALL SELECT * FROM ${candidate(`${ready} AND tenant = ${first} ORDER BY created_at, id`)} r) u
                        LIMIT 1)`;
      // Always one row: the claimed run's columns (all null when none was), and `ready_left`.
      const { ready_left: readyLeft, ...got } = (await sql.one<Taken & { ready_left: boolean | null }>(
        `WITH claimed AS (${update(picked)})
         SELECT claimed.*, CASE WHEN claimed.id IS NULL THEN EXISTS (SELECT 1 FROM runs WHERE ${ready}) END AS ready_left
         FROM (SELECT 1) one LEFT JOIN claimed ON true`,
        [owner, now + leaseMs, now],
      ))!;
      if (got.id !== null) row = got;
      else if (readyLeft)
        for (const { tenant } of await sql.rows<{ tenant: string }>(tenantsToServeSql(policy, 'postgres', '100'))) {
          row = await take(`${ready} AND tenant = $4 ORDER BY created_at, id`, [tenant]);
          if (row) break;
        }
    }
    if (!row) return undefined;
    const { previous_status: previous, previous_attempt: attempt, was_ready: wasReady, checkpoint: k, ...run } = row;
    // The charge updates the tenant's row, which every claim of the tenant updates: in a transaction
    // it is written with its COMMIT, so that the row is locked for the commit alone.
    if (wasReady && run.tenant) {
      const charge = chargeSql('postgres', ['$1', '$1'], !options?.runId);
      if (atCommit) atCommit(charge, [run.tenant]);
      else await sql.run(charge, [run.tenant]);
    }
    return {
      run: toRun(run),
      previous,
      firstStart: Number(attempt) === 0,
      checkpoint: k ? toCheckpoint(run.id, k) : undefined,
    };
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
