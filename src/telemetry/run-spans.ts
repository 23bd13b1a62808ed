import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import type { TurnEvent } from '../core/index.ts';
import type { AssistantMessage, JsonValue, Message, ToolOutput, Usage, UserMessage } from '../model/index.ts';
import type { SessionEvent } from '../session/index.ts';
import type { JsonObject, RunRecord } from '../store/index.ts';
import { GenAI, Keel } from './genai-attributes.ts';
import { contextOf, formatTraceparent, type TraceCarrier } from './trace-context.ts';
import { keelTracer } from './tracer.ts';

export interface RunSpansOptions {
  /** Record message contents (see TelemetryOptions.recordContent). */
  recordContent: boolean;
  /** The worker executing the run. */
  worker?: string;
}

/** How an execution of a run ended, for its `invoke_agent` span. */
export interface ExecutionEnd {
  /** The run as the execution left it (undefined when it could not write its end: a lost lease, a store failure). */
  run?: RunRecord | undefined;
  /** Why the execution stopped early, if it did (a lost lease, a release, a cancel, a timeout). */
  stopReason?: string | undefined;
  /** What the execution threw. */
  thrown?: unknown;
}

interface OpenModelCall {
  start: number;
  seq: number | undefined;
  step: number | undefined;
  provider: string;
  modelId: string;
  attempt: number;
  settings: Record<string, JsonValue>;
}

interface OpenToolCall {
  name: string;
  start: number;
  seq: number | undefined;
  step: number | undefined;
  input: JsonValue;
}

const json = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? 'null'));

/**
 * The spans of one execution of a run (a claim by a worker), derived from the events it commits:
 * `invoke_agent {agent}` for the execution, with a `chat {model}` span for each model call (each
 * attempt) and an `execute_tool {tool}` span for each tool call as its children. Each span is made
 * when the events that close it have committed, with the start and end times those events
 * recorded: what the trace shows is what the log holds.
 *
 * Exists only while a span is recording (an SDK is registered and the trace is sampled): otherwise
 * `start` returns undefined and nothing at all is done per event.
 */
