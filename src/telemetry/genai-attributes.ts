/**
 * Attribute names of the OpenTelemetry GenAI semantic conventions (development status, the
 * names current in 2026: `gen_ai.provider.name`, `gen_ai.usage.cache_read.input_tokens`, ...) and
 * Keel's own. Kept here as constants: Keel depends on `@opentelemetry/api` only, not on
 * `@opentelemetry/semantic-conventions`.
 */
export const GenAI = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  conversationId: 'gen_ai.conversation.id',
  agentName: 'gen_ai.agent.name',
  agentVersion: 'gen_ai.agent.version',
  requestModel: 'gen_ai.request.model',
  requestMaxTokens: 'gen_ai.request.max_tokens',
  requestTemperature: 'gen_ai.request.temperature',
  requestTopP: 'gen_ai.request.top_p',
  requestTopK: 'gen_ai.request.top_k',
  requestSeed: 'gen_ai.request.seed',
  requestStopSequences: 'gen_ai.request.stop_sequences',
  responseModel: 'gen_ai.response.model',
  responseId: 'gen_ai.response.id',
  responseFinishReasons: 'gen_ai.response.finish_reasons',
  usageInputTokens: 'gen_ai.usage.input_tokens',
  usageOutputTokens: 'gen_ai.usage.output_tokens',
  usageCacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  toolDescription: 'gen_ai.tool.description',
  /** Content (only with recordContent): tool input, as JSON text. */
  toolCallArguments: 'gen_ai.tool.call.arguments',
  /** Content (only with recordContent): tool output, as JSON text. */
  toolCallResult: 'gen_ai.tool.call.result',
  /** Content (only with recordContent): the model's output messages, as JSON text. */
  outputMessages: 'gen_ai.output.messages',
  /** Content (only with recordContent): the messages that started or resumed the run, as JSON text. */
  inputMessages: 'gen_ai.input.messages',
  errorType: 'error.type',
} as const;

export const Keel = {
  sessionId: 'keel.session.id',
  runId: 'keel.run.id',
  parentRunId: 'keel.parent_run.id',
  turn: 'keel.turn',
  step: 'keel.step',
  /** The run's execution attempt (1, and one more per recovery after an interruption). */
  attempt: 'keel.attempt',
  /** A model call's attempt within its step (retries count up). */
  modelAttempt: 'keel.model.attempt',
  /** Milliseconds from the request to the first streamed chunk. */
  firstChunkMs: 'keel.model.first_chunk_ms',
  reasoningTokens: 'keel.usage.reasoning_tokens',
  cost: 'keel.cost',
  /** The first and last log seq of the events the span covers. */
  seqFirst: 'keel.seq.first',
  seqLast: 'keel.seq.last',
  /** Whether the execution resumed a turn (after a wait, a pause, or a recovery) rather than starting it. */
  resumed: 'keel.resumed',
  /** Steps the execution ran. */
  steps: 'keel.steps',
  /** The run's status when the execution ended (completed, waiting_approval, paused, queued, failed, ...). */
  runStatus: 'keel.run.status',
  /** How a message was taken by its session (created, enqueued, steered). */
  sendOutcome: 'keel.send.outcome',
  worker: 'keel.worker.id',
  /** On the spans a recovering worker made for an interrupted execution: why it was interrupted (`lease_expired`). */
  interruption: 'keel.interruption',
  /** On the spans a recovering worker made for an interrupted execution: that worker. */
  recoveredBy: 'keel.recovered_by',
} as const;
