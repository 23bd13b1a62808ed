/**
 * The AI SDK UI message stream's chunks (v1, as `ai` v7's `useChat` reads them) of one run: its
 * durable events and live deltas, as a feed yields them, translated in order. A wire format of its
 * own, used by the chat routes (routes/chat.ts).
 */
import type { UIMessageChunk } from 'ai';
import type { DeltaEvent } from '../core/index.ts';
import type { AssistantMessage, ReasoningPart, TextPart, ToolOutput, UserMessage } from '../model/index.ts';
import type { SessionEvent } from '../session/index.ts';
import type { RunStatus } from '../store/index.ts';

export type Chunk = UIMessageChunk;
type Streamed = { kind: 'text' | 'reasoning'; id: string; text: string };

const isBlank = (p: TextPart | ReasoningPart) => p.text === '';

function uiParts(
  m: UserMessage,
): Array<{ type: 'text'; text: string } | { type: 'file'; mediaType: string; url: string; filename?: string }> {
  return m.content.map((p) =>
    p.type === 'text'
      ? { type: 'text' as const, text: p.text }
      : {
          type: 'file' as const,
          mediaType: p.mediaType,
          url: /^https?:\/\//.test(p.data) ? p.data : `data:${p.mediaType};base64,${p.data}`,
          ...(p.filename ? { filename: p.filename } : {}),
        },
  );
}

/**
 * Translates one run's durable events and live deltas into UI message chunks, in order. Deltas
 * stream text as it is generated; the durable `assistant/message` then completes what they
 * started (or, when they were not seen, e.g. in a replay, sends the message whole).
 */
export class UiChunkMapper {
  /** The run's status as of the last `run/status` event seen (or as given). */
  status: RunStatus | undefined;
  private readonly runId: string;
  private readonly sessionId: string;
  private error: string | undefined;
  /** The model message being streamed: its parts as the deltas made them, and its tool inputs. */
  private cur: { messageId: string; parts: Streamed[]; open: Streamed | undefined; tools: Set<string> } | undefined;
  /** Messages whose streamed parts were ended (another message started) before their durable version came. */
  private readonly ended = new Map<string, Streamed[]>();
  private readonly finished = new Set<string>();
  private stepOpen = false;
  /** The open step was opened by the deltas of its message, before its step/start was published. */
  private stepOpenedByDeltas = false;

  constructor(o: { runId: string; sessionId: string; status?: RunStatus }) {
    this.runId = o.runId;
    this.sessionId = o.sessionId;
    this.status = o.status;
  }

  start(messageId: string): Chunk[] {
    return [{ type: 'start', messageId, messageMetadata: { runId: this.runId, sessionId: this.sessionId } }];
  }

  delta(d: DeltaEvent): Chunk[] {
    if (this.finished.has(d.messageId)) return [];
    const out: Chunk[] = [];
    // A step's durable events are published when it commits, after the deltas of its message
    // (ADR-0008): the deltas open the step.
    if (!this.stepOpen) {
      this.stepOpen = true;
      this.stepOpenedByDeltas = true;
      out.push({ type: 'start-step' });
    }
    if (this.cur?.messageId !== d.messageId) {
      if (this.cur) this.ended.set(this.cur.messageId, this.cur.parts);
      out.push(...this.closeParts());
      this.cur = { messageId: d.messageId, parts: [], open: undefined, tools: new Set() };
    }
    const cur = this.cur!;
    if (d.type === 'tool-input/delta') {
      cur.open = undefined;
      if (!cur.tools.has(d.toolCallId)) {
        cur.tools.add(d.toolCallId);
        out.push({ type: 'tool-input-start', toolCallId: d.toolCallId, toolName: d.toolName });
      }
      out.push({ type: 'tool-input-delta', toolCallId: d.toolCallId, inputTextDelta: d.delta });
      return out;
    }
    const kind = d.type === 'text/delta' ? 'text' : 'reasoning';
    let part = cur.open;
    if (part?.kind !== kind) {
      part = { kind, id: `${d.messageId}:${cur.parts.length}`, text: '' };
      cur.parts.push(part);
      cur.open = part;
      out.push(kind === 'text' ? { type: 'text-start', id: part.id } : { type: 'reasoning-start', id: part.id });
    }
    part.text += d.delta;
    out.push(
      kind === 'text'
        ? { type: 'text-delta', id: part.id, delta: d.delta }
        : { type: 'reasoning-delta', id: part.id, delta: d.delta },
    );
    return out;
  }

  event(e: SessionEvent): Chunk[] {
    switch (e.type) {
      case 'step/start':
        if (this.stepOpenedByDeltas) {
          // Its deltas opened it already.
          this.stepOpenedByDeltas = false;
          return [];
        }
        this.stepOpen = true;
        return [...this.closeParts(), { type: 'start-step' }];
      case 'step/end':
        this.stepOpen = false;
        this.stepOpenedByDeltas = false;
        return [...this.closeParts(), { type: 'finish-step' }];
      case 'assistant/message':
        return this.assistant(e.data.message);
      case 'model/retry':
        this.finished.add(e.data.abandonedMessageId);
        this.ended.delete(e.data.abandonedMessageId);
        return this.discard();
      case 'model/error':
        // A retry after compaction streams the step again; otherwise the step ends failed.
        return e.data.willCompact ? this.discard() : [];
      case 'run/interrupted':
        // The worker was lost mid-call: the call is made again when the run is resumed.
        return this.discard();
      case 'tool/approval':
        return [{ type: 'tool-approval-request', approvalId: e.data.toolCallId, toolCallId: e.data.toolCallId }];
      case 'tool/decision':
        return [
          {
            type: 'tool-approval-response',
            approvalId: e.data.toolCallId,
            approved: e.data.approved,
            ...(e.data.reason !== undefined ? { reason: e.data.reason } : {}),
          },
        ];
      case 'tool/result':
        return [this.result(e.data.toolCallId, e.data.output)];
      case 'user/message':
        // The trigger message is the client's own; steering joins the run as it runs.
        return e.data.via === 'steer'
          ? [{ type: 'steering-message', id: e.data.message.id, parts: uiParts(e.data.message) }]
          : [];
      case 'turn/end':
        if (e.data.error) this.error = e.data.error.message;
        return [];
      case 'run/status': {
        this.status = e.data.to;
        const msg = (e.data.error as { message?: unknown } | undefined)?.message;
        if (typeof msg === 'string') this.error = msg;
        return [];
      }
      default:
        return [];
    }
  }

