import { z } from 'zod';
import { RUN_STATUS_VALUES } from '../store/index.ts';

/** zod schemas of everything the session log stores: messages, usage, and each event's data. */
export const json = z.json();

const providerMetadata = z.record(z.string(), z.record(z.string(), json));

export const textPart = z.strictObject({ type: z.literal('text'), text: z.string() });
export const filePart = z.strictObject({
  type: z.literal('file'),
  mediaType: z.string(),
  data: z.string(),
  filename: z.string().optional(),
});
export const reasoningPart = z.strictObject({
  type: z.literal('reasoning'),
  text: z.string(),
  providerMetadata: providerMetadata.optional(),
});
export const toolCallPart = z.strictObject({
  type: z.literal('tool-call'),
  toolCallId: z.string(),
  toolName: z.string(),
  input: json,
});

export const toolOutput = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text'), value: z.string() }),
  z.strictObject({ type: z.literal('json'), value: json }),
  z.strictObject({
    type: z.literal('error'),
    code: z.enum([
      'unknown_tool',
      'invalid_input',
      'execution_error',
      'timeout',
      'cancelled',
      'denied',
      'outcome_unknown',
    ]),
    message: z.string(),
  }),
]);

export const userMessage = z.strictObject({
  id: z.string(),
  role: z.literal('user'),
  content: z.array(z.union([textPart, filePart])),
});
export const assistantMessage = z.strictObject({
  id: z.string(),
  role: z.literal('assistant'),
  content: z.array(z.union([textPart, reasoningPart, toolCallPart])),
  interrupted: z.boolean().optional(),
});

export const usage = z.strictObject({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  cachedInputTokens: z.number().int().nonnegative(),
  reasoningTokens: z.number().int().nonnegative(),
});

export const modelErrorInfo = z.strictObject({
  kind: z.enum(['transient', 'context_overflow', 'aborted', 'fatal']),
  message: z.string(),
  status: z.number().int().optional(),
  code: z.string().optional(),
  retryAfterMs: z.number().nonnegative().optional(),
});

const modelRef = z.strictObject({ provider: z.string(), modelId: z.string() });
const toolSchema = z.strictObject({ name: z.string(), description: z.string(), inputSchema: json });
const onDeadline = z.union([
  z.literal('timed_out'),
  z.strictObject({ deny: z.string() }),
  z.strictObject({ answer: json }),
]);
/** A sleep's or a signal's wait (ADR-0015), with the pending call that asked for it. */
const waitSpec = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('sleep'),
    until: z.number(),
    wakeOnSteer: z.boolean().optional(),
    reason: z.string().optional(),
  }),
  z.strictObject({
    kind: z.literal('signal'),
    name: z.string(),
    deadline: z.number().optional(),
    onTimeout: onDeadline.optional(),
    schema: json.optional(),
  }),
]);
/** What is known of a call whose outcome is unknown after a crash (ADR-0018). */
const unknownOutcomeInfo = z.strictObject({ idempotencyKey: z.string(), startedAt: z.number().optional() });
const pending = z.strictObject({
  toolCallId: z.string(),
  toolName: z.string(),
  input: json,
  kind: z.enum(['approval', 'input', 'sleep', 'signal']),
  wait: waitSpec.optional(),
  unknownOutcome: unknownOutcomeInfo.optional(),
});
/** Who decided: a person (absent), or the wait's deadline and its policy (ADR-0015). */
const decidedBy = z.literal('deadline').optional();
const pendingCall = z.strictObject({
  toolCallId: z.string(),
  toolName: z.string(),
  input: json,
  assistantMessageId: z.string(),
});
const toolApproval = pendingCall.extend({ unknownOutcome: unknownOutcomeInfo.optional() });
const turnError = z.strictObject({
  kind: z.enum(['model', 'sink', 'hook', 'internal', 'tool']),
  message: z.string(),
  model: modelErrorInfo.optional(),
  code: z.string().optional(),
});

