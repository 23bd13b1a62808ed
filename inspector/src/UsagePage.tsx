import type { QuotaReport } from 'keel/client';
import { ErrorNote } from './ErrorNote.tsx';
import { money, time, tokens } from './format.ts';
import { keel } from './keel.ts';
import { useResource } from './use-resource.ts';

/** The quota lines a report may hold, as the page names them; costs are dollars. */
const LINES = [
  ['concurrent_runs', 'Concurrent runs', false],
  ['runs_per_minute', 'Runs per minute', false],
  ['tokens_per_day', 'Tokens per day', false],
  ['cost_per_day', 'Cost per day', true],
  ['cost_per_month', 'Cost per month', true],
] as const;

/** The tenant's usage (tokens, cost, runs by day) and its quotas against their use now (GET /v1/usage). */
export function UsagePage() {
  // Quotas move as runs spend: asked again every 5 s.
  const usage = useResource('usage', (c) => keel().usage.get({ group_by: 'day' }, c), { pollMs: 5000 });
  const u = usage.data;
  return (
    <section>
      <h1>Usage</h1>
      <ErrorNote error={usage.error} />
      {u && (
        <>
          <h2>Quotas</h2>
          {!u.quota.tenant && !u.quota.key && <p class="empty">No quota applies to this tenant.</p>}
          {u.quota.tenant && <Quota title="Tenant" report={u.quota.tenant} />}
          {u.quota.key && <Quota title="This API key" report={u.quota.key} />}
          <h2>By day</h2>
          <p class="muted">
            {time(u.from)} to {time(u.to)}: {u.totals.runs} runs, {tokens(u.totals.input_tokens)} input and{' '}
            {tokens(u.totals.output_tokens)} output tokens, {money(u.totals.cost)}.
          </p>
          <table class="list" data-testid="usage-days">
            <thead>
              <tr>
                <th>Day</th>
                <th>Runs</th>
                <th>Input tokens</th>
                <th>Output tokens</th>
                <th>Cost</th>
              </tr>
            </thead>
            <tbody>
              {u.data.map((r) => (
                <tr key={r.day}>
                  <td>{r.day}</td>
                  <td>{r.runs}</td>
                  <td>{tokens(r.input_tokens)}</td>
                  <td>{tokens(r.output_tokens)}</td>
                  <td>{money(r.cost)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}

function Quota(props: { title: string; report: QuotaReport }) {
  const r = props.report;
  return (
    <div class="card" data-testid="quota">
      <header class="row">
        <strong>{props.title}</strong>
        <span class="muted">
          {r.scope} · at a limit, a run {r.on_limit === 'wait' ? 'waits until it frees' : 'fails'}
        </span>
      </header>
      <table class="list">
        <tbody>
          {LINES.map(([field, label, isCost]) => {
            const line = r[field];
            if (!line) return null;
            const show = (n: number) => (isCost ? money(n) : tokens(n));
            const share = line.limit > 0 ? Math.min(1, (line.used + (line.reserved ?? 0)) / line.limit) : 1;
            return (
              <tr key={field} data-testid={`quota-${field}`}>
                <td>{label}</td>
                <td>
                  {show(line.used)} used{line.reserved ? `, ${show(line.reserved)} reserved` : ''} of {show(line.limit)}
                </td>
                <td>
                  <meter min={0} max={1} high={0.8} value={share} />
                </td>
                <td class="muted">{line.resets_at ? `resets ${time(line.resets_at)}` : ''}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