  /** The closing chunks once the run has settled. */
  finish(): Chunk[] {
    const out = this.closeParts();
    if (this.stepOpen) out.push({ type: 'finish-step' });
    this.stepOpen = false;
    const metadata = { runId: this.runId, sessionId: this.sessionId, status: this.status };
    switch (this.status) {
      case 'failed':
      case 'timed_out':
        out.push({
          type: 'error',
          errorText: this.error ?? (this.status === 'failed' ? 'the run failed' : 'the run timed out'),
        });
        out.push({ type: 'finish', finishReason: 'error', messageMetadata: metadata });
        break;
      case 'completed':
        out.push({ type: 'finish', finishReason: 'stop', messageMetadata: metadata });
        break;
      case 'waiting_approval':
      case 'waiting_for_user':
        out.push({ type: 'finish', finishReason: 'tool-calls', messageMetadata: metadata });
        break;
      default:
        out.push({ type: 'finish', finishReason: 'other', messageMetadata: metadata });
    }
    return out;
  }

  /** Ends the parts the deltas opened (their message will not complete them). */
  private closeParts(): Chunk[] {
    const cur = this.cur;
    this.cur = undefined;
    if (!cur) return [];
    return cur.parts.map((p): Chunk =>
      p.kind === 'text' ? { type: 'text-end', id: p.id } : { type: 'reasoning-end', id: p.id },
    );
  }

  /** Takes back what the deltas of an abandoned model call added to the step. */
  private discard(): Chunk[] {
    const cur = this.cur;
    this.cur = undefined;
    return cur && (cur.parts.length > 0 || cur.tools.size > 0) ? [{ type: 'reset-step' }] : [];
  }

  private assistant(m: AssistantMessage): Chunk[] {
    const out: Chunk[] = [];
    const cur = this.cur?.messageId === m.id ? this.cur : undefined;
    const ended = cur ? undefined : this.ended.get(m.id);
    this.ended.delete(m.id);
    this.finished.add(m.id);
    const finals = m.content.filter((p): p is TextPart | ReasoningPart => p.type !== 'tool-call' && !isBlank(p));
    if (ended) {
      // Its parts streamed and were ended when the next message started: send only what they lacked, as new parts.
      const covered =
        ended.length <= finals.length && ended.every((s, i) => s.kind === finals[i]!.type && finals[i]!.text === s.text)
          ? ended.length
          : 0;
      return [...wholeParts(m, finals, covered, `${m.id}:final`)];
    }
    if (!cur) out.push(...this.closeParts());
    this.cur = undefined;
    let streamed = cur?.parts ?? [];
    const matches =
      streamed.length <= finals.length &&
      streamed.every((s, i) => s.kind === finals[i]!.type && finals[i]!.text.startsWith(s.text));
    if (!matches) {
      // The deltas do not add up to the message (should not happen): send the message instead.
      out.push({ type: 'reset-step' });
      streamed = [];
    }
    streamed.forEach((s, i) => {
      const rest = finals[i]!.text.slice(s.text.length);
      if (s.kind === 'text')
        out.push(...(rest ? [{ type: 'text-delta' as const, id: s.id, delta: rest }] : []), {
          type: 'text-end',
          id: s.id,
        });
      else
        out.push(...(rest ? [{ type: 'reasoning-delta' as const, id: s.id, delta: rest }] : []), {
          type: 'reasoning-end',
          id: s.id,
        });
    });
    out.push(...wholeParts(m, finals, streamed.length, m.id));
    return out;
  }

  private result(toolCallId: string, output: ToolOutput): Chunk {
    if (output.type !== 'error') return { type: 'tool-output-available', toolCallId, output: output.value };
    if (output.code === 'denied') return { type: 'tool-output-denied', toolCallId };
    return { type: 'tool-output-error', toolCallId, errorText: output.message };
  }
}

/** The message's parts from `from` on, each sent whole (start, one delta, end), then its tool calls. */
function* wholeParts(
  m: AssistantMessage,
  finals: ReadonlyArray<TextPart | ReasoningPart>,
  from: number,
  idPrefix: string,
): Generator<Chunk> {
  for (let i = from; i < finals.length; i++) {
    const p = finals[i]!;
    const id = `${idPrefix}:${i}`;
    if (p.type === 'text')
      yield* [
        { type: 'text-start', id },
        { type: 'text-delta', id, delta: p.text },
        { type: 'text-end', id },
      ] as const;
    else
      yield* [
        { type: 'reasoning-start', id },
        { type: 'reasoning-delta', id, delta: p.text },
        { type: 'reasoning-end', id },
      ] as const;
  }
  for (const p of m.content) {
    if (p.type === 'tool-call')
      yield { type: 'tool-input-available', toolCallId: p.toolCallId, toolName: p.toolName, input: p.input };
  }
}