const contentHashRef = z.string().regex(/^sha256:[0-9a-f]{64}$/, 'a content hash sha256:<64 hex digits>');

/** A request header before ADR-0008: system prompt and tools inline, every context id listed. */
export const requestHeaderV1 = z.strictObject({
  provider: z.string(),
  modelId: z.string(),
  attempt: z.number().int().positive(),
  messageId: z.string(),
  settings: z.record(z.string(), json),
  system: z.string().nullable(),
  tools: z.array(toolSchema),
  context: z.array(z.string()),
  promptHash: z.string(),
});

/** The constant-size request header (ADR-0008). */
export const requestHeaderV2 = z.strictObject({
  provider: z.string(),
  modelId: z.string(),
  attempt: z.number().int().positive(),
  messageId: z.string(),
  settings: z.record(z.string(), json),
  system: contentHashRef.nullable(),
  tools: contentHashRef.nullable(),
  context: z.strictObject({
    messages: z.number().int().nonnegative(),
    first: z.string().nullable(),
    last: z.string().nullable(),
  }),
  promptHash: z.string(),
  /** Only on a header written as v1: what it held inline, for the replay check of old logs. */
  legacy: z
    .strictObject({ system: z.string().nullable(), tools: z.array(toolSchema), context: z.array(z.string()) })
    .optional(),
});

/** Data schemas of the events the step/turn loop emits (src/core/events.ts). */
export const loopEventSchemas = {
  'turn/start': z.strictObject({
    agent: z.strictObject({ name: z.string(), version: z.string() }),
    model: modelRef,
    resumed: z.boolean(),
  }),
  'user/message': z.strictObject({ message: userMessage, via: z.enum(['input', 'steer']) }),
  'config/change': z.strictObject({
    model: modelRef.optional(),
    system: z.literal(true).optional(),
    tools: z.array(z.string()).optional(),
    settings: z.record(z.string(), json).optional(),
  }),
  'step/start': z.strictObject({}),
  'request/header': requestHeaderV2,
  'model/retry': z.strictObject({
    attempt: z.number().int(),
    delayMs: z.number().nonnegative(),
    error: modelErrorInfo,
    abandonedMessageId: z.string(),
  }),
  'model/error': z.strictObject({ attempt: z.number().int(), error: modelErrorInfo, willCompact: z.boolean() }),
  'compaction/failed': z.strictObject({ reason: z.enum(['threshold', 'overflow']), error: z.string() }),
  'assistant/message': z.strictObject({
    message: assistantMessage,
    finishReason: z.string(),
    usage,
    cost: z.number().nonnegative(),
    responseId: z.string().optional(),
    responseModelId: z.string().optional(),
    timing: z.strictObject({ startedAt: z.number(), firstChunkMs: z.number().optional(), durationMs: z.number() }),
  }),
  'tool/call': z.strictObject({
    toolCallId: z.string(),
    toolName: z.string(),
    input: json,
    idempotencyKey: z.string(),
    assistantMessageId: z.string(),
  }),
  'tool/approval': toolApproval,
  'tool/unknown-outcome': z.strictObject({
    toolCallId: z.string(),
    toolName: z.string(),
    idempotencyKey: z.string(),
    startedAt: z.number().optional(),
    resolution: z.enum([
      'checked_done',
      'checked_not_done',
      'asked_human',
      'retried',
      'not_retried',
      'told_model',
      'failed',
    ]),
    reason: z.string().optional(),
  }),
  'tool/decision': z.strictObject({
    toolCallId: z.string(),
    approved: z.boolean(),
    reason: z.string().optional(),
    editedInput: json.optional(),
    by: decidedBy,
    unknownOutcome: z.literal(true).optional(),
  }),
  'user/question': pendingCall,
  'user/answer': z.strictObject({ toolCallId: z.string(), answer: json, by: decidedBy }),
  'tool/result': z.strictObject({
    toolCallId: z.string(),
    toolName: z.string(),
    output: toolOutput,
    toolMessageId: z.string(),
    durationMs: z.number().nonnegative(),
    source: z.enum(['executed', 'reused', 'mocked']).optional(),
  }),
  'step/end': z.strictObject({ reason: z.enum(['tool-calls', 'final', 'interrupted', 'cancelled', 'failed']), usage }),
  'turn/end': z.strictObject({
    reason: z.enum(['completed', 'cancelled', 'failed', 'max_steps', 'budget_exceeded', 'suspended', 'paused']),
    steps: z.number().int().nonnegative(),
    usage,
    cost: z.number().nonnegative(),
    error: turnError.optional(),
    pending: z.array(pending).optional(),
  }),
} as const;

