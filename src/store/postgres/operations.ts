import { PAUSED_FOR_ERASED_SESSION } from '../schedule-rows.ts';
import { dueRunsSql, waitExpiresAt } from '../due-runs.ts';
import {
  FencedError,
  NotFoundError,
  RunBusyError,
  RunConflictError,
  SeqConflictError,
  StoreError,
  RUN_STATUSES,
  TERMINAL_STATUSES,
  type AppendOptions,
  type RunStatus,
  type StoredEvent,
} from '../port/index.ts';
import { blobHashesIn } from '../blob-refs.ts';
import { hasNul } from '../plain-text.ts';
import { erasedTotals, storedEvent } from '../records.ts';
import {
  RUN_COLUMNS,
  toIdempotency,
  toInput,
  toKey,
  toRun,
  toSession,
  toUsageTotals,
  usageGroupSql,
  type CheckpointRow,
  type IdempotencyRow,
  type InputRow,
  type KeyRow,
  type RunRow,
  type SessionRow,
  type SnapshotRow,
  type UsageRow,
} from '../rows.ts';
import { constraintOf, FOREIGN_KEY_VIOLATION, sqlState, UNIQUE_VIOLATION, type Sql } from './sql.ts';
import { pgWebhookOperations } from './webhooks.ts';
import { pgWaitOperations } from './waits.ts';
import { pgLimitOperations } from './limit-operations.ts';
import { scheduleOperations } from './schedule-operations.ts';
import type { PgOps } from './context.ts';

type EventRow = {
  session_id: string;
  seq: number;
  id: string;
  type: string;
  v: number;
  time: number;
  run_id: string | null;
  turn: number | null;
  step: number | null;
  entry: boolean;
  parent_id: string | null;
  ignorable: boolean;
  data: string;
};

function toEvent(r: EventRow): StoredEvent {
  const e: StoredEvent = {
    id: r.id,
    sessionId: r.session_id,
    seq: r.seq,
    type: r.type,
    v: r.v,
    time: r.time,
    entry: r.entry,
    ignorable: r.ignorable,
    data: JSON.parse(r.data) as unknown,
  };
  if (r.run_id !== null) e.runId = r.run_id;
  if (r.turn !== null) e.turn = r.turn;
  if (r.step !== null) e.step = r.step;
  if (r.parent_id !== null) e.parentId = r.parent_id;
  return e;
}

const TERMINAL = TERMINAL_STATUSES.map((s) => `'${s}'`).join(', ');

/** A run's model as `provider:modelId` from its agent spec (null when it names none). */
/**
 * An agent spec as JSON the server can read: its text may hold the escape \u0000 (a prompt's NUL,
 * kept as JSON says it), which PostgreSQL's JSON functions refuse; read as \ufffd instead (the
 * model's fields, all that is read, hold none). The swap keeps the text valid JSON wherever it is.
 */
const specJson = (column: string) => `replace(${column}, '\\u0000', '\\ufffd')::jsonb`;
const MODEL_SQL = `(${specJson('r.agent_spec')} #>> '{model,provider}') || ':' || (${specJson('r.agent_spec')} #>> '{model,modelId}')`;
const tokens = (usage: string, field: string) => `coalesce((${usage}::jsonb ->> '${field}')::numeric, 0)`;

/**
 * usageTotals' runs (see StoreOps.usageTotals): one row per run that ended in [$1, $2), with its
 * tenant, agent, model, end and its own usage: its recorded usage minus the sum of its ended
 * children's (whose recorded usage its own row includes), read through the children index.
 * Followed by the grouping (rows.ts `usageGroupSql`).
 */
