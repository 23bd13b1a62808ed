import type { LanguageModelV4CallOptions, LanguageModelV4Message } from '@ai-sdk/provider';
import {
  MemorySink,
  type DeltaEvent,
  type EventOf,
  type Message,
  type SinkAppendOptions,
  type TurnEvent,
  type TurnEventType,
} from '../../src/index.ts';

type Waiter = { match: (e: TurnEvent) => boolean; resolve: (e: TurnEvent) => void };

export interface ProbeSinkOptions {
  /** Called synchronously for every durable event, before it is stored. */
  onEvent?: (event: TurnEvent, sink: ProbeSink) => void;
  /** Called synchronously for every delta, after it is stored. */
  onDelta?: (event: DeltaEvent, sink: ProbeSink) => void;
  /** `append` rejects (and stores nothing) for the first event this matches. */
  failOn?: (event: TurnEvent) => boolean;
}

/** A MemorySink a test can watch, wait on and make fail. */
/** The content a header refers to by hash, from the blobs the loop attached to its events. */
export function contentOf(sink: MemorySink, hash: string | null): unknown {
  if (hash === null) return null;
  const blob = sink.events.flatMap((e) => e.blobs ?? []).find((b) => b.hash === hash);
  if (!blob) throw new Error(`no event carried the content ${hash}`);
  return JSON.parse(blob.data) as unknown;
}

export class ProbeSink extends MemorySink {
  private readonly options: ProbeSinkOptions;
  private waiters: Waiter[] = [];
  private deltaWaiters: Array<{ match: (d: DeltaEvent) => boolean; resolve: (d: DeltaEvent) => void }> = [];

  constructor(options: ProbeSinkOptions = {}) {
    super();
    this.options = options;
  }

  /** For each durable point: how many events had been appended when it was asked for. */
  readonly durableAt: number[] = [];

  override async append(events: readonly TurnEvent[], options?: SinkAppendOptions): Promise<void> {
    for (const e of events) {
      if (this.options.failOn?.(e)) throw new Error(`sink refused ${e.type}`);
    }
    if (options?.durable) {
      this.durablePoints++;
      this.durableAt.push(this.events.length + events.length);
    }
    for (const e of events) {
      this.options.onEvent?.(e, this);
      this.events.push(e);
      this.waiters = this.waiters.filter((w) => {
        if (!w.match(e)) return true;
        w.resolve(e);
        return false;
      });
    }
  }

  override delta(event: DeltaEvent): void {
    super.delta(event);
    this.options.onDelta?.(event, this);
    this.deltaWaiters = this.deltaWaiters.filter((w) => {
      if (!w.match(event)) return true;
      w.resolve(event);
      return false;
    });
  }

  /** Resolves with the first event of this type (matching `where`), past or future. */
  waitFor<T extends TurnEventType>(type: T, where: (e: EventOf<T>) => boolean = () => true): Promise<EventOf<T>> {
    const match = (e: TurnEvent): boolean => e.type === type && where(e as EventOf<T>);
    const seen = this.events.find(match);
    if (seen) return Promise.resolve(seen as EventOf<T>);
    return new Promise((resolve) => this.waiters.push({ match, resolve: (e) => resolve(e as EventOf<T>) }));
  }

  /** Resolves with the first delta matching `where`, past or future. */
  waitForDelta(where: (d: DeltaEvent) => boolean = () => true): Promise<DeltaEvent> {
    const seen = this.deltas.find(where);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.deltaWaiters.push({ match: where, resolve }));
  }

  get types(): TurnEventType[] {
    return this.events.map((e) => e.type);
  }

  indexOf(predicate: (e: TurnEvent) => boolean): number {
    return this.events.findIndex(predicate);
  }

  /** The events of each step, from its step/start to its step/end (or to the end of the log when still open). */
  steps(): TurnEvent[][] {
    const out: TurnEvent[][] = [];
    let cur: TurnEvent[] | undefined;
    for (const e of this.events) {
      if (e.type === 'step/start') cur = [];
      if (cur) cur.push(e);
      if (e.type === 'step/end' && cur) {
        out.push(cur);
        cur = undefined;
      }
    }
    if (cur) out.push(cur);
    return out;
  }

  /** Concatenated text deltas of one assistant message. */
  textOf(messageId: string, type: DeltaEvent['type'] = 'text/delta'): string {
    return this.deltas
      .filter((d) => d.type === type && d.messageId === messageId)
      .map((d) => d.delta)
      .join('');
  }
}

