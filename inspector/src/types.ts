/** The shapes the public API answers with (see /openapi.json), as far as the inspector reads them. */
export type RunStatus =
  | 'queued'
  | 'running'
  | 'waiting_approval'
  | 'waiting_for_user'
  | 'sleeping'
  | 'waiting_for_signal'
  | 'paused'
  | 'completed'
  | 'failed'
  | 'cancelled'
  | 'timed_out';

export interface Session {
  id: string;
  title: string | null;
  metadata: Record<string, unknown>;
  agent: string | null;
  created_at: string;
  last_seq: number;
  leaf_id: string | null;
  origin: { session_id: string; entry_id: string } | null;
  archived_at: string | null;
}

export interface SessionSummary {
  session: Session;
  runs: number;
  cost: number;
  usage: { input_tokens: number; output_tokens: number };
  latest_run: { id: string; status: RunStatus; created_at: string } | null;
}

export interface WaitingRequest {
  approval_id: string;
  tool_call_id: string;
  tool: string;
  arguments: unknown;
  kind: 'approval' | 'input';
  decided: boolean;
}

/** A tool as a run's agent spec records it; an MCP server's tool names its server (`mcp`). */
export interface SpecTool {
  name: string;
  description?: string;
  approval: string;
  mcp?: { server: string; remoteName: string };
}

/** What a run executes with (recorded when it was created; its MCP tools added at its first start). */
export interface AgentSpec {
  tools?: SpecTool[];
  /** Only for an agent with MCP servers, once the run started: the servers it got tools from, and those it skipped. */
  mcp?: {
    servers: Array<{
      name: string;
      transport: 'stdio' | 'http';
      serverInfo?: { name: string; version: string };
      dropped?: Array<{ tool: string; reason: string }>;
    }>;
    skipped: Array<{ server: string; reason: string }>;
  };
}

export interface Run {
  id: string;
  session_id: string;
  parent_run_id: string | null;
  child_run_ids: string[];
  /** For a rerun: the run it re-runs (its reruns: GET /v1/runs?rerun_of=). */
  rerun_of: string | null;
  rerun: RerunLineage | null;
  agent: { name: string; version: string };
  agent_spec: AgentSpec;
  status: RunStatus;
  turn: number | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  attempt: number;
  usage: Record<string, number>;
  cost: number;
  error: Record<string, unknown> | null;
  waiting: { kind: 'approval' | 'input'; requests: WaitingRequest[]; expires_at: string | null } | null;
  lease: { owner: string; expires_at: string } | null;
  cancel_requested: boolean;
  pause_requested: boolean;
}

/** Where a rerun came from and how it differs (docs/adr/0037-reruns-from-the-log.md). */
export interface RerunLineage {
  of: { session_id: string; run_id: string; step: number };
  agent: { name: string; version: string };
  overrides: Record<string, unknown> | null;
  /** The tool policies: `default` (reuse or execute) and `tools` by name. */
  tools: { default?: 'reuse' | 'execute'; tools?: Record<string, { mode: string }> };
  message_replaced: boolean;
}

export interface SessionEvent {
  id: string;
  seq: number;
  type: string;
  time: string;
  run_id?: string;
  turn?: number;
  step?: number;
  entry: boolean;
  parent_id?: string;
  data: unknown;
}

export interface Delta {
  type: 'text/delta' | 'reasoning/delta' | 'tool-input/delta';
  message_id: string;
  delta: string;
  tool_name?: string;
}

export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  cachedInputTokens?: number;
  reasoningTokens?: number;
}

