import type { LanguageModelV4 } from '@ai-sdk/provider';
import {
  addUsage,
  callModel,
  classifyModelError,
  costOf,
  emptyUsage,
  portableMessages,
  retryDelayMs,
  sleep,
  toProviderPrompt,
  totalTokens,
  type AssistantMessage,
  type JsonValue,
  type Message,
  ModelCallError,
  type ModelCallResult,
  type ModelDelta,
  type ToolCallPart,
  type ToolMessage,
  type ToolOutput,
  type ToolResultPart,
  type Usage,
  type UserMessage,
} from '../model/index.ts';
import type { AgentDefinition, CallSettings, SystemPrompt } from './agent.ts';
import type {
  EventDataMap,
  PendingCall,
  RequestHeader,
  StepEndReason,
  TurnEndReason,
  TurnError,
  TurnEvent,
  TurnEventType,
  ToolSchema,
} from './events.ts';
import type { BoundaryContext, ConfigChange, TurnHooks } from './hooks.ts';
import { newId } from './ids.ts';
import { promptHash } from './prompt-hash.ts';
import { Inbox, userMessage, type UserInput } from './inbox.ts';
import type { EventSink, TurnCheckpoint } from './sink.ts';
import { executeTool, idempotencyKey, needsApproval, runPool, toolError, validateCall, type Tool } from './tools.ts';

/** A decision on a pending call: an approval (or denial), or a person's answer to ask_user. */
export interface ApprovalDecision {
  toolCallId: string;
  /** For approvals. */
  approved?: boolean;
  /** Replaces the model's arguments (validated again). */
  input?: JsonValue;
  reason?: string;
  /** For an interactive call (ask_user): the answer, which becomes its result. */
  answer?: JsonValue;
  /** Already in the log (the caller recorded it when it was made): do not record it again. */
  recorded?: boolean;
}

/** What a turn resumes from: after a suspension, a pause, or a crash (from a checkpoint). */
export interface ResumePoint {
  /** The turn's working conversation (history included) as checkpointed or suspended. */
  conversation: readonly Message[];
  /** Steps completed; an open step (its calls not all answered) is finished first. */
  step: number;
  /**
   * The model decision of `step` is on record but the step's end is not (the process stopped
   * between the two): the step is ended first, and a final answer is not asked for again.
   */
  stepOpen?: boolean;
  approvals?: readonly ApprovalDecision[];
  /**
   * Calls whose `tool/call` was recorded but whose result was not (the process died while they
   * ran): an idempotent tool runs again with the same idempotency key; any other gets an
   * `outcome_unknown` result and the model decides. Nothing runs twice silently.
   */
  started?: readonly string[];
  /** Usage and cost before this point, so limits keep counting across the resumption. */
  usage?: Usage;
  cost?: number;
}

export interface TurnOptions {
  sink: EventSink;
  /** Earlier turns. Reasoning is dropped from it: opaque reasoning never crosses a turn. */
  history?: readonly Message[];
  input?: UserInput;
  /** Continue a suspended, paused or interrupted turn. */
  resume?: ResumePoint;
  inbox?: Inbox;
  signal?: AbortSignal;
  hooks?: TurnHooks | readonly TurnHooks[];
  /** The turn's number in its session (events carry it). */
  turn?: number;
  /** Scopes tool idempotency keys, e.g. the session or run id. */
  scope?: string;
}

export interface TurnResult {
  reason: TurnEndReason;
  turn: number;
  steps: number;
  /** The whole working conversation at the end of the turn (history included). */
  conversation: Message[];
  /** Messages this invocation added. */
  added: Message[];
  usage: Usage;
  cost: number;
  error?: TurnError;
  /** When suspended: the calls waiting for a decision or an answer. */
  pending?: PendingCall[];
}

export interface TurnHandle {
  readonly result: Promise<TurnResult>;
  readonly inbox: Inbox;
  /** Cancels the turn: no new steps, running tools are aborted, open calls get `cancelled` results. */
  cancel(reason?: string): void;
  /** Cancels only the model call in flight; its partial output is kept, marked interrupted. */
  cancelModelCall(): void;
  /** Queues a configuration change for the next step boundary. */
  configure(change: ConfigChange): void;
}

