/**
 * A run's feed as AG-UI events (ADR-0038, docs/protocols.md): an encoder of the one feed, never a
 * second one. Every event gets an id that says where it stands in the run's output
 * (output-position.ts), the same whether it was made live from deltas or rebuilt from the log, so
 * a client that reconnects with the last id it saw gets exactly the rest.
 *
 * The ordinal `i` counts the run's model calls (0 is the run's start). A model call's positions
 * have two halves:
 * - its text: `STEP_STARTED` (when the call opens a step) at `(i, 0, 0)`, `TEXT_MESSAGE_START` at
 *   `(i, 0, 1)`, each `TEXT_MESSAGE_CONTENT` at `(i, chars, 0)` (the characters the client has
 *   after it), `TEXT_MESSAGE_END` at `(i, chars, 1)`;
 * - what follows it, from the log only: `i · 2^30 + 2^29 + j` for its j-th later event (tool calls,
 *   results, step and run boundaries, Keel's own `CUSTOM` events). The run's start uses `j` alone.
 *
 * Only text streams live (reasoning and tool-argument deltas are not sent; a call's arguments come
 * whole with its message). A model call opens its ordinal with its first text delta (live) or its
 * request header (in the log). A call abandoned without a message (a retry, a failed call) ends
 * its text where the stream had begun it. A call lost with its worker leaves nothing in the log:
 * its ordinal is reserved when the run is recovered (`run/interrupted`), and a client that had
 * part of it gets the ends of what it had open. Text message ids are positional
 * (`<run id>.<i>`, Keel's message id in the event's metadata) for that reason.
 *
 * One Keel run may be several AG-UI runs: one ends (`RUN_FINISHED`) when the run waits for the
 * client (an approval or a question: an `interrupt` outcome; a call of a tool the client executes:
 * a success naming it in `pendingToolCallIds`) and the next starts when it goes on.
 * A Keel step open across such a wait is finished with the AG-UI run and started again with the
 * next. The Keel run's end ends the last: `RUN_FINISHED` (completed; `cancelled` outcome) or
 * `RUN_ERROR` (failed, timed out).
 */
import {
  EventType,
  PROTOCOL_VERSION,
  type Event,
  type Interrupt,
  type RunFinishedOutcome,
  type TokenUsage,
} from '@ag-ui/core';
import { isClientToolSignal } from '../../../core/client-tool.ts';
import type { DeltaEvent } from '../../../core/index.ts';
import type { ToolOutput } from '../../../model/index.ts';
import type { FeedItem, SessionEvent } from '../../../session/index.ts';
import type { RunStatus } from '../../../store/index.ts';
import { isTerminal } from '../../../runs/lifecycle/run-status.ts';
import { MAX_ORDINALS, ORDINAL, ordinalOf, position, unsentText } from '../output-position.ts';

/** An AG-UI event with its id: its position in the run's output. */
export interface AguiOut {
  id: number;
  event: Event;
}

/** Characters a model call's text may have (its positions stay in its ordinal's first half). */
export const MAX_TEXT = 2 ** 25 - 1;
const LATER = ORDINAL / 2;

/** The position of the j-th event after ordinal i's text (the run's start: j itself). */
const later = (i: number, j: number): number => {
  if (j >= (i === 0 ? ORDINAL : LATER)) throw new Error('the run has more events than an AG-UI stream can number');
  return i === 0 ? j : i * ORDINAL + LATER + j;
};

/** The statuses in which a run waits for an AG-UI client's answer. */
const ASKS_CLIENT: readonly RunStatus[] = ['waiting_approval', 'waiting_for_user'];

/** A model call's part of the stream. */
interface Call {
  i: number;
  /** Keel's id of the call's message; undefined for an ordinal reserved for a call lost with its worker. */
  messageId: string | undefined;
  state: 'open' | 'done' | 'abandoned';
  /** The log has it (its request header or its message): a stream rebuilt from the log knows it too. */
  inLog: boolean;
  /** Its text as this stream made it so far. */
  text: string;
  /** TEXT_MESSAGE_START was made for it. */
  started: boolean;
  /** The next index after its text. */
  j: number;
}

