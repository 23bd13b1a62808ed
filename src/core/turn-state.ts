import type { LanguageModelV4 } from '@ai-sdk/provider';
import { emptyUsage, ProviderPromptBuilder, type JsonValue, type Message, type Usage } from '../model/index.ts';
import type { AgentDefinition, CallSettings, SystemPrompt } from './agent.ts';
import { carryConversation, startConversation } from './carried-conversation.ts';
import type { ContentBlob, EventDataMap, TurnEvent, TurnEventType } from './events.ts';
import type { BoundaryContext, ConfigChange, TurnHooks } from './hooks.ts';
import { newId } from './ids.ts';
import { Inbox } from './inbox.ts';
import { MessageChain } from './prompt-hash.ts';
import { HELD, type EventSink, type SinkAppendOptions, type TurnCheckpoint } from './sink.ts';
import type { Tool } from './tools.ts';
import type { TurnOptions } from './turn-types.ts';

export class SinkFailure extends Error {
  constructor(cause: unknown) {
    super(`event sink failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'SinkFailure';
  }
}

export class HookFailure extends Error {
  constructor(hook: string, cause: unknown) {
    super(`hook ${hook} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'HookFailure';
  }
}

const NO_EMIT_OPTIONS: EmitOptions = {};

const asSinkFailure = (error: unknown): never => {
  throw new SinkFailure(error);
};

export interface EmitOptions {
  /** The step the event belongs to; null for turn-level events. Default: the current step, if any. */
  step?: number | null;
  /** A durable point (see SinkAppendOptions.durable). */
  durable?: boolean;
  checkpoint?: TurnCheckpoint;
  blobs?: readonly ContentBlob[];
}

/**
 * The state of one running turn, shared by the loop (turn.ts), the step (step.ts), the model
 * request (model-request.ts) and the tool calls (tool-calls.ts): configuration, the working
 * conversation, counters, cancellation, and the one way events leave the loop (`emit`).
 */
export class TurnState {
  readonly agent: AgentDefinition;
  readonly options: TurnOptions;
  readonly sink: EventSink;
  readonly inbox: Inbox;
  readonly hooks: readonly TurnHooks[];
  readonly turnNo: number;
  /** Scopes tool idempotency keys. */
  readonly scope: string;
  readonly turnCtl = new AbortController();
  callCtl: AbortController | undefined;

  model: LanguageModelV4;
  system: SystemPrompt | undefined;
  tools: Map<string, Tool>;
  settings: CallSettings;
  pendingConfig: ConfigChange[] = [];
  pauseRequested = false;

  conversation: Message[];
  readonly added: Message[] = [];
  stepNo = 0;
  usage: Usage = emptyUsage();
  cost = 0;
  lastInputTokens: number | undefined;

  /** The running hash of the conversation and its provider rendering, both extended per step. */
  readonly chain = new MessageChain();
  readonly prompt = new ProviderPromptBuilder();
  /** How many first messages of the conversation were portable when the turn started (see carried-conversation.ts). */
  private portable = 0;
  /** Content hashes whose blob this turn already attached to an event. */
  readonly attached = new Set<string>();

  constructor(agent: AgentDefinition, options: TurnOptions) {
    this.agent = agent;
    this.options = options;
    this.sink = options.sink;
    this.inbox = options.inbox ?? new Inbox();
    this.hooks =
      options.hooks === undefined ? [] : Array.isArray(options.hooks) ? options.hooks : [options.hooks as TurnHooks];
    this.turnNo = options.turn ?? 1;
    this.scope = options.scope ?? newId();
    this.model = agent.model;
    this.system = agent.system;
    this.tools = new Map(agent.tools.map((t) => [t.name, t]));
    this.settings = agent.settings;
    // Resuming appends results to the open step's tool message: copy it, so the caller's suspended state stays as it was.
    if (options.resume)
      this.conversation = options.resume.conversation.map((m) =>
        m.role === 'tool' ? { ...m, content: [...m.content] } : m,
      );
    else if (options.continueFrom) {
      this.conversation = [...options.continueFrom.conversation];
      this.stepNo = options.continueFrom.step - 1;
    } else {
      const start = startConversation(options.history ?? []);
      this.conversation = start.conversation;
      start.adopt?.(this.chain, this.prompt);
      this.portable = this.conversation.length;
    }
    if (options.resume) {
      this.usage = options.resume.usage ?? emptyUsage();
      this.cost = options.resume.cost ?? 0;
    }
    if (options.signal) {
      const external = options.signal;
      if (external.aborted) this.turnCtl.abort(external.reason);
      else {
        const onAbort = () => this.turnCtl.abort(external.reason);
        external.addEventListener('abort', onAbort, { once: true });
        this.unlisten = () => external.removeEventListener('abort', onAbort);
      }
    }
  }

  private readonly unlisten: (() => void) | undefined;