class SinkFailure extends Error {
  constructor(cause: unknown) {
    super(`event sink failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'SinkFailure';
  }
}

class HookFailure extends Error {
  constructor(hook: string, cause: unknown) {
    super(`hook ${hook} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'HookFailure';
  }
}

type StepOutcome =
  | { kind: 'tool-calls' }
  | { kind: 'final' }
  | { kind: 'interrupted' }
  | { kind: 'cancelled' }
  | { kind: 'suspended'; pending: PendingCall[] }
  | { kind: 'failed'; error: TurnError };

function toolCallsOf(m: AssistantMessage): ToolCallPart[] {
  return m.content.filter((p): p is ToolCallPart => p.type === 'tool-call');
}

// Settings and tool sets change only at step boundaries: their JSON forms are built once each.
const settingsJson = new WeakMap<CallSettings, Record<string, JsonValue>>();
function settingsRecord(s: CallSettings): Record<string, JsonValue> {
  let r = settingsJson.get(s);
  if (!r) settingsJson.set(s, (r = JSON.parse(JSON.stringify(s)) as Record<string, JsonValue>));
  return r;
}

const toolSchemas = new WeakMap<Map<string, Tool>, ToolSchema[]>();
function schemasOf(tools: Map<string, Tool>): ToolSchema[] {
  let r = toolSchemas.get(tools);
  if (!r) toolSchemas.set(tools, (r = [...tools.values()].map((t) => t.schema)));
  return r;
}

/** One turn of the agent loop: steps until nothing must be pushed forward now. */
class TurnRunner {
  private readonly agent: AgentDefinition;
  private readonly opts: TurnOptions;
  private readonly sink: EventSink;
  readonly inbox: Inbox;
  private readonly hooks: readonly TurnHooks[];
  private readonly turnNo: number;
  private readonly scope: string;
  readonly turnCtl = new AbortController();
  private callCtl: AbortController | undefined;

  private model: LanguageModelV4;
  private system: SystemPrompt | undefined;
  private tools: Map<string, Tool>;
  private settings: CallSettings;
  private pendingConfig: ConfigChange[] = [];
  private pauseRequested = false;

  private conversation: Message[];
  private readonly added: Message[] = [];
  private stepNo = 0;
  private usage = emptyUsage();
  private cost = 0;
  private lastInputTokens: number | undefined;

  constructor(agent: AgentDefinition, opts: TurnOptions) {
    this.agent = agent;
    this.opts = opts;
    this.sink = opts.sink;
    this.inbox = opts.inbox ?? new Inbox();
    this.hooks = opts.hooks === undefined ? [] : Array.isArray(opts.hooks) ? opts.hooks : [opts.hooks as TurnHooks];
    this.turnNo = opts.turn ?? 1;
    this.scope = opts.scope ?? newId();
    this.model = agent.model;
    this.system = agent.system;
    this.tools = new Map(agent.tools.map((t) => [t.name, t]));
    this.settings = agent.settings;
    // Resuming appends results to the open step's tool message: copy it, so the caller's suspended state stays as it was.
    this.conversation = opts.resume
      ? opts.resume.conversation.map((m) => (m.role === 'tool' ? { ...m, content: [...m.content] } : m))
      : portableMessages(opts.history ?? []);
    if (opts.resume) {
      this.usage = opts.resume.usage ?? emptyUsage();
      this.cost = opts.resume.cost ?? 0;
    }
    if (opts.signal) {
      const external = opts.signal;
      if (external.aborted) this.turnCtl.abort(external.reason);
      else external.addEventListener('abort', () => this.turnCtl.abort(external.reason), { once: true });
    }
  }

  cancelModelCall(): void {
    this.callCtl?.abort(new DOMException('model call cancelled', 'AbortError'));
  }

  configure(change: ConfigChange): void {
    this.pendingConfig.push(change);
  }

  private async emit<T extends TurnEventType>(type: T, data: EventDataMap[T], step: number | null = this.stepNo || null, checkpoint?: TurnCheckpoint): Promise<void> {
    const event = { type, turn: this.turnNo, ...(step !== null ? { step } : {}), time: Date.now(), data } as TurnEvent;
    try {
      await this.sink.append([event], checkpoint);
    } catch (error) {
      throw new SinkFailure(error);
    }
  }

  private push(m: Message): void {
    this.conversation.push(m);
    this.added.push(m);
  }

  private checkpoint(step: number): TurnCheckpoint {
    return { step, conversation: this.conversation, usage: this.usage, cost: this.cost };
  }