/** One step of a run, from GET /v1/runs/{id}/steps. */
export interface Step {
  step: number;
  startedAt: number;
  endedAt?: number;
  endReason?: string;
  usage?: Usage;
  requests: Array<{
    seq: number;
    time: number;
    provider: string;
    modelId: string;
    attempt: number;
    messageId: string;
    promptHash: string;
    context: unknown;
    settings: unknown;
    system: string | null;
    tools: unknown;
  }>;
  retries: Array<{ seq: number; attempt: number; delayMs: number; error: { kind: string; message: string } }>;
  errors: Array<{ seq: number; attempt: number; error: { kind: string; message: string } }>;
  assistant?: {
    messageId: string;
    text: string;
    finishReason: string;
    usage: Usage;
    cost: number;
    interrupted: boolean;
    timing: { startedAt: number; firstChunkMs?: number; durationMs: number };
  };
  tools: Array<{
    toolCallId: string;
    toolName: string;
    input: unknown;
    approval?: 'pending' | 'approved' | 'denied';
    output?: { type: string; value?: unknown; reason?: string };
    durationMs?: number;
    outcomeUnknown?: { resolution: string; startedAt?: number; reason?: string };
  }>;
}

export interface TranscriptItem {
  kind: string;
  entryId?: string;
  text?: string;
  reasoning?: string | null;
  tools?: Array<{ toolCallId: string; toolName: string; status: string; error?: string }>;
  [k: string]: unknown;
}

/** A value of each run in a comparison (null on a side that has none). */
export interface Compared<T> {
  a: T | null;
  b: T | null;
  equal: boolean;
}

/** A text of each run and the edit from a to b: `delete` only in a, `insert` only in b. */
export interface TextDiff {
  a: string | null;
  b: string | null;
  equal: boolean;
  parts: Array<{ op: 'equal' | 'delete' | 'insert'; text: string }>;
}

export interface ComparedTokens {
  input: Compared<number>;
  output: Compared<number>;
}

/** Content named by hash (system prompt, tool schemas): the line diff only when the hashes differ. */
export interface ComparedContent {
  hash: Compared<string>;
  diff: TextDiff | null;
}

export interface ToolCallSide {
  toolCallId: string;
  name: string;
  arguments: unknown;
  /** The tool output ({type, value} or an error); null without a result. */
  result: { type: string; value?: unknown; reason?: string } | null;
  durationMs: number | null;
  /** The tool ran, or a rerun served the source run's recorded result, or a mock. */
  source: 'executed' | 'reused' | 'mocked';
}

export interface ComparedStep {
  step: number;
  presentIn: 'both' | 'a' | 'b';
  request: {
    provider: Compared<string>;
    modelId: Compared<string>;
    settings: Compared<Record<string, unknown>>;
    system: ComparedContent;
    tools: ComparedContent & { names: Compared<string[]> };
    fingerprint: Compared<string>;
  } | null;
  text: TextDiff;
  toolCalls: Array<{
    index: number;
    presentIn: 'both' | 'a' | 'b';
    a: ToolCallSide | null;
    b: ToolCallSide | null;
    name: boolean;
    arguments: boolean;
    result: boolean;
    equal: boolean;
  }>;
  endReason: Compared<string>;
  tokens: ComparedTokens;
  cost: Compared<number>;
  latencyMs: Compared<number>;
}

export interface ComparedRunSummary {
  id: string;
  sessionId: string;
  turn: number | null;
  agent: { name: string; version: string };
  status: RunStatus;
  steps: number;
}

/** GET /v1/runs/{a}/compare/{b}: two runs aligned by step number. */
export interface RunComparison {
  a: ComparedRunSummary;
  b: ComparedRunSummary;
  status: Compared<RunStatus>;
  tokens: ComparedTokens;
  cost: Compared<number>;
  latencyMs: Compared<number>;
  finalAnswer: TextDiff;
  /** When one run is a rerun of the other: the step it was rerun from (earlier steps are left out). */
  forkedAt: number | null;
  steps: ComparedStep[];
}

/** GET /v1/datasets: frozen copies of ended runs to evaluate candidates on. */
export interface Dataset {
  id: string;
  name: string;
  source: Record<string, unknown>;
  item_count: number;
  created_at: string;
}