const USAGE_OWN_SQL = `WITH own AS (
  SELECT s.tenant AS tenant, r.agent_name AS agent, ${MODEL_SQL} AS model, r.ended_at AS ended_at,
         ${tokens('r.usage', 'inputTokens')} - c.input_tokens AS input_tokens, ${tokens('r.usage', 'outputTokens')} - c.output_tokens AS output_tokens,
         ${tokens('r.usage', 'cachedInputTokens')} - c.cached_tokens AS cached_tokens, ${tokens('r.usage', 'reasoningTokens')} - c.reasoning_tokens AS reasoning_tokens,
         r.cost - c.cost AS cost
  FROM runs r
  JOIN sessions s ON s.id = r.session_id
  CROSS JOIN LATERAL (
    SELECT coalesce(sum(${tokens('k.usage', 'inputTokens')}), 0) AS input_tokens, coalesce(sum(${tokens('k.usage', 'outputTokens')}), 0) AS output_tokens,
           coalesce(sum(${tokens('k.usage', 'cachedInputTokens')}), 0) AS cached_tokens, coalesce(sum(${tokens('k.usage', 'reasoningTokens')}), 0) AS reasoning_tokens,
           coalesce(sum(k.cost), 0) AS cost
    FROM runs k WHERE k.parent_run_id = r.id AND k.ended_at IS NOT NULL
  ) c
  WHERE r.ended_at >= $1 AND r.ended_at < $2
    AND ($3::text IS NULL OR s.tenant = $3) AND ($4::text IS NULL OR r.agent_name = $4) AND ($5::text IS NULL OR ${MODEL_SQL} = $5)
)
`;

/** Statuses as an SQL list (they are the port's own names: no quoting needed beyond a check). */
const statusList = (xs: readonly RunStatus[]): string =>
  xs
    .filter((x) => RUN_STATUSES.includes(x))
    .map((x) => `'${x}'`)
    .join(', ') || 'NULL';

const limitOf = (limit: number | undefined): number | null =>
  limit === undefined || !Number.isFinite(limit) || limit < 0 ? null : Math.floor(limit);

const isActiveRunConflict = (e: unknown): boolean =>
  sqlState(e) === UNIQUE_VIOLATION && constraintOf(e) === 'runs_one_active';

async function activeRunId(sql: Sql, sessionId: string): Promise<string> {
  const row = await sql.one<{ id: string }>(
    `SELECT id FROM runs WHERE session_id = $1 AND status NOT IN (${TERMINAL}) AND NOT queued_behind`,
    [sessionId],
  );
  return row?.id ?? 'unknown';
}

