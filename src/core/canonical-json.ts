/**
 * Canonical JSON (RFC 8785, JCS) for JSON values: object keys sorted by UTF-16 code units, no
 * whitespace, numbers and strings as JSON.stringify writes them. The same text as the
 * `canonicalize` package for every JSON value it accepts (a property test checks it), written for
 * the hot path: the loop fingerprints two new messages per step. Undefined object members are
 * left out and undefined array items are `null`, as in JSON.stringify.
 */
export function canonicalJson(value: unknown): string {
  return write(value) ?? 'null';
}

// Object keys repeat (role, content, type, text…): each is quoted once.
const quotedKeys = new Map<string, string>();
function quotedKey(k: string): string {
  let q = quotedKeys.get(k);
  if (q === undefined) {
    q = JSON.stringify(k);
    if (quotedKeys.size < 4096) quotedKeys.set(k, q);
  }
  return q;
}

/** Sorts a few keys in place by UTF-16 code units (`<` on strings), as RFC 8785 does; many go to Array#sort. */
function sortKeys(keys: string[]): void {
  const n = keys.length;
  if (n > 16) {
    keys.sort();
    return;
  }
  for (let i = 1; i < n; i++) {
    const k = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > k) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = k;
  }
}

function write(v: unknown): string | undefined {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`canonical JSON has no ${v}`);
      // What JSON.stringify writes for a finite number (ECMAScript Number::toString).
      return String(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      if (v === null) return 'null';
      break;
    default:
      // undefined, functions and symbols have no JSON form
      return undefined;
  }
  const o = v as { toJSON?: () => unknown };
  if (typeof o.toJSON === 'function') return write(o.toJSON());
  if (Array.isArray(v)) {
    const n = v.length;
    if (n === 0) return '[]';
    let s = `[${write(v[0]) ?? 'null'}`;
    for (let i = 1; i < n; i++) s += `,${write(v[i]) ?? 'null'}`;
    return `${s}]`;
  }
  const keys = Object.keys(v);
  sortKeys(keys);
  let s = '{';
  for (const k of keys) {
    const w = write((v as Record<string, unknown>)[k]);
    if (w === undefined) continue;
    s += `${s.length === 1 ? '' : ','}${quotedKey(k)}:${w}`;
  }
  return `${s}}`;
}
