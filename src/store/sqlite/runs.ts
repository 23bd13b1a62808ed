/** SQLite: the runs operations of the port (`store.runs`), synchronous, on the connection's shared state. */
import {
  NotFoundError,
  RUN_STATUS_VALUES,
  RunBusyError,
  RunConflictError,
  StoreError,
  type RunStatus,
} from '../port/index.ts';
import { RUN_COLUMNS, toCheckpoint, toRun, toUsageTotals, usageGroupSql, type RunRow, type UsageRow } from '../rows.ts';
import { USAGE_OWN_SQL } from './statements.ts';
import { limitOf } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function runOps(c: Shared): SyncOpsOf<'runs'> {
  const { st, prepared, headOf } = c;
  return {
    createRun: (r) => {
      // Its events come after the session's head (none for no such session: the insert then fails on the session).
      const head = headOf(r.sessionId);
      const firstSeq = head ? head.last_seq + 1 : null;
      let row: RunRow;
      try {
        // The row as stored (its defaults filled in), from the insert itself: not read again.
        row = st.insertRun.get({
          id: r.id,
          session_id: r.sessionId,
          parent_run_id: r.parentRunId ?? null,
          parent_tool_call_id: r.parentToolCallId ?? null,
          rerun_of: r.rerunOf ?? null,
          agent_name: r.agent.name,
          agent_version: r.agent.version,
          agent_spec: JSON.stringify(r.agentSpec),
          trigger_message_id: r.triggerMessageId ?? null,
          turn: r.turn ?? null,
          created_at: r.createdAt,
          deadline_at: r.deadlineAt ?? null,
          options: JSON.stringify(r.options ?? {}),
          usage: JSON.stringify(r.usage ?? {}),
          queued_behind: r.queuedBehind ? 1 : 0,
          first_seq: firstSeq,
        }) as RunRow;
      } catch (e) {
        const code = (e as { code?: unknown }).code;
        if (code === 'SQLITE_CONSTRAINT_UNIQUE' && /runs\.session_id/.test((e as Error).message)) {
          throw new RunBusyError(r.sessionId, st.activeRun.get(r.sessionId)?.id ?? 'unknown');
        }
        if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
          throw new StoreError('conflict', `run ${r.id} already exists`, { cause: e });
        if (code === 'SQLITE_CONSTRAINT_FOREIGNKEY') throw new NotFoundError('session or parent run of run', r.id);
        throw e;
      }
      return toRun(row);
    },
    getRun: (id) => {
      const row = st.getRun.get(id);
      return row ? toRun(row) : undefined;
    },
    listRuns: (q) => {
      const where: string[] = [];
      const args: unknown[] = [];
      if (q.sessionId !== undefined) {
        where.push('session_id = ?');
        args.push(q.sessionId);
      }
      if (q.parentRunId !== undefined) {
        where.push('parent_run_id = ?');
        args.push(q.parentRunId);
      }
      if (q.tenant !== undefined) {
        where.push('tenant = ?');
        args.push(q.tenant);
      }
      if (q.rerunOf !== undefined) {
        where.push('rerun_of = ?');
        args.push(q.rerunOf);
      }
      if (q.agentName !== undefined) {
        where.push('agent_name = ?');
        args.push(q.agentName);
      }
      if (q.agentVersion !== undefined) {
        where.push('agent_version = ?');
        args.push(q.agentVersion);
      }
      if (q.createdFrom !== undefined) {
        where.push('created_at >= ?');
        args.push(q.createdFrom);
      }
      if (q.createdTo !== undefined) {
        where.push('created_at < ?');
        args.push(q.createdTo);
      }
      if (q.statuses)
        where.push(`status IN (${q.statuses.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL'})`);
      if (q.after !== undefined) {
        where.push('id > ?');
        args.push(q.after);
      }
      const sql = `SELECT * FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id`;
      return (prepared(`${sql} LIMIT ${limitOf(q.limit)}`).all(...args) as RunRow[]).map(toRun);
    },
    activeRun: (sessionId) => {
      const row = st.activeRun.get(sessionId);
      return row ? toRun(row) : undefined;
    },
    countRunsByStatus: () => {
      const counts = Object.fromEntries(RUN_STATUS_VALUES.map((s) => [s, 0])) as Record<RunStatus, number>;
      for (const r of st.runStatusCounts.all()) counts[r.status] = r.n;
      return counts;
    },
    usageTotals: (q) => {
      const group = usageGroupSql(q.groupBy);
      const rows = prepared(USAGE_OWN_SQL + group.sql).all({
        from: q.from,
        to: q.to,
        tenant: q.tenant ?? null,
        agent: q.agent ?? null,
        model: q.model ?? null,
      }) as UsageRow[];
      // Without a grouping, no runs is one row of zeros: no group at all.
      return rows.map((r) => toUsageTotals(r, group.dimensions)).filter((t) => t.runs > 0);
    },
    updateRun: (id, patch, runGuard = {}) => {
      const sets: string[] = [];
      const args: unknown[] = [];
      for (const [k, v] of Object.entries(patch)) {
        if (v === undefined) continue;
        if (k === 'lease') sets.push('lease_owner = NULL, lease_expires_at = NULL');
        else if (k === 'fence') sets.push('fencing_token = fencing_token + 1');
        else {
          const col = RUN_COLUMNS[k];
          if (!col) throw new StoreError('invalid_patch', `runs have no field ${k} to update`);
          sets.push(`${col[0]} = ?`);
          args.push(col[1](v));
        }
      }
      const where = ['id = ?'];
      args.push(id);
      if (runGuard.statuses)
        where.push(`status IN (${runGuard.statuses.map((x) => `'${x.replace(/'/g, '')}'`).join(', ') || 'NULL'})`);
      if (runGuard.fencingToken !== undefined) {
        where.push('fencing_token = ?');
        args.push(runGuard.fencingToken);
      }
      let row: RunRow | undefined;
      try {
        row = sets.length
          ? (prepared(`UPDATE runs SET ${sets.join(', ')} WHERE ${where.join(' AND ')} RETURNING *`).get(...args) as
              RunRow | undefined)
          : (prepared(`SELECT * FROM runs WHERE ${where.join(' AND ')}`).get(...args) as RunRow | undefined);
      } catch (e) {
        // A run queued behind cannot come up while its session has another active run.
        if (
          (e as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE' &&
          /runs\.session_id/.test((e as Error).message)
        ) {
          const sessionId = st.getRun.get(id)!.session_id;
          throw new RunBusyError(sessionId, st.activeRun.get(sessionId)?.id ?? 'unknown');
        }
        throw e;
      }
      if (!row) {
        const current = st.getRun.get(id);
        throw new RunConflictError(id, current ? toRun(current) : undefined, runGuard);
      }
      return toRun(row);
    },
    putCheckpoint: (c) => {
      st.putCheckpoint.run(c.runId, c.step, c.seq, JSON.stringify(c.state), Date.now());
    },
    getCheckpoint: (runId) => {
      const row = st.getCheckpoint.get(runId);
      return row ? toCheckpoint(runId, row) : undefined;
    },
  };
}
