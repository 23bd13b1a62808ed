/**
 * A run's feed as an OpenAI Responses event stream (ADR-0038): an encoder of the one feed, never a
 * second one. Every event's `sequence_number` says where it stands in the run's output, the same
 * whether it was made live from deltas or rebuilt from the log:
 *
 *   sequence_number = i · 2^30 + chars · 2^4 + k
 *
 * `i` is the ordinal of the assistant message with text (0 before the first, the last plus one for
 * the run's end), `chars` how much of that message's text the client has after the event, and `k`
 * the event's index among those at that point. A resume (`starting_after=N`) encodes the run again
 * from its start and sends only what comes after N, slicing the text a client had in part: no gap,
 * no duplicate, whether the message was still streaming or became durable meanwhile.
 */
import type { PendingCall } from '../../../core/index.ts';
import type { FeedItem, SessionEvent } from '../../../session/index.ts';
import type { RunStatus } from '../../../store/index.ts';
import { isTerminal } from '../../../runs/lifecycle/run-status.ts';
import { handOffItem, questionText } from './response-object.ts';
import { handOffOf } from './response-segments.ts';

const I = 2 ** 30;
const C = 2 ** 4;
/** Characters a message may have before its numbers would overflow the message ordinal. */
export const MAX_CHARS = 2 ** 26 - 1;
/** Messages with text a run may have before its numbers would pass 2^53. */
export const MAX_MESSAGES = 2 ** 23 - 1;

export const sequenceNumber = (i: number, chars: number, k: number): number => i * I + chars * C + k;

export type StreamEvent = { type: string; sequence_number: number; [key: string]: unknown };

interface Open {
  messageId: string;
  itemId: string;
  outputIndex: number;
  text: string;
}

export class ResponseStreamEncoder {
  private ordinal = 0;
  private outputIndex = 0;
  private open: Open | undefined;
  /** Messages whose items this stream has completed (their durable event, once). */
  private readonly done = new Set<string>();
  private readonly after: number;

  /** `after`: the last sequence number the client has (-1: none). */
  constructor(after = -1) {
    this.after = after;
  }

  /** The stream's first events (the response object as it stands). */
  start(response: unknown): StreamEvent[] {
    return this.keep([
      { type: 'response.created', sequence_number: sequenceNumber(0, 0, 0), response },
      { type: 'response.in_progress', sequence_number: sequenceNumber(0, 0, 1), response },
    ]);
  }

  /** The events of one feed item of the run. */
  item(item: FeedItem): StreamEvent[] {
    if (item.kind === 'delta') {
      const d = item.delta;
      if (d.type !== 'text/delta' || d.delta === '') return [];
      return this.text(d.messageId, d.delta);
    }
    const e = item.event;
    const handed = handOffOf(e);
    if (handed.length > 0) return this.keep(handed.flatMap((p) => this.handOff(p)));
    if (e.type !== 'assistant/message') return [];
    return this.assistantMessage(e as SessionEvent<'assistant/message'>);
  }

  /** Whether an event ends the stream: the run's end, or a hand-off to the client (response-segments.ts). */
  static ends(e: SessionEvent, runId: string): boolean {
    if (e.runId !== runId) return false;
    return (e.type === 'run/status' && isTerminal(e.data.to as RunStatus)) || handOffOf(e).length > 0;
  }

  /** The items of a call handed to the client: a function call, an approval request, or the question as a message. */
  private handOff(p: PendingCall): StreamEvent[] {
    if (p.kind === 'input') {
      const id = `q_${p.toolCallId}`;
      return [...this.begin(id), ...this.message(id, questionText(p.input), false)];
    }
    if (this.ordinal >= MAX_MESSAGES) throw new Error('the run has more messages than a Responses stream can number');
    this.ordinal++;
    const outputIndex = this.outputIndex++;
    const item = handOffItem(p);
    const at = (k: number) => sequenceNumber(this.ordinal, 0, k);
    if (item.type !== 'function_call')
      return [
        { type: 'response.output_item.added', sequence_number: at(0), output_index: outputIndex, item },
        { type: 'response.output_item.done', sequence_number: at(1), output_index: outputIndex, item },
      ];
    const base = { output_index: outputIndex, item_id: item.id };
    return [
      {
        type: 'response.output_item.added',
        sequence_number: at(0),
        output_index: outputIndex,
        item: { ...item, arguments: '', status: 'in_progress' },
      },
      { type: 'response.function_call_arguments.delta', sequence_number: at(1), ...base, delta: item.arguments },
      {
        type: 'response.function_call_arguments.done',
        sequence_number: at(2),
        ...base,
        name: item.name,
        arguments: item.arguments,
      },
      { type: 'response.output_item.done', sequence_number: at(3), output_index: outputIndex, item },
    ];
  }