  private boundaryContext(): BoundaryContext {
    return {
      turn: this.turnNo,
      step: this.stepNo,
      conversation: this.conversation,
      usage: this.usage,
      signal: this.turnCtl.signal,
      steer: (input) => void this.inbox.steer(input),
      configure: (change) => this.configure(change),
      pause: () => {
        this.pauseRequested = true;
      },
    };
  }

  private async runHook<K extends keyof TurnHooks>(name: K, call: (h: TurnHooks) => unknown): Promise<unknown[]> {
    const out: unknown[] = [];
    for (const h of this.hooks) {
      if (!h[name]) continue;
      try {
        out.push(await call(h));
      } catch (error) {
        throw new HookFailure(name, error);
      }
    }
    return out;
  }

  async run(): Promise<TurnResult> {
    let reason: TurnEndReason;
    let error: TurnError | undefined;
    let pending: PendingCall[] | undefined;
    try {
      await this.emit('turn/start', {
        agent: { name: this.agent.name, version: this.agent.version },
        model: { provider: this.model.provider, modelId: this.model.modelId },
        resumed: this.opts.resume !== undefined,
      }, null);
      if (this.opts.input !== undefined) await this.addUser(userMessage(this.opts.input), 'input');

      let outcome: StepOutcome | undefined;
      if (this.opts.resume) {
        this.stepNo = this.opts.resume.step;
        outcome = await this.resumeStep(this.opts.resume);
      }
      for (;;) {
        if (outcome) {
          const end = await this.afterStep(outcome);
          if (end) {
            ({ reason, error, pending } = end);
            break;
          }
        }
        const stop = await this.boundary();
        if (stop) {
          reason = stop;
          break;
        }
        outcome = await this.step();
      }
    } catch (e) {
      reason = 'failed';
      error =
        e instanceof SinkFailure
          ? { kind: 'sink', message: e.message }
          : e instanceof HookFailure
            ? { kind: 'hook', message: e.message }
            : { kind: 'internal', message: e instanceof Error ? e.message : String(e) };
    }
    const data: EventDataMap['turn/end'] = {
      reason,
      steps: this.stepNo,
      usage: this.usage,
      cost: this.cost,
      ...(error ? { error } : {}),
      ...(pending ? { pending } : {}),
    };
    // After a sink failure the sink may refuse this too; the result still tells the caller.
    await this.emit('turn/end', data, null, this.checkpoint(this.stepNo)).catch(() => {});
    return {
      reason,
      turn: this.turnNo,
      steps: this.stepNo,
      conversation: this.conversation,
      added: this.added,
      usage: this.usage,
      cost: this.cost,
      ...(error ? { error } : {}),
      ...(pending ? { pending } : {}),
    };
  }

  private async addUser(m: UserMessage, via: 'input' | 'steer'): Promise<void> {
    await this.emit('user/message', { message: m, via });
    this.push(m);
  }

  /** Decides what follows a step; returns the end of the turn, if it ends. */
  private async afterStep(outcome: StepOutcome): Promise<{ reason: TurnEndReason; error?: TurnError; pending?: PendingCall[] } | undefined> {
    switch (outcome.kind) {
      case 'tool-calls':
        return undefined;
      case 'cancelled':
        return { reason: 'cancelled' };
      case 'failed':
        return { reason: 'failed', error: outcome.error };
      case 'suspended':
        return { reason: 'suspended', pending: outcome.pending };
      case 'interrupted': {
        if (this.turnCtl.signal.aborted) return { reason: 'cancelled' };
        const votes = await this.runHook('modelCallCancelled', (h) => h.modelCallCancelled!(this.boundaryContext()));
        return votes.includes('continue') ? undefined : { reason: 'cancelled' };
      }
      case 'final':
        if (this.inbox.hasSteering) return undefined;
        await this.runHook('turnStopping', (h) => h.turnStopping!(this.boundaryContext()));
        return this.inbox.hasSteering ? undefined : { reason: 'completed' };
    }
  }

