import { parseUsageParams, usageColumns, usageCsv, usageReport, UsageParamsError } from '../../server/usage.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { noPositionals, openDb, table } from '../common.ts';

export const usageHelp = `keel usage [--from D] [--to D] [--by tenant,agent,model,day] [--tenant T] [--agent A] [--model M] [--csv] [--json]
    tokens and cost of the runs that ended in a range, by tenant, agent, model and day or hour, for
    every tenant (the API shows a key only its own): each run's own usage once (a parent's recorded
    usage includes its subagents', which count as their own runs), erased sessions included, runs
    not ended left out. D is a date (2025-01-31, UTC; as --to the day is included) or an ISO
    timestamp with an offset; default the last 30 days. --by (default day; "" for the totals only)
    takes tenant, agent, model and day or hour. On the local database: --db PATH (default $KEEL_DB
    or ./.keel/keel.db, or a postgres:// URL).`;

export async function usageCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = args('usage', argv, {
    db: { type: 'string' },
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
    if (values.json) json(io, report);
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
    }
    return 0;
  } finally {
    await store.close();
  }
}
