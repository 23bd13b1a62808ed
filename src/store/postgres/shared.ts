/** What the PostgreSQL operations of several concepts share: event rows, run SQL fragments, session reads, refusals. */
import {
  FencedError,
  NotFoundError,
  SeqConflictError,
  StoreError,
  RUN_STATUS_VALUES,
  type AppendOptions,
  type EventDraft,
  type RunStatus,
  type StoredEvent,
} from '../port/index.ts';
import { TERMINAL_SQL, type SessionRow } from '../rows.ts';
import { constraintOf, sqlState, UNIQUE_VIOLATION, type Sql } from './sql.ts';

export type EventRow = {
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

/**
 * Drafts as keel_append's event arrays (ids, types, versions, times, runs, turns, steps, entry
 * flags, parents and whether given, leaves and whether given, ignorable flags, data), pushed onto
 * `cols` (14 arrays), with each draft's data as JSON (`json`, already made).
 */
export function pushDraftColumns(cols: unknown[][], drafts: readonly EventDraft[], json: readonly string[]): void {
  drafts.forEach((d, i) => {
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
      json[i],
    ];
    for (let c = 0; c < values.length; c++) cols[c]!.push(values[c]);
  });
}

export function toEvent(r: EventRow): StoredEvent {
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

export const TERMINAL = TERMINAL_SQL;

/** A run's model as `provider:modelId` from its agent spec (null when it names none). */
/**
 * An agent spec as JSON the server can read: its text may hold the escape \u0000 (a prompt's NUL,
 * kept as JSON says it), which PostgreSQL's JSON functions refuse; read as \ufffd instead (the
 * model's fields, all that is read, hold none). The swap keeps the text valid JSON wherever it is.
 */
export const specJson = (column: string) => `replace(${column}, '\\u0000', '\\ufffd')::jsonb`;
export const MODEL_SQL = `(${specJson('r.agent_spec')} #>> '{model,provider}') || ':' || (${specJson('r.agent_spec')} #>> '{model,modelId}')`;
export const tokens = (usage: string, field: string) => `coalesce((${usage}::jsonb ->> '${field}')::numeric, 0)`;

/**
 * usageTotals' runs (see StoreOps.usageTotals): one row per run that ended in [$1, $2), with its
 * tenant, agent, model, end and its own usage: its recorded usage minus the sum of its ended
 * children's (whose recorded usage its own row includes), read through the children index.
 * Followed by the grouping (rows.ts `usageGroupSql`).
 */
export const USAGE_OWN_SQL = `WITH own AS (
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
export const statusList = (xs: readonly RunStatus[]): string =>
  xs
    .filter((x) => (RUN_STATUS_VALUES as readonly string[]).includes(x))
    .map((x) => `'${x}'`)
    .join(', ') || 'NULL';

export const limitOf = (limit: number | undefined): number | null =>
  limit === undefined || !Number.isFinite(limit) || limit < 0 ? null : Math.floor(limit);

export const isActiveRunConflict = (e: unknown): boolean =>
  sqlState(e) === UNIQUE_VIOLATION && constraintOf(e) === 'runs_one_active';

export async function activeRunId(sql: Sql, sessionId: string): Promise<string> {
  const row = await sql.one<{ id: string }>(
    `SELECT id FROM runs WHERE session_id = $1 AND status NOT IN (${TERMINAL}) AND NOT queued_behind`,
    [sessionId],
  );
  return row?.id ?? 'unknown';
}

export async function sessionRow(sql: Sql, id: string, lock = false): Promise<SessionRow> {
  const row = await sql.one<SessionRow>(`SELECT * FROM sessions WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [id]);
  if (!row) throw new NotFoundError('session', id);
  return row;
}

/** keel_append's refusals (its own SQLSTATEs, see the migrations) as the port's errors. */
export function appendRefusal(e: unknown, sessionId: string, options: AppendOptions): unknown {
  const refusal = mappedRefusal(e, sessionId, options);
  // The server's error stays its cause: in a transaction, the statements sent after it are failed
  // with it (store.ts), as they are after any refusal by the server.
  if (refusal !== e && refusal instanceof Error && refusal.cause === undefined)
    Object.defineProperty(refusal, 'cause', { value: e, configurable: true, writable: true });
  return refusal;
}

function mappedRefusal(e: unknown, sessionId: string, options: AppendOptions): unknown {
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
