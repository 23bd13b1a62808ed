/**
 * The bound an append checks an event's size with before serializing it (log-codec.ts): never
 * under the bytes of the value's JSON, so that no event over the limit gets past it unserialized.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonBytesAtMost } from '../../src/core/json-size-bound.ts';

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

describe('jsonBytesAtMost', () => {
  it('is never under the UTF-8 bytes of the JSON, escapes and astral characters included', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(jsonBytesAtMost(v, Number.MAX_SAFE_INTEGER)).toBeGreaterThanOrEqual(bytes(v));
      }),
      { numRuns: 5000 },
    );
    // The longest a number prints (fast-check found it): 25 characters.
    expect(jsonBytesAtMost(-0.0000010931915190033301, Infinity)).toBeGreaterThanOrEqual(25);
    for (const s of ['\u0001\u001f"\\', '😀😀', 'ü'.repeat(100), '\u2028'])
      expect(jsonBytesAtMost({ [s]: [s, s] }, Infinity)).toBeGreaterThanOrEqual(bytes({ [s]: [s, s] }));
  });

  it('says "over" as soon as the bound passes the limit, for a value over it', () => {
    const big = { output: { type: 'text', value: 'x'.repeat(10_000) } };
    expect(jsonBytesAtMost(big, 1000)).toBeGreaterThan(1000);
    expect(jsonBytesAtMost({ a: 1 }, 1000)).toBeLessThanOrEqual(1000);
    // A value that prints itself is not bounded: "over", so that the caller serializes it.
    expect(jsonBytesAtMost({ at: new Date() }, 1000)).toBeGreaterThan(1000);
  });
});
