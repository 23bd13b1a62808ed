import { describe, expect, it } from 'vitest';
import { newId } from '../../src/index.ts';

describe('newId', () => {
  it('is a UUIDv7 that sorts in creation order, also within one millisecond', () => {
    const ids = Array.from({ length: 20_000 }, newId);
    expect(ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id))).toBe(true);
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
});