  /** Everything that may change between steps, and only there. Returns a reason to stop, if any. */
  private async boundary(): Promise<TurnEndReason | undefined> {
    if (this.turnCtl.signal.aborted) return 'cancelled';
    for (const m of this.inbox.takeSteering()) await this.addUser(m, 'steer');
    await this.applyConfig();
    await this.runHook('beforeStep', (h) => h.beforeStep!(this.boundaryContext()));
    // A hook may have steered or reconfigured: those belong to this boundary too.
    for (const m of this.inbox.takeSteering()) await this.addUser(m, 'steer');
    await this.applyConfig();
    if (this.turnCtl.signal.aborted) return 'cancelled';
    if (this.pauseRequested) return 'paused';

    const { limits } = this.agent;
    if (this.stepNo >= limits.maxSteps) return 'max_steps';
    if (limits.maxTokens !== undefined && totalTokens(this.usage) >= limits.maxTokens) return 'budget_exceeded';
    if (limits.maxCostUsd !== undefined && this.cost >= limits.maxCostUsd) return 'budget_exceeded';

    await this.compact('threshold');
    return undefined;
  }

  private async compact(reason: 'threshold' | 'overflow'): Promise<boolean> {
    const results = await this.runHook('compact', (h) =>
      h.compact!({ ...this.boundaryContext(), reason, lastInputTokens: this.lastInputTokens }),
    );
    const replaced = results.filter((r): r is Message[] => Array.isArray(r)).at(-1);
    if (!replaced) return false;
    this.conversation = [...replaced];
    return true;
  }

  private async applyConfig(): Promise<void> {
    const changes = this.pendingConfig;
    if (changes.length === 0) return;
    this.pendingConfig = [];
    for (const c of changes) {
      const data: EventDataMap['config/change'] = {};
      if (c.model) {
        this.model = c.model;
        data.model = { provider: c.model.provider, modelId: c.model.modelId };
      }
      if (c.system !== undefined) {
        this.system = c.system;
        data.system = true;
      }
      if (c.tools) {
        this.tools = new Map(c.tools.map((t) => [t.name, t]));
        data.tools = c.tools.map((t) => t.name);
      }
      if (c.settings) {
        this.settings = c.settings;
        data.settings = settingsRecord(c.settings);
      }
      await this.emit('config/change', data);
    }
  }

  private requestHeader(attempt: number, messageId: string): { header: RequestHeader; system: string | undefined } {
    const system = typeof this.system === 'function' ? this.system({ turn: this.turnNo, step: this.stepNo }) : this.system;
    const settings = settingsRecord(this.settings);
    const tools = schemasOf(this.tools);
    return {
      system,
      header: {
        provider: this.model.provider,
        modelId: this.model.modelId,
        attempt,
        messageId,
        settings,
        system: system ?? null,
        tools,
        context: this.conversation.map((m) => m.id),
        promptHash: promptHash({ system: system ?? null, tools, settings, messages: this.conversation }),
      },
    };
  }

  /** One model call, with retries for transient errors and one compaction retry on overflow. */
  private async modelCall(): Promise<{ ok: true; result: ModelCallResult; messageId: string } | { ok: false; error: ModelCallError; messageId: string }> {
    let overflowRetried = false;
    for (let attempt = 1; ; attempt++) {
      const messageId = newId();
      const { header, system } = this.requestHeader(attempt, messageId);
      // Write-ahead: the request is on record before it is sent.
      await this.emit('request/header', header);
      const ctl = new AbortController();
      const onTurnAbort = () => ctl.abort(this.turnCtl.signal.reason);
      this.turnCtl.signal.addEventListener('abort', onTurnAbort, { once: true });
      this.callCtl = ctl;
      const step = this.stepNo;
      const onDelta = this.sink.delta
        ? (d: ModelDelta) => {
            const base = { turn: this.turnNo, step, messageId };
            this.sink.delta!(
              d.kind === 'tool-input'
                ? { type: 'tool-input/delta', ...base, toolCallId: d.toolCallId, toolName: d.toolName, delta: d.delta }
                : { type: d.kind === 'text' ? 'text/delta' : 'reasoning/delta', ...base, delta: d.delta },
            );
          }
        : undefined;
      try {
        const result = await callModel(
          this.model,
          {
            prompt: toProviderPrompt(system, this.conversation),
            ...(this.tools.size > 0
              ? { tools: header.tools.map((t) => ({ type: 'function' as const, name: t.name, description: t.description, inputSchema: t.inputSchema as object })) }
              : {}),
            ...this.settings,
          },
          ctl.signal,
          onDelta,
        );
        return { ok: true, result, messageId };
      } catch (e) {
        const error = classifyModelError(e, ctl.signal.aborted);
        if (error.kind === 'aborted') return { ok: false, error, messageId };
        const delayMs = retryDelayMs(this.agent.retry, attempt, error);
        if (delayMs !== undefined) {
          await this.emit('model/retry', { attempt, delayMs, error: error.toJSON(), abandonedMessageId: messageId });
          try {
            // The attempt's own signal: both cancel() and cancelModelCall() end the wait.
            await sleep(delayMs, ctl.signal);
          } catch {
            return { ok: false, error: new ModelCallError({ kind: 'aborted', message: 'model call aborted during retry backoff' }, { cause: error }), messageId };
          }
          continue;
        }
        const willCompact = error.kind === 'context_overflow' && !overflowRetried && this.hooks.some((h) => h.compact);
        await this.emit('model/error', { attempt, error: error.toJSON(), willCompact });
        if (willCompact && (await this.compact('overflow'))) {
          overflowRetried = true;
          continue;
        }
        return { ok: false, error, messageId };
      } finally {
        this.callCtl = undefined;
        this.turnCtl.signal.removeEventListener('abort', onTurnAbort);
      }
    }
  }