async function sessionRow(sql: Sql, id: string, lock = false): Promise<SessionRow> {
  const row = await sql.one<SessionRow>(`SELECT * FROM sessions WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [id]);
  if (!row) throw new NotFoundError('session', id);
  return row;
}

/** keel_append's refusals (its own SQLSTATEs, see the migrations) as the port's errors. */
function appendRefusal(e: unknown, sessionId: string, options: AppendOptions): unknown {
  const detail = (e as { detail?: string }).detail ?? '';
  switch (sqlState(e)) {
    case 'KF001':
      return new FencedError(options.fence!.runId, options.fence!.token, detail === '' ? undefined : Number(detail));
    case 'KN001':
      return new NotFoundError('session', sessionId);
    case 'KE001':
      return new StoreError('session_erased', `session ${sessionId} was erased: its log takes nothing more`);
    case 'KS001':
      return new SeqConflictError(sessionId, options.expectLastSeq!, Number(detail));
    case 'KP001': {
      const [event, parent] = detail.split(' ');
      return new StoreError(
        'invalid_parent',
        `event ${event}: parent ${parent} is not an entry of session ${sessionId}`,
      );
    }
    case UNIQUE_VIOLATION:
      if (constraintOf(e) === 'events_entries')
        return new StoreError('conflict', `an event of this append already exists in session ${sessionId}`, {
          cause: e,
        });
  }
  return e;
}

export const pgOperations: PgOps = {
  createSession: async ({ guarded }, s) => {
    try {
      const row = await guarded((q) =>
        q.one<SessionRow>(
          `INSERT INTO sessions (id, tenant, created_at, title, metadata, agent, origin_session_id, origin_entry_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
          [
            s.id,
            s.tenant ?? 'default',
            s.createdAt,
            s.title ?? null,
            JSON.stringify(s.metadata ?? {}),
            s.agent ?? null,
            s.origin?.sessionId ?? null,
            s.origin?.entryId ?? null,
          ],
        ),
      );
      return toSession(row!);
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError('conflict', `session ${s.id} already exists`, { cause: e });
      throw e;
    }
  },

  /** Inside a transaction the session is read FOR UPDATE, as a run is (see getRun): decisions made on it (is a run active?) hold until commit. */
  // An id with NUL cannot be stored (plain-text.ts), so nothing has one: not found, as on SQLite.
  getSession: async ({ sql, inTransaction }, id) => {
    if (hasNul(id)) return undefined;
    const row = await sql.one<SessionRow>(`SELECT * FROM sessions WHERE id = $1${inTransaction ? ' FOR UPDATE' : ''}`, [
      id,
    ]);
    return row ? toSession(row) : undefined;
  },

  // A tenant's sessions from the index of them (a cached plan of `$3 IS NULL OR tenant = $3` would
  // read every tenant's sessions in id order).
  listSessions: async ({ sql }, page) =>
    (page.tenant !== undefined
      ? await sql.rows<SessionRow>(
          'SELECT * FROM sessions WHERE tenant = $1 AND id > $2 AND (archived_at IS NULL OR $3) ORDER BY id LIMIT $4',
          [page.tenant, page.after ?? '', page.includeArchived === true, limitOf(page.limit)],
        )
      : await sql.rows<SessionRow>(
          'SELECT * FROM sessions WHERE id > $1 AND (archived_at IS NULL OR $2) ORDER BY id LIMIT $3',
          [page.after ?? '', page.includeArchived === true, limitOf(page.limit)],
        )
    ).map(toSession),

  updateSession: async ({ sql }, id, patch) => {
    const n = await sql.run(
      `UPDATE sessions SET title = CASE WHEN $2 THEN $3 ELSE title END, metadata = CASE WHEN $4 THEN $5 ELSE metadata END,
                           archived_at = CASE WHEN $6 THEN $7::bigint ELSE archived_at END
       WHERE id = $1`,
      [
        id,
        patch.title !== undefined,
        patch.title ?? null,
        patch.metadata !== undefined,
        patch.metadata !== undefined ? JSON.stringify(patch.metadata) : null,
        patch.archivedAt !== undefined,
        patch.archivedAt ?? null,
      ],
    );
    if (n === 0) throw new NotFoundError('session', id);
  },

  /**
   * One call of keel_append (schema v2): the session row is locked (FOR UPDATE) for the rest of the
   * transaction, so appends to one session take turns, each allocating the seqs after the last
   * committed one; a fence is read FOR SHARE, so a claim that would move the token waits for this
   * transaction, or this one sees its token.
   */
  append: async ({ guarded }, sessionId, drafts, options = {}) => {
    const { expectLastSeq, fence } = options;
    const seen = new Set<string>();
    const cols: unknown[][] = Array.from({ length: 14 }, () => []);
    const json: string[] = [];
    for (const d of drafts) {
      if (d.entry && seen.has(d.id)) throw new StoreError('conflict', `event ${d.id} already exists`);
      if (d.entry) seen.add(d.id);
      const data = JSON.stringify(d.data);
      json.push(data);
      const values = [
        d.id,
        d.type,
        d.v,
        d.time,
        d.runId ?? null,
        d.turn ?? null,
        d.step ?? null,
        d.entry,
        d.parentId ?? null,
        d.parentId !== undefined,
        d.leaf ?? null,
        d.leaf !== undefined,
        d.ignorable ?? false,
        data,
      ];
      for (let i = 0; i < values.length; i++) cols[i]!.push(values[i]);
    }
    let rows: Array<{ seq: number; parent_id: string | null }>;
    try {
      rows = await guarded((q) =>
        q.rows<{ seq: number; parent_id: string | null }>(
          `SELECT seq, parent_id FROM keel_append($1, $2, $3, $4, $5::text[], $6::text[], $7::int[], $8::bigint[], $9::text[], $10::int[], $11::int[],
                                                $12::boolean[], $13::text[], $14::boolean[], $15::text[], $16::boolean[], $17::boolean[], $18::text[], $19::text[])`,
          // Which blobs the session refers to, for erasure, in the append's own transaction.
          [
            sessionId,
            fence?.runId ?? null,
            fence?.token ?? null,
            expectLastSeq ?? null,
            ...cols,
            blobHashesIn(json.join(',')),
          ],
        ),
      );
    } catch (e) {
      throw appendRefusal(e, sessionId, options);
    }
    return drafts.map((d, i) => storedEvent(d, sessionId, rows[i]!.seq, rows[i]!.parent_id));
  },

  readEvents: async ({ sql }, sessionId, o = {}) => {
    let after = o.afterSeq ?? 0;
    if (o.runId !== undefined) {
      // A run's events all follow its first one.
      const first = (await sql.one<{ first_seq: number | null }>('SELECT first_seq FROM runs WHERE id = $1', [o.runId]))
        ?.first_seq;
      if (first !== undefined && first !== null) after = Math.max(after, first - 1);
    }
    const rows = await sql.rows<EventRow>(
      `SELECT * FROM events WHERE session_id = $1 AND seq > $2 AND ($3::bigint IS NULL OR seq <= $3) AND ($4::text IS NULL OR run_id = $4)
       ORDER BY seq LIMIT $5`,
      [sessionId, after, o.untilSeq ?? null, o.runId ?? null, limitOf(o.limit)],
    );
    return rows.map(toEvent);
  },

  getEntries: async ({ sql }, sessionId, given) => {
    const ids = given.filter((id) => !hasNul(id));
    if (ids.length === 0 || hasNul(sessionId)) return [];
    const rows = await sql.rows<EventRow>(
      'SELECT * FROM events WHERE session_id = $1 AND entry AND id = ANY($2::text[])',
      [sessionId, [...ids]],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const out: StoredEvent[] = [];
    for (const id of ids) {
      const r = byId.get(id);
      if (r) out.push(toEvent(r));
    }
    return out;
  },

  // Every step of the walk stays inside the session, even if a parent id points elsewhere.
  ancestors: async ({ sql }, sessionId, fromId, limit) => {
    if (hasNul(fromId) || hasNul(sessionId)) return [];
    const rows = await sql.rows<EventRow>(
      `WITH RECURSIVE path(id, parent_id, seq, depth) AS (
         SELECT id, parent_id, seq, 0 FROM events WHERE session_id = $1 AND id = $2 AND entry AND $3 > 0
         UNION ALL
         SELECT e.id, e.parent_id, e.seq, p.depth + 1 FROM path p JOIN events e ON e.session_id = $1 AND e.entry AND e.id = p.parent_id
         WHERE p.depth + 1 < $3
       )
       SELECT e.* FROM path JOIN events e ON e.session_id = $1 AND e.seq = path.seq ORDER BY path.depth`,
      [sessionId, fromId, Math.max(0, Math.floor(limit))],
    );
    return rows.map(toEvent);
  },

  eraseSession: ({ atomic }, sessionId, erasedAt) =>
    atomic(async (q) => {
      const row = await sessionRow(q, sessionId, true);
      if (row.erased_at !== null) return toSession(row);
      const live = await q.one<{ id: string }>(
        `SELECT id FROM runs WHERE session_id = $1 AND status NOT IN (${TERMINAL}) LIMIT 1`,
        [sessionId],
      );
      if (live) throw new RunBusyError(sessionId, live.id);
      const totals = erasedTotals(
        await q.rows<{ usage: string; cost: number }>('SELECT usage, cost FROM runs WHERE session_id = $1', [
          sessionId,
        ]),
      );
      await q.run('INSERT INTO erased_logs (session_id) VALUES ($1) ON CONFLICT DO NOTHING', [sessionId]);
      await q.run('DELETE FROM events WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM snapshots WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM run_checkpoints WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1)', [
        sessionId,
      ]);
      await q.run('DELETE FROM run_inputs WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM run_signals WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1)', [sessionId]);
      await q.run('DELETE FROM run_callbacks WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1)', [sessionId]);
      await q.run(
        'DELETE FROM schedule_fires WHERE session_id = $1 OR run_id IN (SELECT id FROM runs WHERE session_id = $1)',
        [sessionId],
      );
      // The schedules that target it take no message from now on: paused, saying why (they keep its id, as its tombstone does).
      await q.run(
        "UPDATE schedules SET paused_at = coalesce(paused_at, $2), paused_reason = $3, next_fire_at = NULL, updated_at = $2 WHERE (target::jsonb ->> 'sessionId') = $1",
        [sessionId, erasedAt, PAUSED_FOR_ERASED_SESSION],
      );
      // The model stays, for billing (usageTotals groups by it).
      await q.run(
        `UPDATE runs SET agent_spec = CASE WHEN ${specJson('agent_spec')} ? 'model' THEN jsonb_build_object('model', ${specJson('agent_spec')} -> 'model')::text ELSE '{}' END,
                         options = '{}', error = NULL, waiting = NULL, trigger_message_id = NULL, parent_tool_call_id = NULL WHERE session_id = $1`,
        [sessionId],
      );
      await q.run(
        'DELETE FROM blobs WHERE hash IN (SELECT hash FROM blob_refs WHERE session_id = $1) AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blobs.hash AND r.session_id <> $1)',
        [sessionId],
      );
      await q.run('DELETE FROM blob_refs WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM idempotency_keys WHERE strpos(body, $1) > 0', [sessionId]);
      // The session's webhook deliveries (their bodies describe its runs), their attempts first.
      await q.run(
        'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE session_id = $1)',
        [sessionId],
      );
      await q.run('DELETE FROM webhook_deliveries WHERE session_id = $1', [sessionId]);
      const tomb = await q.one<SessionRow>(
        "UPDATE sessions SET title = NULL, metadata = '{}', agent = NULL, leaf_id = NULL, origin_session_id = NULL, origin_entry_id = NULL, erased_at = $2, erased_totals = $3 WHERE id = $1 RETURNING *",
        [sessionId, erasedAt, JSON.stringify(totals)],
      );
      return toSession(tomb!);
    }),

  // One row per event: nothing to re-encode (the server compresses large values itself).
  sealEvents: async ({ sql }, sessionId) => {
    if (!(await sql.one('SELECT 1 FROM sessions WHERE id = $1', [sessionId])))
      throw new NotFoundError('session', sessionId);
  },

  putBlobs: async ({ sql }, blobs) => {
    if (blobs.length === 0) return;
    const now = Date.now();
    await sql.run(
      'INSERT INTO blobs (hash, data, size, created_at) SELECT h, d, s, $4 FROM unnest($1::text[], $2::text[], $3::int[]) AS b(h, d, s) ON CONFLICT (hash) DO NOTHING',
      [blobs.map((b) => b.hash), blobs.map((b) => b.data), blobs.map((b) => Buffer.byteLength(b.data)), now],
    );
  },

  getBlobs: async ({ sql }, hashes) => {
    const out = new Map<string, string>();
    if (hashes.length === 0) return out;
    for (const r of await sql.rows<{ hash: string; data: string }>(
      'SELECT hash, data FROM blobs WHERE hash = ANY($1::text[])',
      [[...hashes]],
    ))
      out.set(r.hash, r.data);
    return out;
  },

  putSnapshot: async ({ sql }, s) => {
    await sql.run(
      `INSERT INTO snapshots (session_id, projection, version, as_of_seq, leaf_id, state, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (session_id, projection, version) DO UPDATE SET
         as_of_seq = excluded.as_of_seq, leaf_id = excluded.leaf_id, state = excluded.state, created_at = excluded.created_at
       WHERE excluded.as_of_seq >= snapshots.as_of_seq`,
      [s.sessionId, s.projection, s.version, s.asOfSeq, s.leafId, JSON.stringify(s.state), Date.now()],
    );
  },

  getSnapshot: async ({ sql }, sessionId, projection, version) => {
    const row = await sql.one<SnapshotRow>(
      'SELECT as_of_seq, leaf_id, state FROM snapshots WHERE session_id = $1 AND projection = $2 AND version = $3',
      [sessionId, projection, version],
    );
    return row
      ? {
          sessionId,
          projection,
          version,
          asOfSeq: row.as_of_seq,
          leafId: row.leaf_id,
          state: JSON.parse(row.state) as unknown,
        }
      : undefined;
  },

  createRun: async ({ sql, guarded }, r) => {
    try {
      const row = await guarded((q) =>
        q.one<RunRow>(
          `INSERT INTO runs (id, session_id, parent_run_id, parent_tool_call_id, agent_name, agent_version, agent_spec, status,
                             trigger_message_id, turn, created_at, deadline_at, options, usage, queued_behind, first_seq, tenant)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $9, $10, $11, $12, $13, $14,
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
    if (q.statuses) where.push(`status IN (${statusList(q.statuses)})`);
    if (q.after !== undefined) where.push(`id > $${args.push(q.after)}`);
    const text = `SELECT * FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT $${args.push(limitOf(q.limit))}`;
    // A tenant's runs: planned for this tenant (its index of waiting runs, or the runs in id order).
    return (
      q.tenant !== undefined ? await sql.rowsPlannedForValues<RunRow>(text, args) : await sql.rows<RunRow>(text, args)
    ).map(toRun);
  },

  dueRuns: async ({ sql }, now, page) => {
    const text = dueRunsSql(page.after !== undefined, (n) => `$${n}`);
    const args = page.after ? [now, page.after.dueAt, page.after.id, limitOf(page.limit)] : [now, limitOf(page.limit)];
    return (await sql.rows<RunRow & { due_at: string | number }>(text, args)).map((r) => ({
      run: toRun(r),
      dueAt: Number(r.due_at),
    }));
  },

  activeRun: async ({ sql }, sessionId) => {
    const row = await sql.one<RunRow>(
      `SELECT * FROM runs WHERE session_id = $1 AND status NOT IN (${TERMINAL}) AND NOT queued_behind`,
      [sessionId],
    );
    return row ? toRun(row) : undefined;
  },

  countRunsByStatus: async ({ sql }) => {
    const counts = Object.fromEntries(RUN_STATUSES.map((s) => [s, 0])) as Record<RunStatus, number>;
    for (const r of await sql.rows<{ status: RunStatus; n: number }>(
      'SELECT status, sum(n)::bigint AS n FROM run_status_counts GROUP BY status',
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

  putCheckpoint: async ({ sql }, c) => {
    await sql.run(
      `INSERT INTO run_checkpoints (run_id, step, seq, state, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, seq = excluded.seq, state = excluded.state, created_at = excluded.created_at`,
      [c.runId, c.step, c.seq, JSON.stringify(c.state), Date.now()],
    );
  },

  getCheckpoint: async ({ sql }, runId) => {
    const row = await sql.one<CheckpointRow>('SELECT step, seq, state FROM run_checkpoints WHERE run_id = $1', [runId]);
    return row ? { runId, step: row.step, seq: row.seq, state: JSON.parse(row.state) as unknown } : undefined;
  },

  addInput: async ({ sql }, i) => {
    await sql.run(
      'INSERT INTO run_inputs (id, session_id, kind, run_id, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [i.id, i.sessionId, i.kind, i.runId, JSON.stringify(i.payload), i.createdAt],
    );
  },

  /** Taken once: the rows are locked, then deleted, in one statement; a concurrent take waits and finds them gone. */
  takeInputs: async ({ sql }, sessionId, kind, runId, limit = 1000) => {
    const rows = await sql.rows<InputRow>(
      `DELETE FROM run_inputs WHERE id IN (
         SELECT id FROM run_inputs WHERE session_id = $1 AND kind = $2 AND (NOT $3 OR run_id IS NOT DISTINCT FROM $4)
         ORDER BY created_at, id LIMIT $5 FOR UPDATE)
       RETURNING *`,
      [sessionId, kind, runId !== undefined, runId ?? null, limitOf(limit)],
    );
    return rows.sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map(toInput);
  },

  listInputs: async ({ sql }, sessionId, kind, runId, limit = 1000) =>
    (
      await sql.rows<InputRow>(
        'SELECT * FROM run_inputs WHERE session_id = $1 AND kind = $2 AND (NOT $3 OR run_id IS NOT DISTINCT FROM $4) ORDER BY created_at, id LIMIT $5',
        [sessionId, kind, runId !== undefined, runId ?? null, limitOf(limit)],
      )
    ).map(toInput),

  removeInput: async ({ sql }, id) => (await sql.run('DELETE FROM run_inputs WHERE id = $1', [id])) === 1,

  countInputs: async ({ sql }, sessionId, kind) =>
    (await sql.one<{ n: number }>('SELECT count(*)::bigint AS n FROM run_inputs WHERE session_id = $1 AND kind = $2', [
      sessionId,
      kind,
    ]))!.n,

  createApiKey: async ({ guarded }, k) => {
    try {
      await guarded((q) =>
        q.run(
          'INSERT INTO api_keys (id, tenant, name, hash, prefix, rate_per_minute, created_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
          [k.id, k.tenant, k.name, k.hash, k.prefix, k.ratePerMinute, k.createdAt, k.revokedAt],
        ),
      );
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError('conflict', `api key ${k.id} already exists`, { cause: e });
      throw e;
    }
  },

  findApiKey: async ({ sql }, hash) => {
    const row = await sql.one<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash]);
    return row ? toKey(row) : undefined;
  },

  listApiKeys: async ({ sql }, tenant) =>
    (
      await sql.rows<KeyRow>('SELECT * FROM api_keys WHERE ($1::text IS NULL OR tenant = $1) ORDER BY created_at, id', [
        tenant ?? null,
      ])
    ).map(toKey),

  revokeApiKey: async ({ sql }, id, at) =>
    (await sql.run('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2', [at, id])) === 1,

  getIdempotency: async ({ sql }, tenant, key) => {
    const r = await sql.one<IdempotencyRow>('SELECT * FROM idempotency_keys WHERE tenant = $1 AND key = $2', [
      tenant,
      key,
    ]);
    return r ? toIdempotency(r) : undefined;
  },

  putIdempotency: async ({ sql }, r) => {
    const row = await sql.one<IdempotencyRow>(
      `INSERT INTO idempotency_keys AS k (tenant, key, fingerprint, status, body, created_at) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (tenant, key) DO UPDATE SET status = excluded.status, body = excluded.body
       WHERE k.status = 0 AND excluded.status <> 0 AND k.fingerprint = excluded.fingerprint
       RETURNING *`,
      [r.tenant, r.key, r.fingerprint, r.status, r.body, r.createdAt],
    );
    // Another request's record stood and was kept: it is the answer.
    return toIdempotency(
      row ??
        (await sql.one<IdempotencyRow>('SELECT * FROM idempotency_keys WHERE tenant = $1 AND key = $2', [
          r.tenant,
          r.key,
        ]))!,
    );
  },

  pruneIdempotency: async ({ sql }, before) => sql.run('DELETE FROM idempotency_keys WHERE created_at < $1', [before]),
  ...pgWebhookOperations,
  ...pgWaitOperations,
  ...pgLimitOperations,
  ...scheduleOperations,
};
