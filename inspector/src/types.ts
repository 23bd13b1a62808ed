/**
 * What the inspector reads of the API beyond keel/client's generated types: names for parts of
 * them, and the shapes of the JSON the OpenAPI document leaves open (`{ [key: string]: unknown }`:
 * a run's agent spec, usage and tool policies, its steps, the transcript, the model context, an
 * experiment item's result, a dataset item's reference), as far as the pages read them. Those are
 * type aliases, not interfaces: like the generated types they may be read as (`as Step[]`).
 */
import type { DatasetItem, Experiment, ExperimentItem, ExperimentResults, Run, RunComparison } from 'keel/client';

export type WaitingRequest = NonNullable<Run['waiting']>['requests'][number];
export type RerunLineage = NonNullable<Run['rerun']>;
export type ExperimentMode = Experiment['mode'];
export type ExperimentCounts = Experiment['counts'];
export type CandidateResults = ExperimentResults['candidates'][number];

/** A value of each run in a comparison (null on a side that has none). */
export interface Compared<T> {
  a: T | null;
  b: T | null;
  equal: boolean;
}
export type ComparedRunSummary = RunComparison['a'];
export type ComparedStep = RunComparison['steps'][number];
/** A text of each run and the edit from a to b: `delete` only in a, `insert` only in b. */
export type TextDiff = RunComparison['finalAnswer'];
export type ToolCallSide = NonNullable<ComparedStep['toolCalls'][number]['a']>;

/** A tool's output as recorded: `{type, value}`, or an error or denial with its reason. */
export type ToolOutput = {
  type: string;
  value?: unknown;
  reason?: string;
};

/** A tool as a run's agent spec records it; an MCP server's tool names its server (`mcp`). */
export interface SpecTool {
  name: string;
  description?: string;
  approval: string;
  mcp?: { server: string; remoteName: string };
}

/** `Run['agent_spec']`: what a run executes with (recorded when it was created; its MCP tools added at its first start). */
export type AgentSpec = {
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
};

/** `Run['usage']`, and a step's. */
export type Usage = {
  inputTokens?: number;
  outputTokens?: number;
  cachedInputTokens?: number;
  reasoningTokens?: number;
};

/** `RerunLineage['tools']`: the tool policies, `default` (reuse or execute) and `tools` by name. */
export type RerunTools = {
  default?: 'reuse' | 'execute';
  tools?: Record<string, { mode: string }>;
};

/** One step of a run (`runs.steps`). */
export type Step = {
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
    output?: ToolOutput;
    durationMs?: number;
    outcomeUnknown?: { resolution: string; startedAt?: number; reason?: string };
  }>;
};

/** One item of a session's transcript (`sessions.transcript`). */
export type TranscriptItem = {
  kind: string;
  entryId?: string;
  text?: string;
  reasoning?: string | null;
  tools?: Array<{ toolCallId: string; toolName: string; status: string; error?: string }>;
  [k: string]: unknown;
};

/** What the model sees next (`sessions.context`). */
export type ModelContext = {
  messages: Array<{ role: string; content: unknown }>;
  tokens: number;
  omitted: number;
  leaf_id: string | null;
};

/** How a run (or a candidate) came out: what the scorers compare (`DatasetItem['reference']`). */
export type Outcome = {
  status: string;
  finalText: string | null;
  toolCalls: Array<{ name: string; input: unknown }>;
  usage: { inputTokens: number; outputTokens: number };
  cost: number;
  latencyMs: number;
};

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

/** `ExperimentItem['result']`: `steps` and `requestsMatched` by step replay, `runId` by full rerun. */
export type ExperimentItemResult = {
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
};

/** An experiment item with its result read as `ExperimentItemResult`. */
export type ExperimentItemView = Omit<ExperimentItem, 'result'> & { result: ExperimentItemResult | null };

/** A dataset item with its reference read as an `Outcome`. */
export type DatasetItemView = Omit<DatasetItem, 'reference'> & { reference: Outcome };
