/**
 * Usage reports (`GET /v1/usage`, `keel usage`): the parameters, checked the same way for both, and
 * the report as JSON and as CSV. The numbers come from the store (`StoreOps.usageTotals`): each
 * run's own usage counted once, bucketed by the run's end.
 */
import { USAGE_DIMENSIONS, type UsageDimension, type UsageQuery, type UsageTotals } from '../store/index.ts';

const DAY_MS = 86_400_000;

/** The longest range a report may cover: a year of days, or 31 days of hours. */
export const USAGE_MAX_DAYS = 366;
export const USAGE_MAX_HOURLY_DAYS = 31;
/** Without `from`: this many days before `to`. */
export const USAGE_DEFAULT_DAYS = 30;
/** Without `group_by`. */
export const USAGE_DEFAULT_GROUP_BY: readonly UsageDimension[] = ['day'];

/** The parameters as they come (query strings, CLI options). */
export interface UsageParams {
  from?: string | undefined;
  to?: string | undefined;
  /** Comma-separated dimensions; an empty string: no grouping (the totals only). */
  group_by?: string | undefined;
  tenant?: string | undefined;
  agent?: string | undefined;
  model?: string | undefined;
}

/** What is wrong with the parameters, one message per parameter. */
export class UsageParamsError extends Error {
  readonly errors: ReadonlyArray<{ path: string; message: string }>;
  constructor(errors: ReadonlyArray<{ path: string; message: string }>) {
    super(errors.map((e) => `${e.path}: ${e.message}`).join('; '));
    this.name = 'UsageParamsError';
    this.errors = errors;
  }
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;

/** A calendar date that exists (Date.parse would take 2025-02-30 as March 2). */
function realDate(y: string, m: string, d: string): boolean {
  const t = new Date(Date.UTC(Number(y), Number(m) - 1, Number(d)));
  return t.getUTCFullYear() === Number(y) && t.getUTCMonth() === Number(m) - 1 && t.getUTCDate() === Number(d);
}

/**
 * A time parameter: a date (`2025-01-31`, UTC) or an ISO 8601 timestamp with its offset
 * (`2025-01-31T12:00:00Z`). A date as `to` means the end of that day (the day is included).
 */
function parseTime(value: string, end: boolean): number | string {
  const d = DATE.exec(value);
  if (d) {
    if (!realDate(d[1]!, d[2]!, d[3]!)) return `${JSON.stringify(value)} is not a date of the calendar`;
    const t = Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]));
    return end ? t + DAY_MS : t;
  }
  const ts = TIMESTAMP.exec(value);
  if (ts) {
    const t = Date.parse(value);
    if (!realDate(ts[1]!, ts[2]!, ts[3]!) || Number.isNaN(t)) return `${JSON.stringify(value)} is not a valid time`;
    return t;
  }
  return `${JSON.stringify(value)} is neither a date (2025-01-31) nor an ISO 8601 timestamp with an offset (2025-01-31T12:00:00Z)`;
}

/** 1 to 200 characters, none of them a control character. */
const validName = (v: string): boolean =>
  v.length >= 1 && v.length <= 200 && ![...v].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);

/**
 * The store's query for these parameters, or UsageParamsError saying what is wrong with each.
 * `from` is inclusive, `to` exclusive (a date as `to` includes that day); by default the 30 days up
 * to `now`, grouped by day.
 */
export function parseUsageParams(p: UsageParams, now = Date.now()): UsageQuery {
  const errors: Array<{ path: string; message: string }> = [];
  const time = (name: 'from' | 'to', end: boolean): number | undefined => {
    const v = p[name];
    if (v === undefined) return undefined;
    const t = parseTime(v.trim(), end);
    if (typeof t === 'string') errors.push({ path: name, message: t });
    return typeof t === 'number' ? t : undefined;
  };
  const toGiven = time('to', true);
  const fromGiven = time('from', false);
  const to = toGiven ?? now;
  const from = fromGiven ?? to - USAGE_DEFAULT_DAYS * DAY_MS;

  let groupBy: UsageDimension[] = [...USAGE_DEFAULT_GROUP_BY];
  if (p.group_by !== undefined) {
    const names = p.group_by
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const unknown = names.filter((n) => !USAGE_DIMENSIONS.includes(n as UsageDimension));
    if (unknown.length > 0)
      errors.push({
        path: 'group_by',
        message: `unknown ${unknown.map((u) => JSON.stringify(u)).join(', ')}: group by any of ${USAGE_DIMENSIONS.join(', ')}`,
      });
    else if (new Set(names).size !== names.length)
      errors.push({ path: 'group_by', message: 'a dimension is named twice' });
    else if (names.includes('day') && names.includes('hour'))
      errors.push({ path: 'group_by', message: 'day and hour exclude each other: group by one of them' });
    groupBy = names as UsageDimension[];
  }

  for (const name of ['tenant', 'agent', 'model'] as const) {
    const v = p[name];
    if (v !== undefined && !validName(v))
      errors.push({ path: name, message: 'must be 1 to 200 characters, without control characters' });
  }

  if (errors.every((e) => e.path !== 'from' && e.path !== 'to')) {
    const hourly = groupBy.includes('hour');
    const maxDays = hourly ? USAGE_MAX_HOURLY_DAYS : USAGE_MAX_DAYS;
    if (from >= to)
      errors.push({
        path: fromGiven !== undefined ? 'from' : 'to',
        message: `from (${new Date(from).toISOString()}) must be before to (${new Date(to).toISOString()})`,
      });
    else if (to - from > maxDays * DAY_MS) {
      errors.push({
        path: 'to',
        message: `the range is ${((to - from) / DAY_MS).toFixed(1)} days; at most ${maxDays} days${hourly ? ' grouped by hour' : ''}`,
      });
    }
  }
  if (errors.length > 0) throw new UsageParamsError(errors);
  return {
    from,
    to,
    groupBy,
    ...(p.tenant !== undefined ? { tenant: p.tenant } : {}),
    ...(p.agent !== undefined ? { agent: p.agent } : {}),
    ...(p.model !== undefined ? { model: p.model } : {}),
  };
}

