/**
 * The Responses stream encoder on its own: a model call is numbered at its first text delta (live)
 * or its request header (the log), so a retried call, a call without text and a call lost with its
 * worker number the same live and rebuilt; a client that resumes after any live event, from the
 * live feed or the log, gets exactly the rest of the text.
 */
import { describe, expect, it } from 'vitest';
import type { FeedItem } from '../../src/session/index.ts';
import { ResponseStreamEncoder, type StreamEvent } from '../../src/server/protocols/openai/response-stream.ts';
import { Script } from '../support/feed-script.ts';

const encode = (items: FeedItem[], after = -1): StreamEvent[] => {
  const enc = new ResponseStreamEncoder(after);
  return [...enc.start({}), ...items.flatMap((i) => enc.item(i)), ...enc.end('completed', {})];
};
const rebuilt = (items: FeedItem[]) => items.filter((i) => i.kind === 'event');
const textOf = (events: StreamEvent[], itemId?: string) =>
  events
    .filter((e) => e.type === 'response.output_text.delta' && (itemId === undefined || e.item_id === itemId))
    .map((e) => e.delta as string)
    .join('');
/** The text of the messages that were completed, by item. */
const completed = (events: StreamEvent[]) =>
  events.flatMap((e) =>
    e.type === 'response.output_item.done' && (e.item as { status: string }).status === 'completed'
      ? [(e.item as { id: string }).id]
      : [],
  );

/** After each live event, from the live feed and from the log: the rest, with the text a client lacks. */
function expectResumable(items: FeedItem[]) {
  const live = encode(items);
  // Numbers only grow, in the order a client gets the events.
  const numbers = live.map((e) => e.sequence_number);
  expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
  expect(new Set(numbers).size).toBe(numbers.length);
  for (let n = 0; n < live.length; n++) {
    const after = live[n]!.sequence_number;
    const had = live.slice(0, n + 1);
    for (const feed of [items, rebuilt(items)]) {
      const rest = encode(feed, after);
      expect(rest.every((e) => e.sequence_number > after)).toBe(true);
      // Every message completed in the log reads whole: what the client had, then the rest.
      for (const id of completed(encode(rebuilt(items))))
        expect(textOf(had, id) + textOf(rest, id)).toBe(textOf(encode(rebuilt(items)), id));
      if (n < live.length - 1) expect(rest.at(-1)!.type).toBe('response.completed');
    }
  }
}

describe('the Responses stream encoder numbers model calls', () => {
  it('a call without text, then one with: the same numbers live and rebuilt', () => {
    const s = new Script()
      .ev('request/header', { messageId: 'm0' })
      .message('m0', '', [{ id: 'c-m0', name: 't' }])
      .delta('m1', 'Hel')
      .delta('m1', 'lo')
      .ev('request/header', { messageId: 'm1' })
      .message('m1', 'Hello');
    const live = encode(s.items).filter((e) => e.type !== 'response.output_text.delta');
    const fromLog = encode(rebuilt(s.items)).filter((e) => e.type !== 'response.output_text.delta');
    expect(live.map((e) => e.sequence_number)).toEqual(fromLog.map((e) => e.sequence_number));
    expectResumable(s.items);
  });

  it('a retried call ends its item incomplete live; the retry numbers the same live and rebuilt', () => {
    const s = new Script()
      .delta('x', 'Hal')
      .delta('m1', 'Hello')
      .ev('request/header', { messageId: 'x' })
      .ev('model/retry', { attempt: 1, delayMs: 1, abandonedMessageId: 'x' })
      .ev('request/header', { messageId: 'm1' })
      .message('m1', 'Hello');
    const live = encode(s.items);
    expect(
      live.find((e) => e.type === 'response.output_item.done' && (e.item as { id: string }).id === 'msg_x')!.item,
    ).toMatchObject({ status: 'incomplete' });
    const doneAt = (events: StreamEvent[]) =>
      events.find((e) => e.type === 'response.output_text.done' && e.item_id === 'msg_m1')!.sequence_number;
    expect(doneAt(live)).toBe(doneAt(encode(rebuilt(s.items))));
    expectResumable(s.items);
  });

  it('a call lost with its worker: its ordinal is reserved in the log, so the next call numbers the same', () => {
    const s = new Script()
      .delta('x', 'Hello, wo')
      .ev('run/interrupted', { attempt: 1, step: 0, reason: 'lease_expired' })
      .delta('m1', 'Hello, world')
      .ev('request/header', { messageId: 'm1' })
      .message('m1', 'Hello, world');
    const doneAt = (events: StreamEvent[]) =>
      events.find((e) => e.type === 'response.output_text.done' && e.item_id === 'msg_m1')!.sequence_number;
    expect(doneAt(encode(s.items))).toBe(doneAt(encode(rebuilt(s.items))));
    expectResumable(s.items);
    // Lost between calls (nothing of it streamed): reserved the same way, live or not.
    const between = new Script()
      .ev('request/header', { messageId: 'm0' })
      .message('m0', 'a')
      .ev('run/interrupted', { attempt: 1, step: 1, reason: 'lease_expired' })
      .delta('m1', 'b')
      .ev('request/header', { messageId: 'm1' })
      .message('m1', 'b');
    expect(doneAt(encode(between.items))).toBe(doneAt(encode(rebuilt(between.items))));
    expectResumable(between.items);
  });
});
