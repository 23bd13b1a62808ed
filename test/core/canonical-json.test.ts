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
      { é: 1, e: 2, '😀': 3, '\u0000': 4, B: 5, a: 6 },
      [1e21, 1e-7, -0, 0.1 + 0.2, 123456789012345680000],
      'a "quoted" \\ string\n',
      // Many keys (sorted by Array#sort, a few by hand), in reverse order and mixed case.
      Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`${String.fromCharCode(90 - (i % 26))}${39 - i}`, i])),
      Object.fromEntries(
        ['b', 'B', 'a', 'ab', 'aa', '_', '1', '10', '2', 'é', 'e'].map((k, i) => [k, { [k]: i, z: [k] }]),
      ),
    ];
    for (const v of samples) expect(canonicalJson(v)).toBe(canonicalize(v));
  });

  it('refuses what JSON cannot hold', () => {
    expect(() => canonicalJson({ n: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson([Infinity])).toThrow(TypeError);
  });
});
