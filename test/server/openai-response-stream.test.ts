/**
 * The Responses stream encoder on its own: the numbers of a live stream (text in several deltas)
 * and of one rebuilt from the log (the durable message, whole) agree, and a client resuming at any
 * event it received gets exactly the rest — mid-message too, whether the rest comes as deltas
 * (still streaming) or in the durable message.
 */
import { describe, expect, it } from 'vitest';
import type { FeedItem } from '../../src/session/index.ts';
import { ResponseStreamEncoder, type StreamEvent } from '../../src/server/protocols/openai/response-stream.ts';

const delta = (messageId: string, text: string, n: number): FeedItem => ({
  kind: 'delta',
  id: `5.${n}`,
  delta: { type: 'text/delta', turn: 1, step: 1, messageId, delta: text },
});
const message = (id: string, text: string, seq: number): FeedItem =>
  ({
    kind: 'event',
    event: {
      seq,
      id: `e${seq}`,
      type: 'assistant/message',
      v: 1,
      time: 0,
      entry: true,
      data: { message: { id, role: 'assistant', content: [{ type: 'text', text }] } },
    },
  }) as unknown as FeedItem;

function run(encoder: ResponseStreamEncoder, items: FeedItem[]): StreamEvent[] {
  return [...encoder.start({}), ...items.flatMap((i) => encoder.item(i)), ...encoder.end('completed', {})];
}
const text = (events: StreamEvent[]) => events.flatMap((e) => (typeof e.delta === 'string' ? [e.delta] : [])).join('');

describe('ResponseStreamEncoder', () => {
  const live = [
    delta('m1', 'Hello', 1),
    delta('m1', ', wor', 2),
    delta('m1', 'ld', 3),
    message('m1', 'Hello, world', 6),
  ];
  const rebuilt = [message('m1', 'Hello, world', 6)];

  it('live and rebuilt streams end each part at the same numbers', () => {
    const a = run(new ResponseStreamEncoder(), live);
    const b = run(new ResponseStreamEncoder(), rebuilt);
    const nonText = (events: StreamEvent[]) =>
      events.filter((e) => e.type !== 'response.output_text.delta').map((e) => [e.type, e.sequence_number]);
    expect(nonText(a)).toEqual(nonText(b));
    expect(a.filter((e) => e.type === 'response.output_text.delta').at(-1)!.sequence_number).toBe(
      b.find((e) => e.type === 'response.output_text.delta')!.sequence_number,
    );
    expect(text(a)).toBe('Hello, world');
    expect(text(b)).toBe('Hello, world');
  });

  it('resuming after any event gives exactly the rest, mid-message included', () => {
    const all = run(new ResponseStreamEncoder(), live);
    all.forEach((received, i) => {
      const had = all.slice(0, i + 1);
      for (const items of [live, rebuilt, [delta('m1', 'Hello, world', 1), message('m1', 'Hello, world', 6)]]) {
        const rest = run(new ResponseStreamEncoder(received.sequence_number), items);
        expect(text(had) + text(rest)).toBe('Hello, world');
        expect(rest.every((e) => e.sequence_number > received.sequence_number)).toBe(true);
        if (i === all.length - 1) expect(rest).toEqual([]);
        else expect(rest.at(-1)!.type).toBe('response.completed');
        const types = new Set(had.map((e) => e.type).filter((t) => t !== 'response.output_text.delta'));
        for (const e of rest) if (e.type !== 'response.output_text.delta') expect(types.has(e.type)).toBe(false);
      }
    });
  });
});