const runStatus = z.enum(RUN_STATUS_VALUES);

/** Data schemas of the run lifecycle events (written by the runs layer, with the run's id). */
export const runEventSchemas = {
  'run/status': z.strictObject({
    from: runStatus.nullable(),
    to: runStatus,
    attempt: z.number().int().nonnegative(),
    reason: z.string().optional(),
    error: z.record(z.string(), json).optional(),
    agent: z.strictObject({ name: z.string(), version: z.string() }).optional(),
    parentRunId: z.string().optional(),
  }),
  'run/interrupted': z.strictObject({
    attempt: z.number().int().positive(),
    /** Steps completed at the last checkpoint: the run continues after it. */
    step: z.number().int().nonnegative(),
    reason: z.enum(['lease_expired', 'released']),
  }),
  /**
   * A sleep or a signal wait ended (ADR-0015): by the clock, a steering message, a signal (API or
   * callback URL), or its deadline. `output` is the call's result when the run resumes.
   */
  'wait/resolved': z.strictObject({
    toolCallId: z.string(),
    // `input`: a question nobody answered before its deadline, with a `deny` policy (its result is the `timeout` error).
    kind: z.enum(['sleep', 'signal', 'input']),
    by: z.enum(['clock', 'steer', 'signal', 'callback', 'deadline']),
    name: z.string().optional(),
    output: toolOutput,
  }),
  /** The tools a run got from its MCP servers at its first start, used for its whole life (src/mcp/record.ts, ADR-0019). */
  'mcp/tools': z.strictObject({
    servers: z.array(
      z.looseObject({
        name: z.string(),
        tools: z.array(z.looseObject({ name: z.string(), remoteName: z.string(), inputSchema: json })),
      }),
    ),
    skipped: z.array(z.strictObject({ server: z.string(), reason: z.string() })),
  }),
  /** A schedule fired into this session (runs/schedules.ts): the tick and the run it created, in the fire's transaction. */
  'schedule/fired': z.strictObject({ scheduleId: z.string(), tick: z.number().int(), runId: z.string() }),
} as const;

/** Data schemas of the events the session layer itself writes. */
export const sessionEventSchemas = {
  'session/created': z.strictObject({
    title: z.string().nullable(),
    metadata: z.record(z.string(), json),
    agent: z.string().nullable(),
    origin: z.strictObject({ sessionId: z.string(), entryId: z.string() }).nullable(),
  }),
  'session/updated': z.strictObject({
    title: z.string().nullable().optional(),
    metadata: z.record(z.string(), json).optional(),
  }),
  'session/archived': z.strictObject({}),
  'leaf/move': z.strictObject({ entryId: z.string().nullable(), reason: z.enum(['switch', 'fork']) }),
  'branch/summary': z.strictObject({
    summary: z.string(),
    abandonedLeafId: z.string().nullable(),
    model: modelRef.nullable(),
    usage,
    cost: z.number().nonnegative(),
  }),
  compaction: z.strictObject({
    summary: z.string(),
    firstKeptEntryId: z.string().nullable(),
    tokensBefore: z.number().int().nonnegative(),
    tokensAfter: z.number().int().nonnegative(),
    /** True when tokensBefore is an estimate, not what the provider reported. */
    estimated: z.boolean(),
    model: modelRef,
    usage,
    cost: z.number().nonnegative(),
    reason: z.enum(['manual', 'threshold', 'overflow']),
  }),
} as const;