export class RunSpans {
  private readonly root: Span;
  private readonly ctx: Context;
  private readonly run: RunRecord;
  private readonly o: RunSpansOptions;
  private model: OpenModelCall | undefined;
  private readonly calls = new Map<string, OpenToolCall>();
  private toolDescriptions: Map<string, string> | undefined;
  private seqFirst: number | undefined;
  private seqLast: number | undefined;
  private readonly usage: Usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 };
  private cost = 0;
  private steps: number | undefined;
  private inputMessages: JsonValue[] | undefined;
  /** The run's stored trace context: the parent of every execution's span. */
  private readonly parent: Context;
  private recoveryTraced = false;

  private constructor(root: Span, ctx: Context, parent: Context, run: RunRecord, o: RunSpansOptions) {
    this.root = root;
    this.ctx = ctx;
    this.parent = parent;
    this.run = run;
    this.o = o;
  }

  /**
   * Starts the `invoke_agent` span of an execution under the trace context stored with the run (the
   * request that created it): every execution of a run, first start, resume after a wait or a
   * pause, recovery by another worker, continues the same trace. Undefined when not recording.
   */
  static start(run: RunRecord, o: RunSpansOptions, startTime: number = Date.now()): RunSpans | undefined {
    const parent = contextOf((run.options as { trace?: unknown }).trace, ROOT_CONTEXT) ?? ROOT_CONTEXT;
    const span = keelTracer().startSpan(
      `invoke_agent ${run.agent.name}`,
      { kind: SpanKind.INTERNAL, startTime },
      parent,
    );
    if (!span.isRecording()) return undefined;
    const attrs = invokeAttributes(run, run.attempt);
    if (o.worker) attrs[Keel.worker] = o.worker;
    span.setAttributes(attrs);
    return new RunSpans(span, trace.setSpan(parent, span), parent, run, o);
  }

  /**
   * This execution recovered the run (its claim was a `run/interrupted`): the execution before it
   * could not end its spans (its process was killed, or it lost the store). From the events that
   * execution committed (in `tail`, the run's events after its checkpoint, this claim's included),
   * the spans it had open are made here, ended at the interruption with `error.type`
   * `interrupted`: its `invoke_agent` (from its claim, under the run's stored context like every
   * execution) and, under it, each tool call it started without a result. The spans of what it had
   * ended were its own to export and are not made again. At most once per execution.
   */
  recovered(tail: readonly SessionEvent[]): void {
    if (this.recoveryTraced) return;
    this.recoveryTraced = true;
    const at = tail.findLastIndex((e) => e.type === 'run/interrupted' && e.data.attempt === this.run.attempt);
    if (at < 0) return;
    const interruption = tail[at] as SessionEvent<'run/interrupted'>;
    const attempt = this.run.attempt - 1;
    // Its events: from its claim (a start, a resume after a wait, or a recovery) to the interruption.
    const claimedAt = tail.findLastIndex((e, i) => i < at && isClaimOf(e, attempt));
    const events = tail.slice(Math.max(0, claimedAt), at);
    const open = new Map<string, OpenToolCall>();
    for (const e of events) {
      if (e.type === 'tool/call')
        open.set(e.data.toolCallId, {
          name: e.data.toolName,
          start: e.time,
          seq: e.seq,
          step: e.step,
          input: e.data.input,
        });
      // A call whose outcome was unknown that it ran again.
      else if (
        e.type === 'tool/unknown-outcome' &&
        (e.data.resolution === 'retried' || e.data.resolution === 'checked_not_done')
      )
        open.set(e.data.toolCallId, { name: e.data.toolName, start: e.time, seq: e.seq, step: e.step, input: null });
      else if (e.type === 'tool/result') open.delete(e.data.toolCallId);
    }
    const end = interruption.time;
    const start = Math.min(events[0]?.time ?? end, end);
    const marks: Attributes = {
      [GenAI.errorType]: 'interrupted',
      [Keel.interruption]: interruption.data.reason,
      ...(this.o.worker ? { [Keel.recoveredBy]: this.o.worker } : {}),
    };
    const attrs: Attributes = { ...invokeAttributes(this.run, attempt), [Keel.runStatus]: 'running', ...marks };
    if (events.length > 0) {
      attrs[Keel.seqFirst] = events[0]!.seq;
      attrs[Keel.seqLast] = events.at(-1)!.seq;
    }
    const span = keelTracer().startSpan(
      `invoke_agent ${this.run.agent.name}`,
      { kind: SpanKind.INTERNAL, startTime: start, attributes: attrs },
      this.parent,
    );
    const by = this.o.worker ? `worker ${this.o.worker}` : 'another worker';
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: `attempt ${attempt} of the run was interrupted (${interruption.data.reason}): its worker stopped before it ended; ${by} recovered the run as attempt ${this.run.attempt}`,
    });
    const ctx = trace.setSpan(this.parent, span);
    for (const [id, call] of open) {
      const toolAttrs = { ...this.toolAttributes(call.name, id, call.step, call.seq, call.seq, attempt), ...marks };
      if (this.o.recordContent && call.input !== null) toolAttrs[GenAI.toolCallArguments] = json(call.input);
      const s = keelTracer().startSpan(
        `execute_tool ${call.name}`,
        { kind: SpanKind.INTERNAL, startTime: call.start, attributes: toolAttrs },
        ctx,
      );
      s.setStatus({
        code: SpanStatusCode.ERROR,
        message: 'the call was running when its execution was interrupted; its result was never recorded',
      });
      s.end(Math.max(call.start, end));
    }
    span.end(Math.max(start, end));
  }

  /** The execution's span as W3C trace context (for the runs it starts: subagents). */
  get carrier(): TraceCarrier {
    return formatTraceparent(this.root.spanContext());
  }

  /** A fresh run's context: its trigger message is the input it starts with (recorded with contents only). */
  started(history: readonly Message[]): void {
    if (!this.o.recordContent) return;
    const trigger = history.findLast((m): m is UserMessage => m.role === 'user' && m.id === this.run.triggerMessageId);
    if (trigger) (this.inputMessages ??= []).push(inputMessage(trigger));
  }

  /** Events the execution committed, with their stored envelopes (same order): spans for what they close. */
  committed(events: readonly TurnEvent[], stored: readonly SessionEvent[]): void {
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      const seq = stored[i]?.seq;
      if (seq !== undefined) {
        this.seqFirst ??= seq;
        this.seqLast = seq;
      }
      switch (e.type) {
        case 'turn/start':
          this.root.setAttribute(Keel.resumed, e.data.resumed);
          break;
        case 'user/message':
          if (this.o.recordContent) (this.inputMessages ??= []).push(inputMessage(e.data.message));
          break;
        case 'request/header':
          this.model = {
            start: e.time,
            seq,
            step: e.step,
            provider: e.data.provider,
            modelId: e.data.modelId,
            attempt: e.data.attempt,
            settings: e.data.settings,
          };
          break;
        case 'model/retry':
        case 'model/error':
          // The provider's error code, else the HTTP status, else Keel's kind of error (transient, fatal, ...).
          this.chatFailed(
            e.time,
            seq,
            e.data.error.code ?? (e.data.error.status ? String(e.data.error.status) : e.data.error.kind),
            e.data.error.message,
          );
          break;
        case 'assistant/message':
          this.chat(e, seq);
          break;
        case 'tool/call':
          this.calls.set(e.data.toolCallId, {
            name: e.data.toolName,
            start: e.time,
            seq,
            step: e.step,
            input: e.data.input,
          });
          break;
        case 'tool/result':
          this.tool(e, seq);
          break;
        case 'turn/end':
          this.steps = e.data.steps;
          break;
        default:
          break;
      }
    }
  }

  private chat(e: Extract<TurnEvent, { type: 'assistant/message' }>, seq: number | undefined): void {
    const d = e.data;
    const m = this.model;
    this.model = undefined;
    const start = m?.start ?? d.timing.startedAt;
    const end = Math.max(start, d.timing.startedAt + d.timing.durationMs);
    const modelId = m?.modelId ?? d.responseModelId ?? 'unknown';
    const attrs = this.chatAttributes(m, modelId, e.step, seq);
    attrs[GenAI.responseFinishReasons] = [d.finishReason];
    if (d.responseModelId) attrs[GenAI.responseModel] = d.responseModelId;
    if (d.responseId) attrs[GenAI.responseId] = d.responseId;
    attrs[GenAI.usageInputTokens] = d.usage.inputTokens;
    attrs[GenAI.usageOutputTokens] = d.usage.outputTokens;
    attrs[GenAI.usageCacheReadInputTokens] = d.usage.cachedInputTokens;
    if (d.usage.reasoningTokens > 0) attrs[Keel.reasoningTokens] = d.usage.reasoningTokens;
    if (d.cost > 0) attrs[Keel.cost] = d.cost;
    if (d.timing.firstChunkMs !== undefined) attrs[Keel.firstChunkMs] = d.timing.firstChunkMs;
    if (this.o.recordContent) attrs[GenAI.outputMessages] = json([outputMessage(d.message, d.finishReason)]);
    this.usage.inputTokens += d.usage.inputTokens;
    this.usage.outputTokens += d.usage.outputTokens;
    this.usage.cachedInputTokens += d.usage.cachedInputTokens;
    this.usage.reasoningTokens += d.usage.reasoningTokens;
    this.cost += d.cost;
    const span = keelTracer().startSpan(
      `chat ${modelId}`,
      { kind: SpanKind.CLIENT, startTime: start, attributes: attrs },
      this.ctx,
    );
    if (d.message.interrupted) span.setStatus({ code: SpanStatusCode.ERROR, message: 'the model call was cut short' });
    span.end(end);
  }

  /** A model call attempt that failed (to be retried, or for good). */
  private chatFailed(time: number, seq: number | undefined, kind: string, message: string): void {
    const m = this.model;
    this.model = undefined;
    if (!m) return;
    const attrs = this.chatAttributes(m, m.modelId, m.step, seq);
    attrs[GenAI.errorType] = kind;
    const span = keelTracer().startSpan(
      `chat ${m.modelId}`,
      { kind: SpanKind.CLIENT, startTime: m.start, attributes: attrs },
      this.ctx,
    );
    span.setStatus({ code: SpanStatusCode.ERROR, message });
    span.end(Math.max(m.start, time));
  }

  private chatAttributes(
    m: OpenModelCall | undefined,
    modelId: string,
    step: number | undefined,
    seq: number | undefined,
  ): Attributes {
    const attrs: Attributes = {
      [GenAI.operationName]: 'chat',
      [GenAI.requestModel]: modelId,
      [GenAI.conversationId]: this.run.sessionId,
      [Keel.sessionId]: this.run.sessionId,
      [Keel.runId]: this.run.id,
      [Keel.attempt]: this.run.attempt,
    };
    if (m) {
      attrs[GenAI.providerName] = m.provider;
      attrs[Keel.modelAttempt] = m.attempt;
      const s = m.settings;
      if (typeof s.maxOutputTokens === 'number') attrs[GenAI.requestMaxTokens] = s.maxOutputTokens;
      if (typeof s.temperature === 'number') attrs[GenAI.requestTemperature] = s.temperature;
      if (typeof s.topP === 'number') attrs[GenAI.requestTopP] = s.topP;
      if (typeof s.topK === 'number') attrs[GenAI.requestTopK] = s.topK;
      if (typeof s.seed === 'number') attrs[GenAI.requestSeed] = s.seed;
      if (Array.isArray(s.stopSequences))
        attrs[GenAI.requestStopSequences] = s.stopSequences.filter((x): x is string => typeof x === 'string');
    }
    if (step !== undefined) attrs[Keel.step] = step;
    const first = m?.seq ?? seq;
    if (first !== undefined) attrs[Keel.seqFirst] = first;
    if (seq !== undefined) attrs[Keel.seqLast] = seq;
    return attrs;
  }

  private tool(e: Extract<TurnEvent, { type: 'tool/result' }>, seq: number | undefined): void {
    const d = e.data;
    const call = this.calls.get(d.toolCallId);
    this.calls.delete(d.toolCallId);
    const start = call?.start ?? e.time - d.durationMs;
    const attrs = this.toolAttributes(d.toolName, d.toolCallId, e.step, call?.seq ?? seq, seq);
    if (this.o.recordContent) {
      if (call) attrs[GenAI.toolCallArguments] = json(call.input);
      attrs[GenAI.toolCallResult] = json(outputContent(d.output));
    }
    if (d.output.type === 'error') attrs[GenAI.errorType] = d.output.code;
    const span = keelTracer().startSpan(
      `execute_tool ${d.toolName}`,
      { kind: SpanKind.INTERNAL, startTime: start, attributes: attrs },
      this.ctx,
    );
    if (d.output.type === 'error') span.setStatus({ code: SpanStatusCode.ERROR, message: d.output.message });
    span.end(Math.max(start, e.time));
  }

  private toolAttributes(
    name: string,
    callId: string,
    step: number | undefined,
    first: number | undefined,
    last: number | undefined,
    attempt = this.run.attempt,
  ): Attributes {
    const attrs: Attributes = {
      [GenAI.operationName]: 'execute_tool',
      [GenAI.toolName]: name,
      [GenAI.toolCallId]: callId,
      [GenAI.toolType]: 'function',
      [GenAI.conversationId]: this.run.sessionId,
      [Keel.sessionId]: this.run.sessionId,
      [Keel.runId]: this.run.id,
      [Keel.attempt]: attempt,
    };
    const description = this.describe(name);
    if (description) attrs[GenAI.toolDescription] = description;
    if (step !== undefined) attrs[Keel.step] = step;
    if (first !== undefined) attrs[Keel.seqFirst] = first;
    if (last !== undefined) attrs[Keel.seqLast] = last;
    return attrs;
  }

  private describe(tool: string): string | undefined {
    if (!this.toolDescriptions) {
      this.toolDescriptions = new Map();
      const tools = (this.run.agentSpec as { tools?: unknown }).tools;
      if (Array.isArray(tools)) {
        for (const t of tools as Array<{ name?: unknown; description?: unknown }>) {
          if (typeof t?.name === 'string' && typeof t.description === 'string')
            this.toolDescriptions.set(t.name, t.description);
        }
      }
    }
    return this.toolDescriptions.get(tool);
  }

  /**
   * Ends the execution's span. Calls that started but whose result this execution never committed
   * (it lost the run, or was stopped) get a span ending now, with `error.type` `interrupted`.
   */
  end(o: ExecutionEnd, endTime: number = Date.now()): void {
    for (const [id, call] of this.calls) {
      const attributes = {
        ...this.toolAttributes(call.name, id, call.step, call.seq, call.seq),
        [GenAI.errorType]: 'interrupted',
      };
      const span = keelTracer().startSpan(
        `execute_tool ${call.name}`,
        { kind: SpanKind.INTERNAL, startTime: call.start, attributes },
        this.ctx,
      );
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'no result was recorded by this execution' });
      span.end(Math.max(call.start, endTime));
    }
    this.calls.clear();
    const attrs: Attributes = {
      [GenAI.usageInputTokens]: this.usage.inputTokens,
      [GenAI.usageOutputTokens]: this.usage.outputTokens,
      [GenAI.usageCacheReadInputTokens]: this.usage.cachedInputTokens,
    };
    if (this.usage.reasoningTokens > 0) attrs[Keel.reasoningTokens] = this.usage.reasoningTokens;
    if (this.cost > 0) attrs[Keel.cost] = this.cost;
    if (this.steps !== undefined) attrs[Keel.steps] = this.steps;
    if (this.seqFirst !== undefined) attrs[Keel.seqFirst] = this.seqFirst;
    if (this.seqLast !== undefined) attrs[Keel.seqLast] = this.seqLast;
    if (this.inputMessages) attrs[GenAI.inputMessages] = json(this.inputMessages);
    const status = o.run?.status;
    if (status) attrs[Keel.runStatus] = status;
    let error: { type: string; message: string } | undefined;
    if (o.thrown !== undefined) {
      const t = o.thrown as { code?: unknown; name?: unknown; message?: unknown };
      error = {
        type: typeof t.code === 'string' ? t.code : typeof t.name === 'string' ? t.name : 'Error',
        message: String(t.message ?? o.thrown),
      };
    } else if (status === 'failed' || status === 'timed_out') {
      const err = (o.run?.error ?? {}) as JsonObject;
      const type =
        typeof err.kind === 'string'
          ? err.kind
          : typeof err.code === 'string'
            ? err.code
            : status === 'timed_out'
              ? 'timeout'
              : 'failed';
      error = { type, message: typeof err.message === 'string' ? err.message : status };
    } else if (!o.run && o.stopReason !== 'release') {
      // The execution could not record where the run stands (handed back on purpose is no error).
      error =
        o.stopReason === 'lease_lost'
          ? { type: 'lease_lost', message: 'the worker lost its lease on the run' }
          : {
              type: 'end_not_recorded',
              message:
                "the execution could not record the run's end (another worker holds the run, or the store failed)",
            };
    }
    if (error) {
      attrs[GenAI.errorType] = error.type;
      this.root.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    }
    this.root.setAttributes(attrs);
    this.root.end(endTime);
  }
}

