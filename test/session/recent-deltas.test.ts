import { describe, expect, it } from 'vitest';
import { RecentDeltas } from '../../src/session/recent-deltas.ts';

const delta = (messageId: string, text: string) =>
  ({ type: 'text/delta', messageId, delta: text, turn: 1, step: 1 }) as never;

describe('RecentDeltas: the deltas a feed that starts mid-message replays', () => {
  it('a message renumbered after an event committed while it streams keeps its earlier deltas; the messages before it go', () => {
    const r = new RecentDeltas();
    r.delta('s', { id: '3.1', delta: delta('m0', 'old') });
    r.delta('s', { id: '4.1', delta: delta('m1', 'one ') });
    r.delta('s', { id: '4.2', delta: delta('m1', 'two ') });
    // Another node committed event 5 while m1 streams: m1's writer numbers its next deltas after it.
    r.delta('s', { id: '5.1', delta: delta('m1', 'three') });
    expect(r.of('s').map((d) => d.id)).toEqual(['4.1', '4.2', '5.1']);
  });
});
