/**
 * Runs: the run record, guarded updates, checkpoints and usage totals. The status is a column whose
 * values are `RunStatus`; what they mean (terminal, waiting, transitions, what may be claimed) is the
 * runs layer's vocabulary (src/runs/lifecycle/run-status.ts): an operation that filters on a set of
 * statuses receives the list, or uses the schema's own (its CHECK constraint and partial indexes).
 */
import type { JsonObject } from './json.ts';

/**
 * The values of a run's status column, the one place they are spelled (the schema's CHECK
 * constraint lists the same). What they mean is the runs layer's (src/runs/lifecycle/run-status.ts).
 */
export const RUN_STATUS_VALUES = [
  'queued',
  'running',
  'waiting_approval',
  'waiting_for_user',
  'paused',
  'completed',
  'failed',
  'cancelled',
  'timed_out',
  /** Waiting for a time (a durable sleep, ADR-0015): no worker holds it. */
  'sleeping',
  /** Waiting for a named signal from outside (ADR-0015): no worker holds it. */
  'waiting_for_signal',
  /** Waiting for its tenant's quota to free (ADR-0043): no worker holds it; it wakes when the quota frees. */
  'waiting_for_quota',
] as const;

export type RunStatus = (typeof RUN_STATUS_VALUES)[number];

export interface RunRecord {
  id: string;
  sessionId: string;
  parentRunId: string | null;
  /** For a subagent's run: the parent's tool call that started it. */
  parentToolCallId: string | null;
  /** For a rerun (issue 40): the run it re-runs; its lineage details are in `options.rerun`. */
  rerunOf: string | null;
  agent: { name: string; version: string };
  /** What the run executes with: prompt, tools, model, settings, limits (recorded at creation). */
  agentSpec: JsonObject;
  status: RunStatus;
  /**
   * Queued behind the session's current run (an enqueued message): not claimable, and not the
   * session's active run, until that run ends and this one becomes the current one.
   */
  queuedBehind: boolean;
  triggerMessageId: string | null;
  /** The session turn this run is (null while queued behind: its turn is numbered when it comes up). */
  turn: number | null;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
  /**
   * The execution attempt: 1 when a worker first starts it, and one more each time it is recovered
   * after an interruption (a lost lease, a storage failure). Resuming after a wait or a pause is
   * the same attempt.
   */
  attempt: number;
  usage: JsonObject;
  cost: number;
  error: JsonObject | null;
  /** What a waiting run waits for (approval requests or questions), with its expiry. */
  waiting: JsonObject | null;
  lease: { owner: string; expiresAt: number } | null;
  /** Increases at every claim; every write of a worker is checked against it. */
  fencingToken: number;
  cancelRequested: boolean;
  pauseRequested: boolean;
  deadlineAt: number | null;
  options: JsonObject;
}

export interface NewRun {
  id: string;
  sessionId: string;
  parentRunId?: string | null;
  parentToolCallId?: string | null;
  rerunOf?: string | null;
  agent: { name: string; version: string };
  agentSpec: JsonObject;
  triggerMessageId?: string | null;
  turn?: number | null;
  createdAt: number;
  deadlineAt?: number | null;
  options?: JsonObject;
  usage?: JsonObject;
  /** Created behind the session's current run (see RunRecord.queuedBehind). */
  queuedBehind?: boolean;
}

export type RunPatch = Partial<
  Pick<
    RunRecord,
    | 'status'
    | 'startedAt'
    | 'endedAt'
    | 'usage'
    | 'cost'
    | 'error'
    | 'waiting'
    | 'cancelRequested'
    | 'pauseRequested'
    | 'deadlineAt'
    | 'turn'
    | 'attempt'
    | 'agentSpec'
  >
> & {
  /** Only `false`: the run comes up as the session's current run. */
  queuedBehind?: false;
  lease?: null;
  /** Bumps the fencing token: whoever held the run can no longer write for it. */
  fence?: true;
};

/** Only update when the run is still as the caller last saw it. */
export interface RunGuard {
  statuses?: readonly RunStatus[];
  fencingToken?: number;
}

