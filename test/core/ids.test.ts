import { randomBytes } from 'node:crypto';
import { v7 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/index.ts';
import { uuidV7 } from '../../src/core/uuid-v7.ts';

describe('newId', () => {
  it('is a UUIDv7 that sorts in creation order, also within one millisecond', () => {
    const ids = Array.from({ length: 20_000 }, newId);
    expect(ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id))).toBe(
      true,
    );
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('carries its creation time in the first 48 bits', () => {
    const before = Date.now();
    const id = newId();
    const ms = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(Date.now() + 1);
  });

  it('lays a time, a counter and random bytes out as the uuid package does', () => {
    const cases: Array<[number, number]> = [
      [0, 0],
      [2 ** 48 - 1, -1],
      [1_796_000_000_000, 0x7fffffff],
      [1_796_000_000_123, 1],
    ];
    for (let i = 0; i < 500; i++) cases.push([Math.floor(Math.random() * 2 ** 48), randomBytes(4).readInt32LE()]);
    for (const [ms, counter] of cases) {
      const random = new Uint8Array(randomBytes(32));
      expect(uuidV7(ms, counter, random, 16)).toBe(v7({ msecs: ms, seq: counter, random: random.subarray(16) }));
    }
  });
});
