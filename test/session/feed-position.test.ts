import { describe, expect, it } from 'vitest';
import {
  comparePositions,
  eventPosition,
  FEED_START,
  formatPosition,
  isAfter,
  parsePosition,
} from '../../src/session/feed-position.ts';

describe('feed position: the one format of SSE ids, Last-Event-ID and delta ids', () => {
  it('formats an event as its seq and a delta as seq.n, and reads them back', () => {
    expect(formatPosition(eventPosition(12))).toBe('12');
    expect(formatPosition({ seq: 12, n: 3 })).toBe('12.3');
    expect(parsePosition('12')).toEqual({ seq: 12, n: 0 });
    expect(parsePosition(' 12.3 ')).toEqual({ seq: 12, n: 3 });
    for (const p of [FEED_START, eventPosition(7), { seq: 7, n: 1 }])
      expect(parsePosition(formatPosition(p))).toEqual(p);
  });

  it('reads nothing else', () => {
    for (const text of [undefined, null, '', 'x', '12.', '.3', '12.3.4', '-1', '1e3', '12:3'])
      expect(parsePosition(text)).toBeUndefined();
  });

  it('orders 12 < 12.1 < 12.2 < 13', () => {
    const order = ['12', '12.1', '12.2', '13'].map((t) => parsePosition(t)!);
    for (let i = 1; i < order.length; i++) {
      expect(comparePositions(order[i - 1]!, order[i]!)).toBeLessThan(0);
      expect(isAfter(order[i]!, order[i - 1]!)).toBe(true);
      expect(isAfter(order[i - 1]!, order[i]!)).toBe(false);
    }
    expect(comparePositions(eventPosition(5), { seq: 5, n: 0 })).toBe(0);
  });
});