/** What the encoder needs to know of the stream. */
export interface AguiStreamOptions {
  /** The thread: the Keel session. */
  threadId: string;
  /** The AG-UI run id its RUN_* events carry. */
  runId: string;
  /** The Keel run. */
  keelRunId: string;
  /** The last id the client has (-1: none): only later events are sent. */
  after?: number;
}

const questionsOf = (input: unknown): Array<{ id: string; question: string; choices?: string[] }> => {
  const qs = (input as { questions?: unknown } | null)?.questions;
  return Array.isArray(qs) ? (qs as Array<{ id: string; question: string; choices?: string[] }>) : [];
};

/** What an approval interrupt's answer looks like (the resume entry's `payload`). */
export const APPROVAL_ANSWER_SCHEMA = {
  type: 'object',
  properties: {
    approved: { type: 'boolean' },
    reason: { type: 'string', description: 'Why it was denied (shown to the model)' },
    input: { type: 'object', description: 'Edited arguments to run the call with' },
  },
  required: ['approved'],
};

function questionSchema(input: unknown): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const q of questionsOf(input))
    properties[q.id] = { type: 'string', description: q.question, ...(q.choices ? { enum: q.choices } : {}) };
  return { type: 'object', properties, required: Object.keys(properties) };
}

/** A tool result as the text of TOOL_CALL_RESULT. */
function resultText(output: ToolOutput): string {
  if (output.type === 'text') return output.value;
  if (output.type === 'json') return JSON.stringify(output.value);
  return output.message;
}

export class AguiStreamEncoder {
  private readonly o: AguiStreamOptions;
  private readonly after: number;
  private ordinal = 0;
  private readonly calls = new Map<string, Call>();
  /** The call whose ordinal later events go to (at first the run's start). */
  private current: Call = { i: 0, messageId: undefined, state: 'done', inLog: true, text: '', started: false, j: 0 };
  /** The message id of the last request header: the call a `model/error` is about. */
  private lastHeader: string | undefined;
  /** The steps shown so far (their names are `step <n>`). */
  private steps = 0;
  /** The Keel step under way, and whether this AG-UI run shows it (STEP_STARTED made, no STEP_FINISHED yet). */
  private step: { n: number; call: Call; shown: boolean } | undefined;
  /** An AG-UI run is under way (RUN_STARTED made, no RUN_FINISHED or RUN_ERROR yet). */
  private running = false;
  /** The Keel run ended. */
  private over = false;
  /** Approvals and questions the run asked and nobody answered yet. */
  private readonly interrupts = new Map<string, Interrupt>();
  /** Calls of tools the client executes, and those of them without an output yet. */
  private readonly clientCalls = new Set<string>();
  private readonly clientPending = new Set<string>();
  /** What the last AG-UI run that ended waiting for the client told it to answer. */
  private announced = new Set<string>();
  private model: { provider: string; modelId: string } | undefined;
  private usage = { input: 0, output: 0, reasoning: 0, cached: 0, calls: 0 };
  private error: string | undefined;
  private last = -1;

  constructor(o: AguiStreamOptions) {
    this.o = o;
    this.after = o.after ?? -1;
  }

  /** The id of the last event this stream made (sent or not). */
  get lastId(): number {
    return this.last;
  }

  /** The Keel run ended (the stream's last event was made). */
  get ended(): boolean {
    return this.over;
  }

  /** Whether a `run/status` event ends the stream: the run ends, or waits for the client. */
  endsAt(e: SessionEvent): boolean {
    if (e.type !== 'run/status' || e.runId !== this.o.keelRunId) return false;
    const to = e.data.to;
    return isTerminal(to) || ASKS_CLIENT.includes(to) || (to === 'waiting_for_signal' && this.clientPending.size > 0);
  }

