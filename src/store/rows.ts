/**
 * The rows as the SQL backends return them (snake_case columns, JSON as text, flags as 0/1 in
 * SQLite and booleans in PostgreSQL) and their mapping to the port's records.
 */
import {
  type ApiKeyRecord,
  type Checkpoint,
  type IdempotencyRecord,
  type JsonObject,
  type RunInput,
  type RunRecord,
  type RunStatus,
  type SessionRecord,
  type TenantQuotas,
  type UsageDimension,
  type UsageTotals,
} from './port/index.ts';
import { StoreError, USAGE_DIMENSIONS } from './port/index.ts';

export type SessionRow = {
  id: string;
  tenant: string;
  created_at: number;
  title: string | null;
  metadata: string;
  agent: string | null;
  last_seq: number;
  last_turn: number;
  leaf_id: string | null;
  origin_session_id: string | null;
  origin_entry_id: string | null;
  archived_at: number | null;
  erased_at: number | null;
  erased_totals: string | null;
  /** When its log moved to an archive store (retention), or null; absent in rows read without it. */
  in_archive_at?: number | null;
};

/** A row of the log: consecutive events of a session from `first_seq` on, open (JSON text) or sealed (see event-batch-codec.ts). */
export type BatchRow = { first_seq: number; codec: number; data: string | Buffer };

export type RunRow = {
  id: string;
  session_id: string;
  parent_run_id: string | null;
  parent_tool_call_id: string | null;
  rerun_of: string | null;
  agent_name: string;
  agent_version: string;
  agent_spec: string;
  status: RunStatus;
  queued_behind: Flag;
  trigger_message_id: string | null;
  turn: number | null;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  attempt: number;
  usage: string;
  cost: number;
  error: string | null;
  waiting: string | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  fencing_token: number;
  cancel_requested: Flag;
  pause_requested: Flag;
  deadline_at: number | null;
  options: string;
};

export type KeyRow = {
  id: string;
  tenant: string;
  name: string | null;
  hash: string;
  prefix: string;
  rate_per_minute: number | null;
  created_at: number;
  revoked_at: number | null;
  scope: string;
  quotas: string | null;
};

export type IdempotencyRow = {
  tenant: string;
  key: string;
  fingerprint: string;
  status: number;
  body: string;
  created_at: number;
};

export type InputRow = {
  id: string;
  session_id: string;
  kind: 'steer' | 'message';
  run_id: string | null;
  payload: string;
  created_at: number;
};

export type CheckpointRow = { step: number; seq: number; state: string };

/** A run's stored checkpoint, from its row. */
export const toCheckpoint = (runId: string, r: CheckpointRow): Checkpoint => ({
  runId,
  step: r.step,
  seq: r.seq,
  state: JSON.parse(r.state) as unknown,
});

export type SnapshotRow = { as_of_seq: number; leaf_id: string | null; state: string };

/** A flag column: SQLite's 0/1 or PostgreSQL's boolean. */
type Flag = number | boolean;
const flag = (v: Flag): boolean => v === true || v === 1;

const json = <T>(s: string | null): T | null => (s === null ? null : (JSON.parse(s) as T));

export function toRun(r: RunRow): RunRecord {
  return {
    id: r.id,
    sessionId: r.session_id,
    parentRunId: r.parent_run_id,
    parentToolCallId: r.parent_tool_call_id,
    rerunOf: r.rerun_of,
    agent: { name: r.agent_name, version: r.agent_version },
    agentSpec: JSON.parse(r.agent_spec) as JsonObject,
    status: r.status,
    queuedBehind: flag(r.queued_behind),
    triggerMessageId: r.trigger_message_id,
    turn: r.turn,
    createdAt: r.created_at,
    startedAt: r.started_at,
    endedAt: r.ended_at,
    attempt: r.attempt,
    usage: JSON.parse(r.usage) as JsonObject,
    cost: r.cost,
    error: json<JsonObject>(r.error),
    waiting: json<JsonObject>(r.waiting),
    lease:
      r.lease_owner !== null && r.lease_expires_at !== null
        ? { owner: r.lease_owner, expiresAt: r.lease_expires_at }
        : null,
    fencingToken: r.fencing_token,
    cancelRequested: flag(r.cancel_requested),
    pauseRequested: flag(r.pause_requested),
    deadlineAt: r.deadline_at,
    options: JSON.parse(r.options) as JsonObject,
  };
}

/**
 * The statuses that end a run as an SQL list, for `status NOT IN (...)`: the runs layer's terminal
 * statuses (src/runs/lifecycle/run-status.ts) as the schema's partial indexes leave them out (the
 * migrations spell them so), written the same way so that a query's term matches its index.
 */
export const TERMINAL_SQL = `'completed', 'failed', 'cancelled', 'timed_out'`;

