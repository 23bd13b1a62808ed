/**
 * Ids as stored in the log's index tables (ADR-0009): a canonical UUID (lowercase, hyphenated, as
 * Keel makes them) as its 16 bytes, any other id as its text. Half the bytes in the row and in
 * every index entry; the mapping is one-to-one, so lookups encode their argument the same way.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export type IdKey = Buffer | string;

export function idKey(id: string): IdKey {
  return id.length === 36 && UUID.test(id) ? Buffer.from(id.replaceAll('-', ''), 'hex') : id;
}

export function idKeyOrNull(id: string | null | undefined): IdKey | null {
  return id === null || id === undefined ? null : idKey(id);
}

export function idOf(key: IdKey): string {
  if (typeof key === 'string') return key;
  const h = key.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
