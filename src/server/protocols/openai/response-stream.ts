/**
 * A run's feed as an OpenAI Responses event stream (ADR-0038): an encoder of the one feed, never a
 * second one. Every event's `sequence_number` says where it stands in the run's output, the same
 * whether it was made live from deltas or rebuilt from the log:
 *
 *   sequence_number = i · 2^30 + chars · 2^4 + k
 *
 * `i` is the ordinal of the model call (0 before the first; then each item handed to the client;
 * the last plus one for the end), `chars` how much of that call's text the client has after the
 * event, and `k` the event's index among those at that point (output-position.ts). A call takes
 * its ordinal at its first text delta (live) or its request header (in the log), so a call without
 * text, or one abandoned (a retry, a failed call: its item ends `incomplete` where the stream had
 * begun it), numbers the same live and rebuilt. A call lost with its worker leaves nothing in the
 * log: its ordinal is reserved when the run is recovered (`run/interrupted`). A resume
 * (`starting_after=N`) encodes the run again from its start and sends only what comes after N,
 * slicing the text a client had in part: no gap, no duplicate, whether the message was still
 * streaming or became durable meanwhile.
 */
import type { PendingCall } from '../../../core/index.ts';
import type { FeedItem, SessionEvent } from '../../../session/index.ts';
import type { RunStatus } from '../../../store/index.ts';
import { isTerminal } from '../../../runs/lifecycle/run-status.ts';
import { handOffItem, questionText } from './response-object.ts';
import { handOffOf } from './response-segments.ts';
import { MAX_CHARS, MAX_ORDINALS, ordinalOf, position as sequenceNumber, unsentText } from '../output-position.ts';

export type StreamEvent = { type: string; sequence_number: number; [key: string]: unknown };

/** A model call of the run, numbered by its ordinal; its message item once it has text. */
interface Call {
  i: number;
  messageId: string;
  /** Its request header was seen: it is in the log (else only its deltas were, so far). */
  inLog: boolean;
  item?: { itemId: string; outputIndex: number; text: string };
  /** Its item ended (its message, or abandoned): nothing more of it is sent. */
  done: boolean;
}