// ---------- what the model received ----------

export type PromptMessage = LanguageModelV4Message;

export function systemOf(call: LanguageModelV4CallOptions | undefined): string | undefined {
  const m = call?.prompt.find((p) => p.role === 'system');
  return m?.role === 'system' ? m.content : undefined;
}

/** Texts of the user messages of a prompt, in order. */
export function userTexts(call: LanguageModelV4CallOptions | undefined): string[] {
  return (call?.prompt ?? []).flatMap((m) =>
    m.role === 'user' ? [m.content.map((p) => (p.type === 'text' ? p.text : '')).join('')] : [],
  );
}

/** Texts of the assistant messages of a prompt, in order. */
export function assistantTexts(call: LanguageModelV4CallOptions | undefined): string[] {
  return (call?.prompt ?? []).flatMap((m) =>
    m.role === 'assistant' ? [m.content.map((p) => (p.type === 'text' ? p.text : '')).join('')] : [],
  );
}

export interface PromptToolResult {
  toolCallId: string;
  toolName: string;
  output: { type: string; value?: unknown; reason?: string };
}

/** Every tool result of a prompt, in prompt order. */
export function toolResultsIn(call: LanguageModelV4CallOptions | undefined): PromptToolResult[] {
  const out: PromptToolResult[] = [];
  for (const m of call?.prompt ?? []) {
    if (m.role !== 'tool') continue;
    for (const p of m.content) {
      if (p.type === 'tool-result')
        out.push({ toolCallId: p.toolCallId, toolName: p.toolName, output: p.output as PromptToolResult['output'] });
    }
  }
  return out;
}

/** Tool call ids of a prompt, in order. */
export function toolCallIdsIn(call: LanguageModelV4CallOptions | undefined): string[] {
  const out: string[] = [];
  for (const m of call?.prompt ?? []) {
    if (m.role !== 'assistant') continue;
    for (const p of m.content) if (p.type === 'tool-call') out.push(p.toolCallId);
  }
  return out;
}

/** Every reasoning part of a prompt. */
export function reasoningPartsIn(
  call: LanguageModelV4CallOptions | undefined,
): Array<{ text: string; providerOptions?: unknown }> {
  const out: Array<{ text: string; providerOptions?: unknown }> = [];
  for (const m of call?.prompt ?? []) {
    if (m.role !== 'assistant') continue;
    for (const p of m.content)
      if (p.type === 'reasoning')
        out.push({ text: p.text, ...(p.providerOptions ? { providerOptions: p.providerOptions } : {}) });
  }
  return out;
}

/** Names of the tools offered to the model in one call. */
export function toolNamesOf(call: LanguageModelV4CallOptions | undefined): string[] {
  return (call?.tools ?? []).map((t) => t.name);
}

// ---------- the conversation ----------

/** Tool call ids in the conversation that have no result: must always be empty at the end of a turn. */
export function danglingCalls(conversation: readonly Message[]): string[] {
  const answered = new Set<string>();
  for (const m of conversation) if (m.role === 'tool') for (const r of m.content) answered.add(r.toolCallId);
  const open: string[] = [];
  for (const m of conversation) {
    if (m.role !== 'assistant') continue;
    for (const p of m.content) if (p.type === 'tool-call' && !answered.has(p.toolCallId)) open.push(p.toolCallId);
  }
  return open;
}

export function textOfMessage(m: Message | undefined): string {
  if (!m) return '';
  if (m.role === 'summary') return m.text;
  if (m.role === 'tool') return '';
  return m.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
}
