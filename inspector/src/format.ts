/** Small formatters for what the pages show. */
export const shortId = (id: string): string => (id.length > 12 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id);

export const money = (usd: number): string =>
  usd === 0 ? '$0' : usd < 0.01 ? `$${usd.toFixed(5)}` : `$${usd.toFixed(4)}`;

export const tokens = (n: number | undefined): string => (n === undefined ? '–' : n.toLocaleString('en-US'));

export const ms = (n: number | undefined): string =>
  n === undefined ? '–' : n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(2)} s`;

export const time = (iso: string | number | null | undefined): string => {
  if (iso === null || iso === undefined) return '–';
  const d = new Date(iso);
  return d.toLocaleString('en-GB', { hour12: false });
};

export const json = (v: unknown): string => {
  try {
    return JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    return String(v);
  }
};

/** One line of a JSON value, cut to `max` characters. */
export const oneLine = (v: unknown, max = 120): string => {
  const s = typeof v === 'string' ? v : (JSON.stringify(v) ?? '');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
};