/** How a run (or a candidate) came out: what the scorers compare. */
export interface Outcome {
  status: string;
  finalText: string | null;
  toolCalls: Array<{ name: string; input: unknown }>;
  usage: { inputTokens: number; outputTokens: number };
  cost: number;
  latencyMs: number;
}

/** GET /v1/datasets/{id}/items. */
export interface DatasetItem {
  id: string;
  position: number;
  source_session_id: string;
  source_run_id: string;
  agent: { name: string; version: string };
  steps: number;
  trigger: string | null;
  reference: Outcome;
  expected: unknown;
  notes: string | null;
  created_at: string;
}

export type ExperimentMode = 'step_replay' | 'rerun';

export interface ExperimentCounts {
  pending: number;
  running: number;
  done: number;
  failed: number;
}

/** GET /v1/experiments/{id}. */
export interface Experiment {
  id: string;
  name: string;
  status: 'running' | 'completed' | 'cancelled';
  mode: ExperimentMode;
  dataset_id: string;
  candidates: Array<{ label: string; agent: string; overrides?: Record<string, unknown> }>;
  /** `recorded` or the baseline candidate's label. */
  baseline: string;
  scorers: string[];
  concurrency: number;
  counts: ExperimentCounts;
  created_at: string;
  ended_at: string | null;
}

export interface CandidateResults {
  label: string;
  agent: string;
  items: number;
  done: number;
  failed: number;
  /** Mean of each score over the items done (late scores too); `score` is the overall one. */
  scores: Record<string, number>;
  /** Means of `tokens`, `cost` and `latency_ms`. */
  metrics: Record<string, number>;
  /** Mean score minus the baseline's over the same items (null for the baseline, or before any item is done). */
  vs_baseline: number | null;
  /** Items scored below the baseline, worst first. */
  regressions: Array<{ dataset_item_id: string; source_run_id: string; score: number; baseline: number; diff: number }>;
}

/** GET /v1/experiments/{id}/results. */
export interface ExperimentResults {
  id: string;
  name: string;
  status: Experiment['status'];
  mode: ExperimentMode;
  dataset_id: string;
  baseline: string;
  counts: Record<string, number>;
  candidates: CandidateResults[];
  created_at: string;
  ended_at: string | null;
}

/** A model decision: its text and its tool calls. */
export interface Decision {
  text: string;
  toolCalls: Array<{ name: string; input: unknown }>;
}

/** One step of a step replay: the recorded decision and the candidate's, on the recorded request. */
export interface ReplayedStep {
  step: number;
  /** The candidate's request had the recorded one's fingerprint (byte for byte the same). */
  requestMatches: boolean;
  recorded: Decision;
  candidate: Decision | null;
  error?: string;
  usage: { inputTokens: number; outputTokens: number };
  cost: number;
  latencyMs: number;
}

/** What an experiment item came to (`steps` and `requestsMatched` by step replay, `runId` by full rerun). */
export interface ExperimentItemResult {
  mode: ExperimentMode;
  candidate: string;
  sourceRunId: string;
  steps?: ReplayedStep[];
  requestsMatched?: number;
  runId?: string;
  outcome?: Outcome;
  reference?: Outcome;
  metrics?: Record<string, number>;
  baseline?: { score: number; metrics: Record<string, number> };
}

/** GET /v1/experiments/{id}/items: one per dataset item and candidate. */
export interface ExperimentItem {
  id: string;
  position: number;
  dataset_item_id: string;
  candidate: string;
  status: 'pending' | 'running' | 'done' | 'failed';
  run_id: string | null;
  attempt: number;
  scores: Record<string, unknown>;
  result: ExperimentItemResult | null;
  error: Record<string, unknown> | null;
  started_at: string | null;
  ended_at: string | null;
}

/** A page of a list the API answers with. */
export interface ListPage<T> {
  data: T[];
  next_cursor: string | null;
}