  private async step(): Promise<StepOutcome> {
    this.stepNo++;
    await this.emit('step/start', {});
    const stepUsageBefore = this.usage;
    const call = await this.modelCall();

    if (!call.ok) {
      if (call.error.kind !== 'aborted') {
        await this.emit('step/end', { reason: 'failed', usage: emptyUsage() });
        return { kind: 'failed', error: { kind: 'model', message: call.error.message, model: call.error.toJSON() } };
      }
      // Keep what arrived before the cut; calls it made get results so history has no dangling call.
      const turnCancelled = this.turnCtl.signal.aborted;
      if (call.error.partial.length > 0) {
        const message: AssistantMessage = { id: call.messageId, role: 'assistant', content: call.error.partial, interrupted: true };
        await this.emit('assistant/message', {
          message,
          finishReason: 'interrupted',
          usage: emptyUsage(),
          cost: 0,
          timing: { startedAt: Date.now(), durationMs: 0 },
        });
        this.push(message);
        await this.closeCalls(message, toolCallsOf(message), 'the model call was cancelled before this call ran');
      }
      await this.emit('step/end', { reason: turnCancelled ? 'cancelled' : 'interrupted', usage: emptyUsage() });
      return { kind: turnCancelled ? 'cancelled' : 'interrupted' };
    }

    const { result, messageId } = call;
    const message: AssistantMessage = { id: messageId, role: 'assistant', content: result.content };
    const cost = costOf(result.usage, this.agent.pricing);
    this.usage = addUsage(this.usage, result.usage);
    this.cost += cost;
    this.lastInputTokens = result.usage.inputTokens;
    await this.emit('assistant/message', {
      message,
      finishReason: result.finishReason,
      usage: result.usage,
      cost,
      ...(result.responseId !== undefined ? { responseId: result.responseId } : {}),
      ...(result.responseModelId !== undefined ? { responseModelId: result.responseModelId } : {}),
      timing: result.timing,
    });
    this.push(message);

    const calls = toolCallsOf(message);
    if (calls.length === 0) {
      await this.endStep('final', stepUsageBefore);
      return { kind: 'final' };
    }
    return this.runCalls(message, calls, new Map(), stepUsageBefore);
  }

  private async endStep(reason: StepEndReason, usageBefore: Usage): Promise<void> {
    const u = this.usage;
    const stepUsage: Usage = {
      inputTokens: u.inputTokens - usageBefore.inputTokens,
      outputTokens: u.outputTokens - usageBefore.outputTokens,
      cachedInputTokens: u.cachedInputTokens - usageBefore.cachedInputTokens,
      reasoningTokens: u.reasoningTokens - usageBefore.reasoningTokens,
    };
    // The checkpoint commits with the step's end: a resumed turn restarts from exactly here.
    await this.emit('step/end', { reason, usage: stepUsage }, undefined, this.checkpoint(this.stepNo));
  }

  /** The tool message that answers `assistant`, created on first use. */
  private toolMessageFor(assistant: AssistantMessage): ToolMessage {
    const i = this.conversation.findIndex((m) => m.id === assistant.id);
    const next = this.conversation[i + 1];
    if (next?.role === 'tool') return next;
    const m: ToolMessage = { id: newId(), role: 'tool', content: [] };
    this.push(m);
    return m;
  }

