/**
 * Ids as stored in the log's index tables (ADR-0009): a canonical UUID (lowercase, hyphenated, as
 * Keel makes them) as its 16 bytes, any other id as its text. Half the bytes in the row and in
 * every index entry; the mapping is one-to-one, so lookups encode their argument the same way.
 */
export type IdKey = Buffer | string;

/** The value of each lowercase hex digit by character code; -1 for any other character below 128. */
const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) HEX[97 + i] = 10 + i;
/** Where each byte's two hex digits start in `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`. */
const BYTE_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
const DASH = 45;

// Decoded by hand: several keys are made per append, and a regex test, a copy without hyphens
// and a hex Buffer.from cost ~5× as much (bench:durable's profile).
export function idKey(id: string): IdKey {
  if (
    id.length !== 36 ||
    id.charCodeAt(8) !== DASH ||
    id.charCodeAt(13) !== DASH ||
    id.charCodeAt(18) !== DASH ||
    id.charCodeAt(23) !== DASH
  )
    return id;
  const key = Buffer.allocUnsafe(16);
  for (let k = 0; k < 16; k++) {
    const at = BYTE_AT[k]!;
    const hi = id.charCodeAt(at);
    const lo = id.charCodeAt(at + 1);
    const h = hi < 128 ? HEX[hi]! : -1;
    const l = lo < 128 ? HEX[lo]! : -1;
    if ((h | l) < 0) return id;
    key[k] = (h << 4) | l;
  }
  return key;
}

export function idKeyOrNull(id: string | null | undefined): IdKey | null {
  return id === null || id === undefined ? null : idKey(id);
}

export function idOf(key: IdKey): string {
  if (typeof key === 'string') return key;
  const h = key.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
