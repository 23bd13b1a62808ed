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
    // The run to take, locked (FOR UPDATE SKIP LOCKED: one another claim holds is passed over).
    // `neverWait`: then its session's row, passed over the same way; the candidates are locked one
    // by one as they are looked at, so a run is held needlessly only when its session was not free.
    const picked = (where: string) =>
      options?.neverWait
        ? `(SELECT c.id, c.status, c.attempt, c.was_ready
              FROM (SELECT id, session_id, status, attempt, (${ready}) AS was_ready FROM runs WHERE ${where} LIMIT ${NEVER_WAIT_CANDIDATES} FOR UPDATE SKIP LOCKED) c
             WHERE EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id FOR UPDATE SKIP LOCKED)
             LIMIT 1)`
        : `(SELECT id, status, attempt, (${ready}) AS was_ready FROM runs WHERE ${where} LIMIT 1 FOR UPDATE SKIP LOCKED)`;
    const take = (where: string, args: unknown[]) =>
      sql.one<
        RunRow & {
          tenant: string | null;
          previous_status: RunStatus;
          previous_attempt: number;
          was_ready: boolean;
          checkpoint: CheckpointRow | null;
        }
      >(
        `UPDATE runs SET status = ${to}, lease_owner = $1, lease_expires_at = $2, fencing_token = runs.fencing_token + 1,
                         attempt = CASE WHEN runs.status IN (${recoverable}) OR runs.attempt = 0 THEN runs.attempt + 1 ELSE runs.attempt END,
                         started_at = COALESCE(runs.started_at, $3)
         FROM ${picked(where)} picked
         WHERE runs.id = picked.id
         RETURNING runs.*, picked.status AS previous_status, picked.attempt AS previous_attempt, picked.was_ready,
                   (SELECT json_build_object('step', k.step, 'seq', k.seq, 'state', k.state) FROM run_checkpoints k WHERE k.run_id = runs.id) AS checkpoint`,
        [owner, now + leaseMs, now, ...args],
      );
    const expired = `status IN (${recoverable}) AND lease_expires_at < $3`;
    let row;
    if (options?.runId) row = await take(`((${ready}) OR (${expired})) AND id = $4`, [options.runId]);
    else {
      // The tenants to serve are read with the probe for an expired lease (one round trip: the
      // connection pipelines), and only looked at when it found none.
      const [expiredRow, tenants] = await Promise.all([
        take(`${expired} ORDER BY created_at, id`, []),
        sql.rows<{ tenant: string }>(tenantsToServeSql(policy, 'postgres', '100')),
      ]);
      row = expiredRow;
      for (const { tenant } of row ? [] : tenants) {
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