  /**
   * The turn is over: it stops listening to the caller's signal. That signal may outlive many
   * turns (a server's shutdown signal, say): its listener would hold each ended turn.
   */
  stopListening(): void {
    this.unlisten?.();
  }

  /**
   * Reports one event. Only a durable emit waits for storage; the others are held by the sink. A
   * sink failure rejects with SinkFailure. Not an async function: an event the sink only held
   * (it answers HELD) costs no promise of its own (several events a step).
   */
  emit<T extends TurnEventType>(type: T, data: EventDataMap[T], o: EmitOptions = NO_EMIT_OPTIONS): Promise<void> {
    const step = o.step === undefined ? this.stepNo || null : o.step;
    // Built without spreads (several events per step); the keys in the same order either way.
    const event = (
      step !== null
        ? { type, turn: this.turnNo, step, time: Date.now(), data }
        : { type, turn: this.turnNo, time: Date.now(), data }
    ) as TurnEvent;
    if (o.blobs?.length) (event as { blobs?: readonly ContentBlob[] }).blobs = o.blobs;
    let options: SinkAppendOptions | undefined;
    if (o.durable || o.checkpoint) {
      options = {};
      if (o.durable) options.durable = true;
      if (o.checkpoint) options.checkpoint = o.checkpoint;
    }
    let appended: Promise<void>;
    try {
      appended = this.sink.append([event], options);
    } catch (error) {
      return Promise.reject(new SinkFailure(error));
    }
    if (appended === HELD) return HELD;
    // A sink written in plain JavaScript may answer nothing, or a thenable of its own: as before.
    return Promise.resolve(appended).catch(asSinkFailure);
  }

  /** Makes everything reported so far durable. */
  async flush(): Promise<void> {
    try {
      await this.sink.append([], { durable: true });
    } catch (error) {
      throw new SinkFailure(error);
    }
  }

  /** Before tools start without a durable point: the sink may refuse (see EventSink.beforeEffects). */
  async beforeEffects(): Promise<void> {
    if (!this.sink.beforeEffects) return;
    try {
      await this.sink.beforeEffects();
    } catch (error) {
      throw new SinkFailure(error);
    }
  }

  push(m: Message): void {
    this.conversation.push(m);
    this.added.push(m);
  }

  /** The turn is over: its conversation may come back as the next turn's history. */
  carry(): void {
    carryConversation(this.conversation, this.portable, this.chain, this.prompt);
  }

  checkpoint(step: number): TurnCheckpoint {
    return { step, usage: this.usage, cost: this.cost };
  }

  boundaryContext(): BoundaryContext {
    return {
      turn: this.turnNo,
      step: this.stepNo,
      conversation: this.conversation,
      usage: this.usage,
      signal: this.turnCtl.signal,
      steer: (input) => void this.inbox.steer(input),
      configure: (change) => this.pendingConfig.push(change),
      pause: () => {
        this.pauseRequested = true;
      },
    };
  }

  /** Whether a hook of the turn has `name`: the loop calls none (and makes no promise) when none has. */
  hasHook(name: keyof TurnHooks): boolean {
    for (const h of this.hooks) if (h[name]) return true;
    return false;
  }

  async runHook<K extends keyof TurnHooks>(name: K, call: (h: TurnHooks) => unknown): Promise<unknown[]> {
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

  /** Lets the compact hooks replace the working conversation; true when one did. */
  async compact(reason: 'threshold' | 'overflow'): Promise<boolean> {
    if (!this.hasHook('compact')) return false;
    let results: unknown[];
    // A commit that fails in a hook's flush is the turn's failure, not the hook's.
    let flushFailure: { error: unknown } | undefined;
    const flush = () =>
      this.flush().catch((error: unknown) => {
        flushFailure = { error };
        throw error;
      });
    try {
      results = await this.runHook('compact', (h) =>
        h.compact!({ ...this.boundaryContext(), reason, lastInputTokens: this.lastInputTokens, flush }),
      );
    } catch (e) {
      if (flushFailure) throw flushFailure.error;
      // At a step boundary the turn can go on uncompacted (a later boundary tries again); after an
      // overflow it cannot, and the failure is the turn's.
      if (reason !== 'threshold' || !(e instanceof HookFailure)) throw e;
      await this.emit('compaction/failed', { reason, error: e.message });
      return false;
    }
    const replaced = results.filter((r): r is Message[] => Array.isArray(r)).at(-1);
    if (!replaced) return false;
    this.conversation = [...replaced];
    // What the hooks kept may hold this turn's own messages, not portable: none is carried.
    this.portable = 0;
    return true;
  }
}

// Settings change only at step boundaries: the JSON form of each is built once (tool sets: see model-request.ts).
const settingsJson = new WeakMap<CallSettings, Record<string, JsonValue>>();
export function settingsRecord(s: CallSettings): Record<string, JsonValue> {
  let r = settingsJson.get(s);
  if (!r) settingsJson.set(s, (r = JSON.parse(JSON.stringify(s)) as Record<string, JsonValue>));
  return r;
}