  /** The stream's first events: the AG-UI run starts. */
  start(): AguiOut[] {
    return this.keep(this.open());
  }

  /** The events of one feed item of the run. */
  item(item: FeedItem): AguiOut[] {
    if (this.over) return [];
    return this.keep(item.kind === 'delta' ? this.delta(item.delta) : this.event(item.event));
  }

  private msgId(c: Call): string {
    return `${this.o.keelRunId}.${c.i}`;
  }

  private at(id: number, event: Event, from?: number): AguiOut & { from?: number } {
    this.last = Math.max(this.last, id);
    return from === undefined ? { id, event } : { id, event, from };
  }

  /** An event after the current call's text. */
  private next(event: Event): AguiOut {
    return this.at(later(this.current.i, this.current.j++), event);
  }

  private custom(name: string, value: unknown): Event {
    return { type: EventType.CUSTOM, name, value };
  }

  /** RUN_STARTED, Keel's run id, and the step under way (one open across a wait). */
  private open(): AguiOut[] {
    this.running = true;
    this.usage = { input: 0, output: 0, reasoning: 0, cached: 0, calls: 0 };
    const out = [
      this.next({
        type: EventType.RUN_STARTED,
        threadId: this.o.threadId,
        runId: this.o.runId,
        protocolVersion: PROTOCOL_VERSION,
      }),
      this.next(this.custom('keel.run', { runId: this.o.keelRunId, sessionId: this.o.threadId })),
    ];
    if (this.step && !this.step.shown) {
      this.step.shown = true;
      out.push(this.next({ type: EventType.STEP_STARTED, stepName: `step ${this.step.n}` }));
    }
    return out;
  }

  private ensureRunning(): AguiOut[] {
    return this.running ? [] : this.open();
  }

  private delta(d: DeltaEvent): AguiOut[] {
    // Reasoning and tool arguments are not streamed: a call's arguments come with its message.
    if (d.type !== 'text/delta' || d.delta === '') return [];
    const out: AguiOut[] = [];
    let c = this.calls.get(d.messageId);
    if (!c) {
      out.push(...this.begin(d.messageId, false));
      c = this.current;
    }
    if (c.state !== 'open') return out;
    out.push(...this.text(c, d.delta));
    return out;
  }

  /** A model call starts: its ordinal, and a step if none is under way. */
  private begin(messageId: string | undefined, inLog: boolean): AguiOut[] {
    const out = this.ensureRunning();
    // A call still open when another starts was abandoned (a retry).
    if (this.current.state === 'open') out.push(...this.abandon(this.current));
    if (this.ordinal >= MAX_ORDINALS) throw new Error('the run has more model calls than an AG-UI stream can number');
    const c: Call = { i: ++this.ordinal, messageId, state: 'open', inLog, text: '', started: false, j: 0 };
    if (messageId !== undefined) this.calls.set(messageId, c);
    this.current = c;
    if (!this.step) {
      this.step = { n: ++this.steps, call: c, shown: true };
      out.push(this.at(position(c.i, 0, 0), { type: EventType.STEP_STARTED, stepName: `step ${this.step.n}` }));
    }
    return out;
  }

  private text(c: Call, delta: string): Array<AguiOut & { from?: number }> {
    const out: Array<AguiOut & { from?: number }> = [];
    if (!c.started) {
      c.started = true;
      out.push(
        this.at(position(c.i, 0, 1), {
          type: EventType.TEXT_MESSAGE_START,
          messageId: this.msgId(c),
          role: 'assistant',
          ...(c.messageId !== undefined ? { metadata: { keel: { messageId: c.messageId } } } : {}),
        }),
      );
    }
    const from = c.text.length;
    c.text += delta;
    if (c.text.length > MAX_TEXT) throw new Error('a message is longer than an AG-UI stream can number');
    out.push(
      this.at(
        position(c.i, c.text.length, 0),
        { type: EventType.TEXT_MESSAGE_CONTENT, messageId: this.msgId(c), delta },
        from,
      ),
    );
    return out;
  }