  private async recordResult(assistant: AssistantMessage, call: ToolCallPart, output: ToolOutput, durationMs: number): Promise<void> {
    const toolMessage = this.toolMessageFor(assistant);
    await this.emit('tool/result', { toolCallId: call.toolCallId, toolName: call.toolName, output, toolMessageId: toolMessage.id, durationMs });
    const part: ToolResultPart = { type: 'tool-result', toolCallId: call.toolCallId, toolName: call.toolName, output };
    // Results stay in the model's call order whatever order they were recorded in.
    const order = toolCallsOf(assistant).map((c) => c.toolCallId);
    toolMessage.content.push(part);
    toolMessage.content.sort((a, b) => order.indexOf(a.toolCallId) - order.indexOf(b.toolCallId));
  }

  private async closeCalls(assistant: AssistantMessage, calls: readonly ToolCallPart[], why: string): Promise<void> {
    for (const c of calls) await this.recordResult(assistant, c, toolError('cancelled', why), 0);
  }

  /**
   * Runs the calls of one model decision. `decided` holds approval decisions (when resuming):
   * calls that need approval and have none are left open and the turn suspends.
   */
  private async runCalls(
    assistant: AssistantMessage,
    calls: readonly ToolCallPart[],
    decided: ReadonlyMap<string, ApprovalDecision>,
    usageBefore: Usage,
    started: ReadonlySet<string> = new Set(),
  ): Promise<StepOutcome> {
    type Plan = { call: ToolCallPart; output?: ToolOutput; tool?: Tool; input?: unknown; pending?: 'approval' | 'input'; recorded?: boolean };
    const plans: Plan[] = [];
    for (const call of calls) {
      const decision = decided.get(call.toolCallId);
      if (decision?.answer !== undefined) {
        plans.push({ call, output: { type: 'json', value: decision.answer } });
        continue;
      }
      if (decision && decision.approved === false) {
        plans.push({ call, output: toolError('denied', decision.reason ?? 'the user denied this call') });
        continue;
      }
      const effective = decision?.input !== undefined ? { ...call, input: decision.input } : call;
      const v = validateCall(this.tools, effective);
      if (!v.ok) plans.push({ call: effective, output: v.output });
      else if (v.tool.interactive) plans.push({ call: effective, pending: 'input' });
      else if (started.has(call.toolCallId) && !v.tool.idempotent) {
        // It may or may not have had its effect before the interruption: say so, never guess.
        plans.push({
          call: effective,
          recorded: true,
          output: toolError('outcome_unknown', 'the run was interrupted while this call ran and the tool is not idempotent: it may or may not have taken effect'),
        });
      } else if (started.has(call.toolCallId)) plans.push({ call: effective, tool: v.tool, input: v.input, recorded: true });
      else if (!decision && needsApproval(v.tool, v.input)) plans.push({ call: effective, pending: 'approval' });
      else plans.push({ call: effective, tool: v.tool, input: v.input });
    }

    for (const p of plans) {
      if (p.pending) {
        const data = { toolCallId: p.call.toolCallId, toolName: p.call.toolName, input: p.call.input, assistantMessageId: assistant.id };
        await (p.pending === 'approval' ? this.emit('tool/approval', data) : this.emit('user/question', data));
      } else if (p.recorded) {
        // Its tool/call is already in the log, with the same idempotency key.
        continue;
      } else {
        // Write-ahead: the call is on record before anything executes.
        await this.emit('tool/call', {
          toolCallId: p.call.toolCallId,
          toolName: p.call.toolName,
          input: p.call.input,
          idempotencyKey: idempotencyKey(this.scope, p.call.toolCallId),
          assistantMessageId: assistant.id,
        });
      }
    }

    const runnable = plans.filter((p) => p.tool !== undefined);
    const settled = runPool(
      runnable.map((p) => ({
        sequential: p.tool!.sequential,
        run: async () => {
          const t0 = performance.now();
          const output = await executeTool(
            p.tool!,
            p.input,
            { toolCallId: p.call.toolCallId, idempotencyKey: idempotencyKey(this.scope, p.call.toolCallId), turn: this.turnNo, step: this.stepNo },
            this.turnCtl.signal,
          );
          return { output, durationMs: Math.round(performance.now() - t0) };
        },
      })),
      this.agent.toolConcurrency,
    );
    const byCall = new Map(runnable.map((p, i) => [p.call.toolCallId, settled[i]!]));

    // Results are recorded in the model's order, each as soon as all before it are in.
    for (const p of plans) {
      if (p.pending) continue;
      const done = p.output ? { output: p.output, durationMs: 0 } : await byCall.get(p.call.toolCallId)!;
      await this.recordResult(assistant, p.call, done.output, done.durationMs);
    }

    const pending: PendingCall[] = plans.filter((p) => p.pending).map((p) => ({ toolCallId: p.call.toolCallId, toolName: p.call.toolName, input: p.call.input, kind: p.pending! }));
    if (pending.length > 0 && !this.turnCtl.signal.aborted) return { kind: 'suspended', pending };
    if (this.turnCtl.signal.aborted) {
      await this.closeCalls(
        assistant,
        pending.map((p) => ({ type: 'tool-call', toolCallId: p.toolCallId, toolName: p.toolName, input: p.input })),
        'the turn was cancelled while this call waited for a decision',
      );
      await this.endStep('cancelled', usageBefore);
      return { kind: 'cancelled' };
    }
    await this.endStep('tool-calls', usageBefore);
    return { kind: 'tool-calls' };
  }