/** A row of the report: its group's keys (those grouped by), then the numbers. */
export type UsageReportRow = {
  tenant?: string;
  agent?: string;
  model?: string | null;
  /** `2025-01-31` */
  day?: string;
  /** `2025-01-31T12:00:00Z` */
  hour?: string;
  runs: number;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  reasoning_tokens: number;
  cost: number;
};

export interface UsageReport {
  from: string;
  to: string;
  group_by: UsageDimension[];
  data: UsageReportRow[];
  totals: Omit<UsageReportRow, 'tenant' | 'agent' | 'model' | 'day' | 'hour'>;
}

/** Dollars to the nano-dollar: sums of floating-point costs lose their noise (0.30000000000000004). */
const money = (x: number): number => Math.round(x * 1e9) / 1e9;

const numbers = (
  t: Pick<UsageTotals, 'runs' | 'inputTokens' | 'outputTokens' | 'cachedInputTokens' | 'reasoningTokens' | 'cost'>,
) => ({
  runs: t.runs,
  input_tokens: t.inputTokens,
  output_tokens: t.outputTokens,
  cached_input_tokens: t.cachedInputTokens,
  reasoning_tokens: t.reasoningTokens,
  cost: money(t.cost),
});

/** Ascending by each key in the grouping's order; a missing model last. */
function compare(a: UsageTotals, b: UsageTotals, groupBy: readonly UsageDimension[]): number {
  for (const d of groupBy) {
    const [x, y] = d === 'day' || d === 'hour' ? [a.bucket, b.bucket] : [a[d], b[d]];
    if (x === y) continue;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return x < y ? -1 : 1;
  }
  return 0;
}

/** The report of the store's groups for a query: rows in order, and their totals. */
export function usageReport(q: UsageQuery, groups: readonly UsageTotals[]): UsageReport {
  const sorted = [...groups].sort((a, b) => compare(a, b, q.groupBy));
  const data = sorted.map((g) => {
    const row: Partial<UsageReportRow> = {};
    for (const d of q.groupBy) {
      if (d === 'day') row.day = new Date(g.bucket!).toISOString().slice(0, 10);
      else if (d === 'hour') row.hour = `${new Date(g.bucket!).toISOString().slice(0, 13)}:00:00Z`;
      else if (d === 'model') row.model = g.model ?? null;
      else row[d] = g[d]!;
    }
    return { ...row, ...numbers(g) } as UsageReportRow;
  });
  const sum = groups.reduce(
    (t, g) => ({
      runs: t.runs + g.runs,
      inputTokens: t.inputTokens + g.inputTokens,
      outputTokens: t.outputTokens + g.outputTokens,
      cachedInputTokens: t.cachedInputTokens + g.cachedInputTokens,
      reasoningTokens: t.reasoningTokens + g.reasoningTokens,
      cost: t.cost + g.cost,
    }),
    { runs: 0, inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0, cost: 0 },
  );
  return {
    from: new Date(q.from).toISOString(),
    to: new Date(q.to).toISOString(),
    group_by: [...q.groupBy],
    data,
    totals: numbers(sum),
  };
}

export const USAGE_NUMBER_COLUMNS = [
  'runs',
  'input_tokens',
  'output_tokens',
  'cached_input_tokens',
  'reasoning_tokens',
  'cost',
] as const;

/** The columns of a report's rows: the keys grouped by, then the numbers. */
export const usageColumns = (report: Pick<UsageReport, 'group_by'>): string[] => [
  ...report.group_by,
  ...USAGE_NUMBER_COLUMNS,
];

/** A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
function csvField(v: unknown): string {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** The report's rows as CSV (RFC 4180, CRLF line ends): a header, then one line per row; no totals line. */
export function usageCsv(report: UsageReport): string {
  const columns = usageColumns(report);
  return [columns, ...report.data.map((r) => columns.map((c) => (r as Record<string, unknown>)[c]))]
    .map((r) => `${r.map(csvField).join(',')}\r\n`)
    .join('');
}