export interface RunQuery {
  sessionId?: string;
  /**
   * Only the runs of this tenant's sessions, filtered by the query itself (never a window of every
   * tenant's runs filtered afterwards). Cheap with `statuses` = the runs layer's WAITING_FOR_PEOPLE (an index of
   * those runs by tenant); otherwise it reads the runs in id order.
   */
  tenant?: string;
  parentRunId?: string;
  /** Only the reruns of this run (their `rerunOf`). */
  rerunOf?: string;
  /** Only runs of this agent (by name). */
  agentName?: string;
  /** Only runs of this agent version. */
  agentVersion?: string;
  /** Only runs created at or after this time (ms since the epoch). */
  createdFrom?: number;
  /** Only runs created before this time (ms since the epoch). */
  createdTo?: number;
  statuses?: readonly RunStatus[];
  /** Runs created after this run id (cursor). */
  after?: string;
  limit: number;
}

export interface Checkpoint {
  runId: string;
  /** The step the state was taken after (0: before the first step). */
  step: number;
  /** The session seq of the event committed with it. */
  seq: number;
  state: unknown;
}

/** What usage is grouped by (see `RunOps.usageTotals`): `day` and `hour` are time buckets (UTC), one at most. */
export type UsageDimension = 'tenant' | 'agent' | 'model' | 'day' | 'hour';

export const USAGE_DIMENSIONS: readonly UsageDimension[] = ['tenant', 'agent', 'model', 'day', 'hour'];

/** Which runs' usage to add up, and how to group it. */
export interface UsageQuery {
  /** Runs that ended at or after this time (ms since the epoch)… */
  from: number;
  /** …and before this one. */
  to: number;
  /** The grouping, in this order; none: one row for everything. */
  groupBy: readonly UsageDimension[];
  /** Only this tenant's runs (the tenant of the run's session). */
  tenant?: string;
  /** Only runs of this agent (by name). */
  agent?: string;
  /** Only runs of this model, `provider:modelId` as recorded in the run's agent spec. */
  model?: string;
}

/**
 * One group of `runs.usageTotals`: the keys it is grouped by (only those), how many runs ended in it, and
 * their own usage and cost (each run's recorded total minus its ended children's: see `runs.usageTotals`).
 */
export interface UsageTotals {
  tenant?: string;
  agent?: string;
  /** `provider:modelId`; null when the run's agent spec names no model. */
  model?: string | null;
  /** The start of the day or hour (UTC, ms since the epoch). */
  bucket?: number;
  runs: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  reasoningTokens: number;
  cost: number;
}

/** The runs namespace of the port (`store.runs`). Claiming a run is the queue role (claims.ts). */
export interface RunOps {
  /**
   * Refuses (RunBusyError) while the session has another active run: one that is not terminal and
   * not queued behind. Any number of runs may be queued behind it.
   */
  create(r: NewRun): Promise<RunRecord>;
  get(id: string): Promise<RunRecord | undefined>;
  list(q: RunQuery): Promise<RunRecord[]>;
  /** The session's active run: not terminal, not queued behind (at most one, by the store's guarantee). */
  active(sessionId: string): Promise<RunRecord | undefined>;
  /** How many runs there are in each status (statuses without runs are 0), without reading the runs. */
  countByStatus(): Promise<Record<RunStatus, number>>;
  /**
   * Tokens and cost of the runs that ended in [from, to), grouped, in one aggregate query. Each run
   * counts its own usage once: a run's recorded usage includes its ended children's (subagents roll
   * up into their parent, see runs/lifecycle/finish.ts), so a run's own is its recorded usage minus its ended
   * children's recorded usage. A run is bucketed by its end; runs not ended are left out. Runs of
   * erased sessions count (their rows keep usage, cost, agent and model). The order of the rows is
   * unspecified.
   */
  usageTotals(q: UsageQuery): Promise<UsageTotals[]>;
  /** A compare-and-set: refuses (RunConflictError) when the guard no longer holds. */
  update(id: string, patch: RunPatch, guard?: RunGuard): Promise<RunRecord>;

  putCheckpoint(c: Checkpoint): Promise<void>;
  getCheckpoint(runId: string): Promise<Checkpoint | undefined>;
}