export class ResponseStreamEncoder {
  private ordinal = 0;
  private outputIndex = 0;
  private readonly calls = new Map<string, Call>();
  private current: Call | undefined;
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
      // Another call streams while one is open: that one was given up (a retry), its item ends here.
      const prev = this.current;
      const out = prev && !prev.done && !this.calls.has(d.messageId) ? this.abandon(prev) : [];
      return this.keep([...out, ...this.text(this.call(d.messageId, false), d.delta)]);
    }
    const e = item.event;
    const handed = handOffOf(e);
    if (handed.length > 0) return this.keep(handed.flatMap((p) => this.handOff(p)));
    switch (e.type) {
      case 'request/header':
        this.call(e.data.messageId, true);
        return [];
      case 'assistant/message': {
        const m = (e as SessionEvent<'assistant/message'>).data.message;
        const full = m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
        return this.keep(this.whole(this.call(m.id, true), full));
      }
      case 'model/retry':
        return this.keep(this.abandon(this.calls.get(e.data.abandonedMessageId)));
      case 'model/error':
        return this.keep(this.abandon(this.current));
      case 'run/interrupted': {
        // The call in flight when the worker was lost: ended where this stream saw it, else its ordinal reserved.
        const cur = this.current;
        if (cur && !cur.done && !cur.inLog) return this.keep(this.abandon(cur));
        this.current = this.newCall(`lost:${e.id}`, true);
        this.current.done = true;
        return [];
      }
      default:
        return [];
    }
  }

  /** Whether an event ends the stream: the run's end, or a hand-off to the client (response-segments.ts). */
  static ends(e: SessionEvent, runId: string): boolean {
    if (e.runId !== runId) return false;
    return (e.type === 'run/status' && isTerminal(e.data.to as RunStatus)) || handOffOf(e).length > 0;
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

  private newCall(messageId: string, inLog: boolean): Call {
    if (this.ordinal >= MAX_ORDINALS)
      throw new Error('the run has more model calls than a Responses stream can number');
    const c: Call = { i: ++this.ordinal, messageId, inLog, done: false };
    this.calls.set(messageId, c);
    this.current = c;
    return c;
  }

  /** The call of a message id, numbered at the first sight of it. */
  private call(messageId: string, inLog: boolean): Call {
    const c = this.calls.get(messageId) ?? this.newCall(messageId, inLog);
    if (inLog) c.inLog = true;
    return c;
  }

  /** The items of a call handed to the client: a function call, an approval request, or the question as a message. */
  private handOff(p: PendingCall): StreamEvent[] {
    const c = this.newCall(`q_${p.toolCallId}`, true);
    if (p.kind === 'input') return this.whole(c, questionText(p.input));
    c.done = true;
    const outputIndex = this.outputIndex++;
    const item = handOffItem(p);
    const at = (k: number) => sequenceNumber(c.i, 0, k);
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

  /** The call's message item begins (at its first text). */
  private begin(c: Call): StreamEvent[] {
    const item = { itemId: `msg_${c.messageId}`, outputIndex: this.outputIndex++, text: '' };
    c.item = item;
    return [
      {
        type: 'response.output_item.added',
        sequence_number: sequenceNumber(c.i, 0, 0),
        output_index: item.outputIndex,
        item: { type: 'message', id: item.itemId, status: 'in_progress', role: 'assistant', content: [] },
      },
      {
        type: 'response.content_part.added',
        sequence_number: sequenceNumber(c.i, 0, 1),
        item_id: item.itemId,
        output_index: item.outputIndex,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      },
    ];
  }

  private text(c: Call, delta: string): StreamEvent[] {
    if (c.done) return [];
    const out = c.item ? [] : this.begin(c);
    const item = c.item!;
    const from = item.text.length;
    item.text += delta;
    if (item.text.length > MAX_CHARS) throw new Error('a message is longer than a Responses stream can number');
    out.push(this.deltaEvent(c, from, delta));
    return out;
  }

  private deltaEvent(c: Call, from: number, delta: string): StreamEvent {
    return {
      type: 'response.output_text.delta',
      sequence_number: sequenceNumber(c.i, from + delta.length, 0),
      item_id: c.item!.itemId,
      output_index: c.item!.outputIndex,
      content_index: 0,
      delta,
      logprobs: [],
      // Where the delta starts in the message: what a resume slices by (not sent).
      _from: from,
    };
  }

  /** A call's message as it stands, whole: the rest of its text and its `done` events. */
  private whole(c: Call, full: string): StreamEvent[] {
    if (c.done) return [];
    if (full === '' && !c.item) {
      c.done = true;
      return [];
    }
    const out = c.item ? [] : this.begin(c);
    const item = c.item!;
    // The deltas not seen (a replay, or ones that never came here): the rest of the text at once.
    if (full.length > item.text.length && full.startsWith(item.text))
      out.push(this.deltaEvent(c, item.text.length, full.slice(item.text.length)));
    item.text = full;
    out.push(...this.close(c, 'completed'));
    return out;
  }

  /** A call given up (retried, failed, lost): its item, if this stream began one, ends `incomplete`. */
  private abandon(c: Call | undefined): StreamEvent[] {
    if (!c || c.done) return [];
    if (!c.item) {
      c.done = true;
      return [];
    }
    return this.close(c, 'incomplete');
  }

  private close(c: Call, status: 'completed' | 'incomplete'): StreamEvent[] {
    const item = c.item!;
    const n = item.text.length;
    const part = { type: 'output_text', text: item.text, annotations: [] };
    c.done = true;
    return [
      {
        type: 'response.output_text.done',
        sequence_number: sequenceNumber(c.i, n, 1),
        item_id: item.itemId,
        output_index: item.outputIndex,
        content_index: 0,
        text: item.text,
        logprobs: [],
      },
      {
        type: 'response.content_part.done',
        sequence_number: sequenceNumber(c.i, n, 2),
        item_id: item.itemId,
        output_index: item.outputIndex,
        content_index: 0,
        part,
      },
      {
        type: 'response.output_item.done',
        sequence_number: sequenceNumber(c.i, n, 3),
        output_index: item.outputIndex,
        item: { type: 'message', id: item.itemId, status, role: 'assistant', content: [part] },
      },
    ];
  }

  /** What the client does not have yet: events after `after`, a text delta it had in part sliced. */
  private keep(events: StreamEvent[]): StreamEvent[] {
    const out: StreamEvent[] = [];
    for (const e of events) {
      const { _from, ...event } = e as StreamEvent & { _from?: number };
      if (e.sequence_number <= this.after) continue;
      // The client may have had part of this message's text (its last number was one of this message's).
      if (_from !== undefined)
        event.delta = unsentText(this.after, ordinalOf(e.sequence_number), _from, event.delta as string);
      out.push(event as StreamEvent);
    }
    return out;
  }
}