  /**
   * Finishes the open step of a suspended or interrupted turn (if there is one) with the given
   * decisions; without an open step the turn simply continues at its next step boundary.
   */
  private async resumeStep(resume: ResumePoint): Promise<StepOutcome | undefined> {
    const assistantIndex = this.conversation.findLastIndex((m) => m.role === 'assistant');
    const assistant = this.conversation[assistantIndex] as AssistantMessage | undefined;
    const answered = new Set<string>();
    const next = this.conversation[assistantIndex + 1];
    if (next?.role === 'tool') for (const r of next.content) answered.add(r.toolCallId);
    const open = assistant && !assistant.interrupted ? toolCallsOf(assistant).filter((c) => !answered.has(c.toolCallId)) : [];
    const approvals = resume.approvals ?? [];
    if (open.length === 0) {
      if (approvals.length > 0) throw new Error(`cannot resume: no open tool call ${approvals[0]!.toolCallId}`);
      // The turn stopped after the model's final answer was recorded (before the step's end, or
      // before the turn's): the answer stands; asking the model again would answer twice.
      const final = assistant !== undefined && !assistant.interrupted && assistantIndex === this.conversation.length - 1 && toolCallsOf(assistant).length === 0;
      if (resume.stepOpen && assistant && !assistant.interrupted) await this.endStep(final ? 'final' : 'tool-calls', this.usage);
      return final ? { kind: 'final' } : undefined;
    }
    const decided = new Map<string, ApprovalDecision>();
    for (const d of approvals) {
      if (!open.some((c) => c.toolCallId === d.toolCallId)) throw new Error(`cannot resume: no open tool call ${d.toolCallId}`);
      decided.set(d.toolCallId, d);
      if (d.recorded) continue;
      if (d.answer !== undefined) await this.emit('user/answer', { toolCallId: d.toolCallId, answer: d.answer });
      else {
        await this.emit('tool/decision', {
          toolCallId: d.toolCallId,
          approved: d.approved === true,
          ...(d.reason !== undefined ? { reason: d.reason } : {}),
          ...(d.input !== undefined ? { editedInput: d.input } : {}),
        });
      }
    }
    return this.runCalls(assistant!, open, decided, this.usage, new Set(resume.started ?? []));
  }
}

/** Starts one turn. The handle controls it while it runs; `result` settles when it ends. */
export function startTurn(agent: AgentDefinition, options: TurnOptions): TurnHandle {
  const runner = new TurnRunner(agent, options);
  const result = runner.run();
  return {
    result,
    inbox: runner.inbox,
    cancel: (reason) => runner.turnCtl.abort(new DOMException(reason ?? 'turn cancelled', 'AbortError')),
    cancelModelCall: () => runner.cancelModelCall(),
    configure: (change) => runner.configure(change),
  };
}

/** Runs one turn to its end. */
export function runTurn(agent: AgentDefinition, options: TurnOptions): Promise<TurnResult> {
  return startTurn(agent, options).result;
}
