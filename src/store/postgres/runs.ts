/** PostgreSQL: the runs operations of the port (`store.runs`). */
import { waitExpiresAt } from '../due-runs.ts';
import {
  NotFoundError,
  RUN_STATUS_VALUES,
  RunBusyError,
  RunConflictError,
  StoreError,
  type RunStatus,
} from '../port/index.ts';
import { hasNul } from '../plain-text.ts';
import {
  RUN_COLUMNS,
  toCheckpoint,
  toRun,
  toUsageTotals,
  usageGroupSql,
  type CheckpointRow,
  type RunRow,
  type UsageRow,
} from '../rows.ts';
import { FOREIGN_KEY_VIOLATION, sqlState, UNIQUE_VIOLATION } from './sql.ts';
import { TERMINAL, USAGE_OWN_SQL, statusList, limitOf, isActiveRunConflict, activeRunId } from './shared.ts';
import type { PgOpsOf } from './context.ts';

export const pgRunsOps: PgOpsOf<'runs'> = {
  createRun: async ({ sql, guarded }, r) => {
    try {
      const row = await guarded((q) =>
        q.one<RunRow>(
          `INSERT INTO runs (id, session_id, parent_run_id, parent_tool_call_id, agent_name, agent_version, agent_spec, status,
                             trigger_message_id, turn, created_at, deadline_at, options, usage, queued_behind, rerun_of, first_seq, tenant)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9, $10, $11, $12, $13, $14, $15,
                   (SELECT last_seq + 1 FROM sessions WHERE id = $2), (SELECT tenant FROM sessions WHERE id = $2))
           RETURNING *`,
          [
            r.id,
            r.sessionId,
            r.parentRunId ?? null,
            r.parentToolCallId ?? null,
            r.agent.name,
            r.agent.version,
            JSON.stringify(r.agentSpec),
            r.triggerMessageId ?? null,
            r.turn ?? null,
            r.createdAt,
            r.deadlineAt ?? null,
            JSON.stringify(r.options ?? {}),
            JSON.stringify(r.usage ?? {}),
            r.queuedBehind === true,
            r.rerunOf ?? null,
          ],
        ),
      );
      return toRun(row!);
    } catch (e) {
      if (isActiveRunConflict(e)) throw new RunBusyError(r.sessionId, await activeRunId(sql, r.sessionId));
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError('conflict', `run ${r.id} already exists`, { cause: e });
      if (sqlState(e) === FOREIGN_KEY_VIOLATION) throw new NotFoundError('session or parent run of run', r.id);
      throw e;
    }
  },

  /**
   * Inside a transaction the run is read FOR UPDATE: it stays as read until the transaction ends
   * (another transaction that reads it to change it waits). What SQLite gives by running one
   * writer at a time, PostgreSQL gives here per run (ADR-0011).
   */
  getRun: async ({ sql, inTransaction }, id) => {
    if (hasNul(id)) return undefined;
    const row = await sql.one<RunRow>(`SELECT * FROM runs WHERE id = $1${inTransaction ? ' FOR UPDATE' : ''}`, [id]);
    return row ? toRun(row) : undefined;
  },

  listRuns: async ({ sql }, q) => {
    const where: string[] = [];
    const args: unknown[] = [];
    if (q.sessionId !== undefined) where.push(`session_id = $${args.push(q.sessionId)}`);
    if (q.tenant !== undefined) where.push(`tenant = $${args.push(q.tenant)}`);
    if (q.parentRunId !== undefined) where.push(`parent_run_id = $${args.push(q.parentRunId)}`);
    if (q.rerunOf !== undefined) where.push(`rerun_of = $${args.push(q.rerunOf)}`);
    if (q.agentName !== undefined) where.push(`agent_name = $${args.push(q.agentName)}`);
    if (q.agentVersion !== undefined) where.push(`agent_version = $${args.push(q.agentVersion)}`);
    if (q.createdFrom !== undefined) where.push(`created_at >= $${args.push(q.createdFrom)}`);
    if (q.createdTo !== undefined) where.push(`created_at < $${args.push(q.createdTo)}`);
    if (q.statuses) where.push(`status IN (${statusList(q.statuses)})`);
    if (q.after !== undefined) where.push(`id > $${args.push(q.after)}`);
    const text = `SELECT * FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT $${args.push(limitOf(q.limit))}`;
    // A tenant's runs: planned for this tenant (its index of waiting runs, or the runs in id order).
    return (
      q.tenant !== undefined ? await sql.rowsPlannedForValues<RunRow>(text, args) : await sql.rows<RunRow>(text, args)
    ).map(toRun);
  },

  activeRun: async ({ sql }, sessionId) => {
    const row = await sql.one<RunRow>(
      `SELECT * FROM runs WHERE session_id = $1 AND status NOT IN (${TERMINAL}) AND NOT queued_behind`,
      [sessionId],
    );
    return row ? toRun(row) : undefined;
  },

  countRunsByStatus: async ({ sql }) => {
    const counts = Object.fromEntries(RUN_STATUS_VALUES.map((s) => [s, 0])) as Record<RunStatus, number>;
    for (const r of await sql.rows<{ status: RunStatus; n: number }>(
      `SELECT status, sum(n)::bigint AS n
         FROM (SELECT status, n FROM run_status_counts UNION ALL SELECT status, n FROM run_status_deltas) c
        GROUP BY status`,
    ))
      counts[r.status] = r.n;
    return counts;
  },

  usageTotals: async ({ sql }, q) => {
    const group = usageGroupSql(q.groupBy);
    const rows = await sql.rows<UsageRow>(USAGE_OWN_SQL + group.sql, [
      q.from,
      q.to,
      q.tenant ?? null,
      q.agent ?? null,
      q.model ?? null,
    ]);
    // Without a grouping, no runs is one row of zeros: no group at all.
    return rows.map((r) => toUsageTotals(r, group.dimensions)).filter((t) => t.runs > 0);
  },

  updateRun: async ({ sql, guarded }, id, patch, guard = {}) => {
    const sets: string[] = [];
    const args: unknown[] = [id];
    for (const [k, v] of Object.entries(patch)) {
      if (v === undefined) continue;
      if (k === 'lease') sets.push('lease_owner = NULL, lease_expires_at = NULL');
      else if (k === 'fence') sets.push('fencing_token = fencing_token + 1');
      else {
        const col = RUN_COLUMNS[k];
        if (!col) throw new StoreError('invalid_patch', `runs have no field ${k} to update`);
        sets.push(`${col[0]} = $${args.push(col[1](v))}`);
        // The wait's first deadline beside it: the due time is computed from it (ADR-0034).
        if (k === 'waiting') sets.push(`wait_expires_at = $${args.push(waitExpiresAt(v))}`);
      }
    }
    const where = ['id = $1'];
    if (guard.statuses) where.push(`status IN (${statusList(guard.statuses)})`);
    if (guard.fencingToken !== undefined) where.push(`fencing_token = $${args.push(guard.fencingToken)}`);
    let row: RunRow | undefined;
    try {
      row = sets.length
        ? await guarded((q) =>
            q.one<RunRow>(`UPDATE runs SET ${sets.join(', ')} WHERE ${where.join(' AND ')} RETURNING *`, args),
          )
        : await sql.one<RunRow>(`SELECT * FROM runs WHERE ${where.join(' AND ')}`, args);
    } catch (e) {
      // A run queued behind cannot come up while its session has another active run.
      if (isActiveRunConflict(e)) {
        const sessionId = (await sql.one<{ session_id: string }>('SELECT session_id FROM runs WHERE id = $1', [id]))!
          .session_id;
        throw new RunBusyError(sessionId, await activeRunId(sql, sessionId));
      }
      throw e;
    }
    if (!row) {
      const current = await sql.one<RunRow>('SELECT * FROM runs WHERE id = $1', [id]);
      throw new RunConflictError(id, current ? toRun(current) : undefined, guard);
    }
    return toRun(row);
  },

  putCheckpoint: async ({ sql }, c) => {
    await sql.run(
      `INSERT INTO run_checkpoints (run_id, step, seq, state, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, seq = excluded.seq, state = excluded.state, created_at = excluded.created_at`,
      [c.runId, c.step, c.seq, JSON.stringify(c.state), Date.now()],
    );
  },

  getCheckpoint: async ({ sql }, runId) => {
    const row = await sql.one<CheckpointRow>('SELECT step, seq, state FROM run_checkpoints WHERE run_id = $1', [runId]);
    return row ? toCheckpoint(runId, row) : undefined;
  },
};