/** Columns a RunPatch may set, and how each value is stored. */
export const RUN_COLUMNS: Record<string, [string, (v: unknown) => unknown]> = {
  status: ['status', (v) => v],
  startedAt: ['started_at', (v) => v],
  endedAt: ['ended_at', (v) => v],
  usage: ['usage', (v) => JSON.stringify(v)],
  cost: ['cost', (v) => v],
  error: ['error', (v) => (v === null ? null : JSON.stringify(v))],
  waiting: ['waiting', (v) => (v === null ? null : JSON.stringify(v))],
  cancelRequested: ['cancel_requested', (v) => (v ? 1 : 0)],
  pauseRequested: ['pause_requested', (v) => (v ? 1 : 0)],
  deadlineAt: ['deadline_at', (v) => v],
  turn: ['turn', (v) => v],
  attempt: ['attempt', (v) => v],
  queuedBehind: ['queued_behind', (v) => (v ? 1 : 0)],
  agentSpec: ['agent_spec', (v) => JSON.stringify(v)],
};

export const toKey = (r: KeyRow): ApiKeyRecord => ({
  id: r.id,
  tenant: r.tenant,
  name: r.name,
  hash: r.hash,
  prefix: r.prefix,
  ratePerMinute: r.rate_per_minute,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
  scope: r.scope === 'admin' ? 'admin' : 'tenant',
  quotas: r.quotas === null ? null : (JSON.parse(r.quotas) as TenantQuotas),
});

export const toIdempotency = (r: IdempotencyRow): IdempotencyRecord => ({
  tenant: r.tenant,
  key: r.key,
  fingerprint: r.fingerprint,
  status: r.status,
  body: r.body,
  createdAt: r.created_at,
});

export const toInput = (r: InputRow): RunInput => ({
  id: r.id,
  sessionId: r.session_id,
  kind: r.kind,
  runId: r.run_id,
  payload: JSON.parse(r.payload) as unknown,
  createdAt: r.created_at,
});

export function toSession(r: SessionRow): SessionRecord {
  return {
    id: r.id,
    tenant: r.tenant,
    createdAt: r.created_at,
    title: r.title,
    metadata: JSON.parse(r.metadata) as JsonObject,
    agent: r.agent,
    lastSeq: r.last_seq,
    lastTurn: r.last_turn,
    leafId: r.leaf_id,
    origin:
      r.origin_session_id && r.origin_entry_id ? { sessionId: r.origin_session_id, entryId: r.origin_entry_id } : null,
    archivedAt: r.archived_at,
    erasedAt: r.erased_at,
    inArchiveAt: r.in_archive_at ?? null,
    erasedTotals: r.erased_totals === null ? null : (JSON.parse(r.erased_totals) as SessionRecord['erasedTotals']),
  };
}

/**
 * usageTotals, the part both SQL backends share: over a CTE `own` with one row per ended run
 * (tenant, agent, model, ended_at and its own input_tokens, output_tokens, cached_tokens,
 * reasoning_tokens, cost), the groups as SQL. A grouping is checked here (it is written into the SQL).
 */
export function usageGroupSql(groupBy: readonly UsageDimension[]): { dimensions: UsageDimension[]; sql: string } {
  const dimensions = [...new Set(groupBy)];
  const bad = dimensions.find((d) => !USAGE_DIMENSIONS.includes(d));
  if (bad !== undefined)
    throw new StoreError(
      'invalid_query',
      `usage cannot be grouped by ${JSON.stringify(bad)} (only ${USAGE_DIMENSIONS.join(', ')})`,
    );
  if (dimensions.includes('day') && dimensions.includes('hour'))
    throw new StoreError('invalid_query', 'usage is grouped by day or by hour, not both');
  const keys = dimensions.map((d) =>
    d === 'day' || d === 'hour' ? `ended_at - ended_at % ${d === 'day' ? 86_400_000 : 3_600_000}` : d,
  );
  const columns = dimensions.map((d, i) => `${keys[i]} AS ${d === 'day' || d === 'hour' ? 'bucket' : d}`);
  const sql = `SELECT ${[...columns, 'count(*) AS runs', 'sum(input_tokens) AS input_tokens', 'sum(output_tokens) AS output_tokens', 'sum(cached_tokens) AS cached_tokens', 'sum(reasoning_tokens) AS reasoning_tokens', 'sum(cost) AS cost'].join(', ')}
     FROM own${keys.length > 0 ? ` GROUP BY ${keys.join(', ')}` : ''}`;
  return { dimensions, sql };
}

export type UsageRow = {
  tenant?: string;
  agent?: string;
  model?: string | null;
  bucket?: number | string;
  runs: number | string;
  input_tokens: number | string | null;
  output_tokens: number | string | null;
  cached_tokens: number | string | null;
  reasoning_tokens: number | string | null;
  cost: number | string | null;
};

/** A group of usageTotals (PostgreSQL answers sums of numerics as strings; an empty table's sums are null). */
export function toUsageTotals(r: UsageRow, dimensions: readonly UsageDimension[]): UsageTotals {
  const n = (v: number | string | null | undefined): number => (v === null || v === undefined ? 0 : Number(v));
  const out: UsageTotals = {
    runs: n(r.runs),
    inputTokens: n(r.input_tokens),
    outputTokens: n(r.output_tokens),
    cachedInputTokens: n(r.cached_tokens),
    reasoningTokens: n(r.reasoning_tokens),
    cost: n(r.cost),
  };
  for (const d of dimensions) {
    if (d === 'day' || d === 'hour') out.bucket = n(r.bucket);
    else if (d === 'model') out.model = r.model ?? null;
    else out[d] = r[d]!;
  }
  return out;
}