  /**
   * A call that ends without its message: its text ends where the stream began it (for a client
   * that had its start, whether this stream made it or a client reconnecting had it).
   */
  private abandon(c: Call): AguiOut[] {
    c.state = 'abandoned';
    c.j = 2;
    if (!c.started && this.after < position(c.i, 0, 1)) return [];
    return [this.at(later(c.i, 0), { type: EventType.TEXT_MESSAGE_END, messageId: this.msgId(c) })];
  }

  private event(e: SessionEvent): AguiOut[] {
    if (e.runId !== undefined && e.runId !== this.o.keelRunId) return [];
    switch (e.type) {
      case 'turn/start':
        this.model = e.data.model;
        return [];
      case 'request/header': {
        this.lastHeader = e.data.messageId;
        const c = this.calls.get(e.data.messageId);
        if (c) {
          c.inLog = true;
          return [];
        }
        return this.begin(e.data.messageId, true);
      }
      case 'assistant/message':
        return this.message(e as SessionEvent<'assistant/message'>);
      case 'model/retry':
        return this.abandonIfOpen(this.calls.get(e.data.abandonedMessageId));
      case 'model/error':
        return this.abandonIfOpen(this.lastHeader !== undefined ? this.calls.get(this.lastHeader) : undefined);
      case 'tool/result': {
        const d = e.data;
        if (this.clientCalls.has(d.toolCallId)) return []; // the client has its own result
        return [
          ...this.ensureRunning(),
          this.next({
            type: EventType.TOOL_CALL_RESULT,
            messageId: d.toolMessageId,
            toolCallId: d.toolCallId,
            role: 'tool',
            content: resultText(d.output),
            ...(d.output.type === 'error' ? { metadata: { keel: { error: d.output.code } } } : {}),
          }),
        ];
      }
      case 'tool/approval':
        this.interrupts.set(e.data.toolCallId, {
          id: e.data.toolCallId,
          reason: 'approval',
          message: `Approve the call of ${e.data.toolName}?`,
          toolCallId: e.data.toolCallId,
          responseSchema: APPROVAL_ANSWER_SCHEMA,
          metadata: { keel: { runId: this.o.keelRunId, toolName: e.data.toolName, input: e.data.input } },
        });
        return [];
      case 'user/question':
        this.interrupts.set(e.data.toolCallId, {
          id: e.data.toolCallId,
          reason: 'question',
          message: questionsOf(e.data.input)
            .map((q) => q.question)
            .join('\n'),
          toolCallId: e.data.toolCallId,
          responseSchema: questionSchema(e.data.input),
          metadata: { keel: { runId: this.o.keelRunId, toolName: e.data.toolName, input: e.data.input } },
        });
        return [];
      case 'tool/decision':
      case 'user/answer':
        this.interrupts.delete(e.data.toolCallId);
        return [];
      case 'wait/resolved':
        this.clientPending.delete(e.data.toolCallId);
        return [];
      case 'turn/end':
        if (e.data.error) this.error = e.data.error.message;
        for (const p of e.data.pending ?? []) {
          if (p.wait?.kind === 'signal' && isClientToolSignal(p.wait.name)) {
            this.clientCalls.add(p.toolCallId);
            this.clientPending.add(p.toolCallId);
          }
        }
        return [];
      case 'step/end': {
        const out = [...this.ensureRunning(), ...this.abandonIfOpen(this.current)];
        if (this.step?.shown) out.push(this.next({ type: EventType.STEP_FINISHED, stepName: `step ${this.step.n}` }));
        this.step = undefined;
        return out;
      }
      case 'user/message': {
        // The message that started the run is the client's own; one steered into it joins it here.
        if (e.data.via !== 'steer') return [];
        const m = e.data.message;
        const text = m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
        return [
          ...this.ensureRunning(),
          this.next({ type: EventType.TEXT_MESSAGE_START, messageId: m.id, role: 'user' }),
          ...(text !== '' ? [this.next({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: m.id, delta: text })] : []),
          this.next({ type: EventType.TEXT_MESSAGE_END, messageId: m.id }),
        ];
      }
      case 'run/interrupted':
        return this.interrupted(e as SessionEvent<'run/interrupted'>);
      case 'run/status':
        return this.status(e as SessionEvent<'run/status'>);
      default:
        return [];
    }
  }

