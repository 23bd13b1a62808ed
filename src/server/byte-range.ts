/**
 * A `Range` header's one byte range (RFC 9110 §14.1.2) over content of `size` bytes: the inclusive
 * first and last byte, `unsatisfiable` when it starts past the end (or asks for an empty suffix),
 * undefined for the whole content (no header, another unit, several ranges, or a header that does
 * not parse: a server may ignore a Range it does not serve, §14.2).
 */
export function byteRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m) return undefined;
  const [, from, to] = m as unknown as [string, string, string];
  if (from === '' && to === '') return undefined;
  if (from === '') {
    // The last `to` bytes.
    const suffix = Number(to);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(from);
  const end = to === '' ? size - 1 : Math.min(Number(to), size - 1);
  if (to !== '' && Number(to) < start) return undefined;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}
