import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { blobHashesIn } from '../../src/store/blob-refs.ts';

/** What the scanner replaced: every `sha256:` and 64 lowercase hex digits, each once, first seen first. */
const byRegex = (json: string): string[] => [...new Set(json.match(/sha256:[0-9a-f]{64}/g) ?? [])];

const hex = (n: number, seed: number): string => {
  let s = '';
  for (let i = 0; i < n; i++) s += '0123456789abcdef'[(seed * 7 + i * 13) % 16];
  return s;
};

describe('blobHashesIn', () => {
  it('returns hashes that do not keep the text they were found in alive', () => {
    // The SQLite store keeps the hashes of the sessions it wrote (up to 4,096): a hash that is a
    // slice of its event row's JSON kept the whole row in memory with it.
    setFlagsFromString('--expose_gc');
    const gc = runInNewContext('gc') as () => void;
    gc();
    const before = process.memoryUsage().heapUsed;
    const kept: string[] = [];
    for (let i = 0; i < 200; i++) {
      const text = JSON.stringify({ system: `sha256:${hex(64, i)}`, pad: 'x'.repeat(100_000) + String(i) });
      kept.push(...blobHashesIn(text));
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    expect(kept).toHaveLength(200);
    expect(kept[7]).toBe(`sha256:${hex(64, 7)}`);
    // The 200 texts are 20 MB; the 200 hashes some 20 KB.
    expect(grown).toBeLessThan(4_000_000);
  });

  it('finds each hash once, in the order first seen', () => {
    const a = `sha256:${hex(64, 1)}`;
    const b = `sha256:${hex(64, 2)}`;
    const json = JSON.stringify({ system: a, tools: b, again: a, data: { ref: b, text: 'x' } });
    expect(blobHashesIn(json)).toEqual([a, b]);
  });

  it('takes the first 64 digits of a longer run, and nothing shorter, uppercase or broken', () => {
    const h = hex(64, 3);
    const cases = [
      `"sha256:${h}f"`,
      `"sha256:${h.slice(0, 63)}"`,
      `"sha256:${h.toUpperCase()}"`,
      `"sha256:${h.slice(0, 30)}-${h.slice(31)}"`,
      `sha256:sha256:${h}`,
      `sha256:${h}sha256:${hex(64, 4)}`,
      'sha256:',
      `${h}`,
      '',
      `sha256:${h.slice(0, 10)}sha256:${h}`,
    ];
    for (const json of cases) expect(blobHashesIn(json), json).toEqual(byRegex(json));
  });

  it('agrees with the regex on generated texts', () => {
    let seed = 42;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const pieces = ['sha256:', 'sha25', '"', 'a', 'F', '0', hex(64, 5), hex(63, 6), hex(65, 7), ':', 'sha256:sha256:'];
    for (let n = 0; n < 500; n++) {
      let json = '';
      const k = 1 + Math.floor(rnd() * 8);
      for (let i = 0; i < k; i++) json += pieces[Math.floor(rnd() * pieces.length)];
      expect(blobHashesIn(json), json).toEqual(byRegex(json));
    }
  });
});