/** The attributes of an execution's `invoke_agent` span (of the run's `attempt`). */
function invokeAttributes(run: RunRecord, attempt: number): Attributes {
  const model = (run.agentSpec as { model?: { provider?: unknown; modelId?: unknown } }).model;
  const attrs: Attributes = {
    [GenAI.operationName]: 'invoke_agent',
    [GenAI.agentName]: run.agent.name,
    [GenAI.agentVersion]: run.agent.version,
    [GenAI.conversationId]: run.sessionId,
    [Keel.sessionId]: run.sessionId,
    [Keel.runId]: run.id,
    [Keel.attempt]: attempt,
  };
  if (typeof model?.provider === 'string') attrs[GenAI.providerName] = model.provider;
  if (typeof model?.modelId === 'string') attrs[GenAI.requestModel] = model.modelId;
  if (run.turn !== null) attrs[Keel.turn] = run.turn;
  if (run.parentRunId) attrs[Keel.parentRunId] = run.parentRunId;
  return attrs;
}

/** Whether `e` is the claim that started an execution of `attempt`: a start or resume (`run/status` to running), or a recovery. */
function isClaimOf(e: SessionEvent, attempt: number): boolean {
  if (e.type === 'run/status') return e.data.to === 'running' && e.data.attempt === attempt;
  return e.type === 'run/interrupted' && e.data.attempt === attempt;
}

/** A Keel user message in the GenAI input message format (file data is left out). */
function inputMessage(m: UserMessage): JsonValue {
  const parts = m.content.map((p): JsonValue =>
    p.type === 'text'
      ? { type: 'text', content: p.text }
      : { type: 'file', mime_type: p.mediaType, ...(p.filename ? { filename: p.filename } : {}) },
  );
  return { role: 'user', parts };
}

/** A Keel assistant message in the GenAI output message format. */
function outputMessage(m: AssistantMessage, finishReason: string): JsonValue {
  const parts = m.content.map((p): JsonValue => {
    switch (p.type) {
      case 'text':
        return { type: 'text', content: p.text };
      case 'reasoning':
        return { type: 'reasoning', content: p.text };
      case 'tool-call':
        return { type: 'tool_call', id: p.toolCallId, name: p.toolName, arguments: p.input };
    }
  });
  return { role: 'assistant', parts, finish_reason: finishReason };
}

function outputContent(o: ToolOutput): JsonValue {
  return o.type === 'error' ? { error: o.code, message: o.message } : o.value;
}
