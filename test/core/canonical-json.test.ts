import canonicalize from 'canonicalize';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/core/canonical-json.ts';

describe('canonicalJson', () => {
  it('writes exactly what the canonicalize package (RFC 8785) writes, for any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(canonicalJson(v)).toBe(canonicalize(v));
      }),
      { numRuns: 2000 },
    );
  });

  it('also for values with undefined members and items, nested toJSON, and unicode keys', () => {
    const samples: unknown[] = [
      { b: 1, a: undefined, c: [undefined, 1, { z: undefined }] },
      { when: new Date(0), nested: { toJSON: () => ({ y: 2, x: 1 }) } },
      { 'é': 1, e: 2, '😀': 3, '\u0000': 4, B: 5, a: 6 },
      [1e21, 1e-7, -0, 0.1 + 0.2, 123456789012345680000],
      'a "quoted" \\ string\n',
    ];
    for (const v of samples) expect(canonicalJson(v)).toBe(canonicalize(v));
  });

  it('refuses what JSON cannot hold', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson([Infinity])).toThrow(TypeError);
  });
});