  private abandonIfOpen(c: Call | undefined): AguiOut[] {
    return c?.state === 'open' ? this.abandon(c) : [];
  }

  private message(e: SessionEvent<'assistant/message'>): AguiOut[] {
    const m = e.data.message;
    const out: AguiOut[] = [];
    let c = this.calls.get(m.id);
    if (!c) {
      out.push(...this.begin(m.id, true));
      c = this.current;
    }
    c.inLog = true;
    if (c.state !== 'open') return out;
    this.usage.calls++;
    this.usage.input += e.data.usage.inputTokens;
    this.usage.output += e.data.usage.outputTokens;
    this.usage.reasoning += e.data.usage.reasoningTokens;
    this.usage.cached += e.data.usage.cachedInputTokens;
    const full = m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    // The text the deltas did not bring (a replay, or ones that never came here), at once.
    if (full.length > c.text.length && full.startsWith(c.text)) out.push(...this.text(c, full.slice(c.text.length)));
    if (c.started)
      out.push(
        this.at(position(c.i, c.text.length, 1), { type: EventType.TEXT_MESSAGE_END, messageId: this.msgId(c) }),
      );
    c.state = 'done';
    for (const p of m.content) {
      if (p.type !== 'tool-call') continue;
      out.push(
        this.next({
          type: EventType.TOOL_CALL_START,
          toolCallId: p.toolCallId,
          toolCallName: p.toolName,
          parentMessageId: this.msgId(c),
        }),
        this.next({ type: EventType.TOOL_CALL_ARGS, toolCallId: p.toolCallId, delta: JSON.stringify(p.input) }),
        this.next({ type: EventType.TOOL_CALL_END, toolCallId: p.toolCallId }),
      );
    }
    return out;
  }

  /**
   * The run was recovered after its worker was lost. The model call it had in flight left nothing
   * in the log: a stream that saw its text ends it (and its step, which the call is made again in);
   * a stream rebuilt from the log reserves its ordinal, ending for a reconnecting client what it
   * had open there. (Two calls lost in one step, a retry's, are beyond this: rare, and their
   * numbers may then differ between the two.)
   */
  private interrupted(e: SessionEvent<'run/interrupted'>): AguiOut[] {
    const out = this.ensureRunning();
    const cur = this.current;
    let c: Call;
    if (cur.state === 'open' && !cur.inLog) {
      c = cur;
      out.push(...this.abandon(c));
      if (this.step && !this.step.call.inLog) {
        if (this.step.shown) out.push(this.stepEnd(c, this.step.n));
        this.step = undefined;
      }
    } else {
      out.push(...this.abandonIfOpen(cur));
      if (this.ordinal >= MAX_ORDINALS) throw new Error('the run has more model calls than an AG-UI stream can number');
      c = { i: ++this.ordinal, messageId: undefined, state: 'abandoned', inLog: true, text: '', started: false, j: 2 };
      this.current = c;
      // Ends for a client that had them open: the lost call's text, and the step it would have started.
      if (this.after >= position(c.i, 0, 1))
        out.push(this.at(later(c.i, 0), { type: EventType.TEXT_MESSAGE_END, messageId: this.msgId(c) }));
      if (!this.step) {
        const n = ++this.steps;
        if (this.after >= position(c.i, 0, 0)) out.push(this.stepEnd(c, n));
      }
    }
    out.push(this.next(this.custom('keel.interrupted', { reason: e.data.reason, step: e.data.step })));
    return out;
  }

