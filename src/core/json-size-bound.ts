/**
 * An upper bound of the bytes a value takes as UTF-8 JSON, without serializing it: each character
 * of a string or key counts 6 (the longest escape, `\u001f`; a character is at most 3 UTF-8 bytes),
 * a number 32 (the longest a number prints is 25: `-0.0000010931915190033301`), punctuation its own.
 * Appends check each event against its bound with this first and serialize only an event the
 * bound does not clear (session/log-codec.ts `checkSize`), and so do a tool result's size checks
 * (large-payloads.ts `toolOutputBelow`): every event of a step is serialized once, in its row.
 * Stops as soon as the bound passes `limit` (returns a number above it).
 */
export function jsonBytesAtMost(value: unknown, limit: number): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') total += 6 * v.length + 2;
    else if (typeof v === 'number' || typeof v === 'bigint') total += 32;
    else if (typeof v === 'boolean' || v === null || v === undefined) total += 5;
    else if (Array.isArray(v)) {
      total += 2 + v.length;
      for (let i = 0; i < v.length; i++) stack.push(v[i]);
    } else if (typeof v === 'object') {
      // A value that prints itself (a Date, a Buffer) has no bound here: say "over", so it is serialized.
      if (typeof (v as { toJSON?: unknown }).toJSON === 'function') return limit + 1;
      total += 2;
      // for…in: event data are plain JSON objects (no inherited enumerable keys).
      for (const k in v) {
        total += 6 * k.length + 4;
        stack.push((v as Record<string, unknown>)[k]);
      }
    }
    if (total > limit) return total;
  }
  return total;
}