  /** The stream's last event, for the run's end. */
  end(status: RunStatus, response: unknown): StreamEvent[] {
    const type =
      status === 'completed'
        ? 'response.completed'
        : status === 'cancelled'
          ? 'response.incomplete'
          : 'response.failed';
    return this.keep([{ type, sequence_number: sequenceNumber(this.ordinal + 1, 0, 0), response }]);
  }

  private begin(messageId: string): StreamEvent[] {
    if (this.ordinal >= MAX_MESSAGES) throw new Error('the run has more messages than a Responses stream can number');
    this.ordinal++;
    const o: Open = { messageId, itemId: `msg_${messageId}`, outputIndex: this.outputIndex++, text: '' };
    this.open = o;
    return [
      {
        type: 'response.output_item.added',
        sequence_number: sequenceNumber(this.ordinal, 0, 0),
        output_index: o.outputIndex,
        item: { type: 'message', id: o.itemId, status: 'in_progress', role: 'assistant', content: [] },
      },
      {
        type: 'response.content_part.added',
        sequence_number: sequenceNumber(this.ordinal, 0, 1),
        item_id: o.itemId,
        output_index: o.outputIndex,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      },
    ];
  }

  private text(messageId: string, delta: string): StreamEvent[] {
    if (this.done.has(messageId)) return [];
    const out = this.open?.messageId === messageId ? [] : this.begin(messageId);
    const o = this.open!;
    const from = o.text.length;
    o.text += delta;
    if (o.text.length > MAX_CHARS) throw new Error('a message is longer than a Responses stream can number');
    out.push(this.deltaEvent(o, from, delta));
    return this.keep(out);
  }

  private deltaEvent(o: Open, from: number, delta: string): StreamEvent {
    return {
      type: 'response.output_text.delta',
      sequence_number: sequenceNumber(this.ordinal, from + delta.length, 0),
      item_id: o.itemId,
      output_index: o.outputIndex,
      content_index: 0,
      delta,
      logprobs: [],
      // Where the delta starts in the message: what a resume slices by (not sent).
      _from: from,
    };
  }

  private assistantMessage(e: SessionEvent<'assistant/message'>): StreamEvent[] {
    const full = e.data.message.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    return this.message(e.data.message.id, full);
  }

  /** A message's text as it stands, whole: the rest of it and its `done` events (kept: only what the client lacks). */
  private message(id: string, full: string, keep = true): StreamEvent[] {
    if (full === '' || this.done.has(id)) return [];
    const out = this.open?.messageId === id ? [] : this.begin(id);
    const o = this.open!;
    // The deltas not seen (a replay, or ones that never came here): the rest of the text at once.
    if (full.length > o.text.length && full.startsWith(o.text)) {
      const rest = full.slice(o.text.length);
      out.push(this.deltaEvent(o, o.text.length, rest));
    }
    o.text = full;
    const n = full.length;
    const part = { type: 'output_text', text: full, annotations: [] };
    out.push(
      {
        type: 'response.output_text.done',
        sequence_number: sequenceNumber(this.ordinal, n, 1),
        item_id: o.itemId,
        output_index: o.outputIndex,
        content_index: 0,
        text: full,
        logprobs: [],
      },
      {
        type: 'response.content_part.done',
        sequence_number: sequenceNumber(this.ordinal, n, 2),
        item_id: o.itemId,
        output_index: o.outputIndex,
        content_index: 0,
        part,
      },
      {
        type: 'response.output_item.done',
        sequence_number: sequenceNumber(this.ordinal, n, 3),
        output_index: o.outputIndex,
        item: { type: 'message', id: o.itemId, status: 'completed', role: 'assistant', content: [part] },
      },
    );
    this.done.add(id);
    this.open = undefined;
    return keep ? this.keep(out) : out;
  }

  /** What the client does not have yet: events after `after`, a text delta it had in part sliced. */
  private keep(events: StreamEvent[]): StreamEvent[] {
    const out: StreamEvent[] = [];
    for (const e of events) {
      const { _from, ...event } = e as StreamEvent & { _from?: number };
      if (e.sequence_number <= this.after) continue;
      if (_from !== undefined) {
        // The client has this message up to `had` characters (when its last number was one of this message's).
        const had =
          Math.floor(this.after / I) === Math.floor(e.sequence_number / I) ? Math.floor((this.after % I) / C) : 0;
        if (had > _from) event.delta = (event.delta as string).slice(had - _from);
      }
      out.push(event as StreamEvent);
    }
    return out;
  }
}