  private stepEnd(c: Call, n: number): AguiOut {
    return this.at(later(c.i, 1), { type: EventType.STEP_FINISHED, stepName: `step ${n}` });
  }

  private status(e: SessionEvent<'run/status'>): AguiOut[] {
    const { from, to } = e.data;
    const asksClient = ASKS_CLIENT.includes(to) || (to === 'waiting_for_signal' && this.clientPending.size > 0);
    // From one wait for the client to another: nothing to tell when the last AG-UI run told it all
    // (an approval's questions, say); else (a client tool's call after an approval) a run says it.
    const waitsFor = ASKS_CLIENT.includes(to) ? [...this.interrupts.keys()] : [...this.clientPending];
    if (!this.running && asksClient && waitsFor.every((id) => this.announced.has(id))) return [];
    const out = [
      ...this.ensureRunning(),
      this.next(
        this.custom('keel.status', { from, to, ...(e.data.reason !== undefined ? { reason: e.data.reason } : {}) }),
      ),
    ];
    if (!isTerminal(to) && !asksClient) return out;
    // The AG-UI run ends: the step under way is finished with it (and started again with the next).
    if (this.step?.shown) {
      this.step.shown = false;
      out.push(this.next({ type: EventType.STEP_FINISHED, stepName: `step ${this.step.n}` }));
    }
    this.running = false;
    if (isTerminal(to)) this.over = true;
    if (to === 'failed' || to === 'timed_out') {
      const msg = (e.data.error as { message?: unknown } | undefined)?.message;
      out.push(
        this.next({
          type: EventType.RUN_ERROR,
          message:
            typeof msg === 'string' ? msg : (this.error ?? `the run ${to === 'failed' ? 'failed' : 'timed out'}`),
          code: to,
          ...this.usageField(),
        }),
      );
      return out;
    }
    let outcome: RunFinishedOutcome | undefined;
    if (to === 'cancelled') outcome = { type: 'cancelled' };
    else if (to !== 'completed') {
      // The client answers what it is told here: the approvals and questions, or its tools' calls.
      const interrupts = [...this.interrupts.values()];
      if (interrupts.length > 0) outcome = { type: 'interrupt', interrupts };
      else if (this.clientPending.size > 0) outcome = { type: 'success', pendingToolCallIds: [...this.clientPending] };
      this.announced = new Set(waitsFor);
    }
    out.push(
      this.next({
        type: EventType.RUN_FINISHED,
        threadId: this.o.threadId,
        runId: this.o.runId,
        ...(outcome ? { outcome } : {}),
        ...this.usageField(),
      }),
    );
    return out;
  }

  /** This AG-UI run's tokens (its own model calls only, as the protocol counts). */
  private usageField(): { usage?: TokenUsage[] } {
    const u = this.usage;
    if (u.calls === 0) return {};
    return {
      usage: [
        {
          ...(this.model ? { provider: this.model.provider, model: this.model.modelId } : {}),
          inputTokens: u.input,
          outputTokens: u.output,
          totalTokens: u.input + u.output,
          reasoningTokens: u.reasoning,
          cachedInputTokens: u.cached,
        },
      ],
    };
  }

  /** What the client lacks: events after `after`, text it had in part sliced. */
  private keep(events: Array<AguiOut & { from?: number }>): AguiOut[] {
    const out: AguiOut[] = [];
    for (const { id, event, from } of events) {
      if (id <= this.after) continue;
      if (from !== undefined && event.type === EventType.TEXT_MESSAGE_CONTENT)
        out.push({ id, event: { ...event, delta: unsentText(this.after, ordinalOf(id), from, event.delta) } });
      else out.push({ id, event });
    }
    return out;
  }
}
