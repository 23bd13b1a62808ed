import { parseUsageParams, usageColumns, usageCsv, usageReport, UsageParamsError } from '../../server/usage.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { noPositionals, openDb, table } from '../common.ts';
import { configuredRuntime } from '../configured-runtime.ts';
import { loadConfig } from '../../config/index.ts';
import type { QuotaReport } from '../../runs/index.ts';

export const usageHelp = `keel usage [--from D] [--to D] [--by tenant,agent,model,day] [--tenant T] [--agent A] [--model M] [--csv] [--json]
    tokens and cost of the runs that ended in a range, by tenant, agent, model and day or hour, for
    every tenant (the API shows a key only its own): each run's own usage once (a parent's recorded
    usage includes its subagents', which count as their own runs), erased sessions included, runs
    not ended left out. D is a date (2025-01-31, UTC; as --to the day is included) or an ISO
    timestamp with an offset; default the last 30 days. --by (default day; "" for the totals only)
    takes tenant, agent, model and day or hour. With --tenant, also the tenant's quotas (quotas in
    keel.config, or --config PATH) against what it used today and this month. On the local
    database: --db PATH (default $KEEL_DB or ./.keel/keel.db, or a postgres:// URL).`;

export async function usageCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = args('usage', argv, {
    db: { type: 'string' },
    config: { type: 'string' },
    from: { type: 'string' },
    to: { type: 'string' },
    by: { type: 'string' },
    tenant: { type: 'string' },
    agent: { type: 'string' },
    model: { type: 'string' },
    csv: { type: 'boolean' },
    json: { type: 'boolean' },
  });
  noPositionals('usage', positionals);
  if (values.csv && values.json) throw new UsageError('usage: --csv or --json, not both');
  let query;
  try {
    query = parseUsageParams({
      from: values.from,
      to: values.to,
      group_by: values.by,
      tenant: values.tenant,
      agent: values.agent,
      model: values.model,
    });
  } catch (e) {
    if (e instanceof UsageParamsError)
      throw new UsageError(
        `usage: ${e.errors.map((x) => `--${x.path === 'group_by' ? 'by' : x.path}: ${x.message}`).join('; ')}`,
      );
    throw e;
  }
  const { store } = await openDb(io, values.db);
  try {
    const report = usageReport(query, await store.runs.usageTotals(query));
    // A tenant's quotas against their use now (ADR-0043), as the configuration sets them.
    let quota: QuotaReport | null = null;
    if (values.tenant !== undefined) {
      // The runtime's report: the tenants registry's quotas over the configuration's default.
      const rt = configuredRuntime(store, await loadConfig(values.config));
      try {
        quota = (await rt.runs.quota(values.tenant)).tenant;
      } finally {
        await rt.close();
      }
    }
    if (values.json)
      json(io, values.tenant !== undefined ? { ...report, quota: { tenant: quota, key: null } } : report);
    else if (values.csv) io.out.write(usageCsv(report));
    else {
      const columns = usageColumns(report);
      const cell = (c: string, v: unknown): string =>
        v === null || v === undefined ? '-' : c === 'cost' ? `$${(v as number).toFixed(4)}` : String(v);
      const rows = report.data.map((r) => columns.map((c) => cell(c, (r as Record<string, unknown>)[c])));
      if (report.group_by.length > 0 && rows.length > 0)
        rows.push(
          columns.map((c, i) =>
            i === 0 ? 'TOTAL' : c in report.totals ? cell(c, (report.totals as Record<string, unknown>)[c]) : '',
          ),
        );
      else if (rows.length === 0)
        rows.push(
          columns.map((c, i) =>
            c in report.totals ? cell(c, (report.totals as Record<string, unknown>)[c]) : i === 0 ? '-' : '',
          ),
        );
      line(io, `runs that ended from ${report.from} to ${report.to}`);
      line(
        io,
        table(
          columns.map((c) => c.toUpperCase()),
          rows,
        ),
      );
      if (quota) line(io, quotaTable(quota));
    }
    return 0;
  } finally {
    await store.close();
  }
}

/** A tenant's quotas as a table: each limit, what is used and reserved, and when it resets. */
function quotaTable(q: QuotaReport): string {
  const lines: Array<[string, QuotaReport['tokens_per_day']]> = [
    ['concurrent runs', q.concurrent_runs],
    ['runs per minute', q.runs_per_minute],
    ['tokens per day', q.tokens_per_day],
    ['cost per day', q.cost_per_day],
    ['cost per month', q.cost_per_month],
  ];
  const money = (name: string, v: number) => (name.startsWith('cost') ? `$${v.toFixed(4)}` : String(v));
  const rows = lines.flatMap(([name, l]) =>
    l
      ? [
          [
            name,
            money(name, l.limit),
            money(name, l.used),
            l.reserved !== undefined ? money(name, l.reserved) : '-',
            l.resets_at ?? '-',
          ],
        ]
      : [],
  );
  return `\nquotas of ${q.scope} (at a limit: ${q.on_limit})\n${table(['QUOTA', 'LIMIT', 'USED', 'RESERVED', 'RESETS'], rows)}`;
}
