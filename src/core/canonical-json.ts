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

function write(v: unknown): string | undefined {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`canonical JSON has no ${v}`);
      return JSON.stringify(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      break;
    default:
      // undefined, functions and symbols have no JSON form
      return undefined;
  }
  const o = v as { toJSON?: () => unknown };
  if (typeof o.toJSON === 'function') return write(o.toJSON());
  if (Array.isArray(v)) {
    let s = '[';
    for (let i = 0; i < v.length; i++) s += (i > 0 ? ',' : '') + (write(v[i]) ?? 'null');
    return `${s}]`;
  }
  const keys = Object.keys(v).sort();
  let s = '{';
  let first = true;
  for (const k of keys) {
    const w = write((v as Record<string, unknown>)[k]);
    if (w === undefined) continue;
    s += `${first ? '' : ','}${JSON.stringify(k)}:${w}`;
    first = false;
  }
  return `${s}}`;
}
