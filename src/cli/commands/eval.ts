import { loadConfig } from '../../config/index.ts';
import type { CandidateResults, ExperimentMode, ExperimentResults } from '../../runs/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { intOption, openDb, progress, table } from '../common.ts';
import { evalRuntime, findDataset } from './datasets.ts';

export const evalHelp = `keel eval <dataset> --candidate name@version [options]   evaluate agent versions on a dataset; a CI gate
  Runs the dataset (an id or a name: keel datasets) against each --candidate and a baseline
  (--baseline recorded, the default: the recorded runs; or name@version), here, and prints one
  row per candidate: its overall score (0-1, the mean of the scorers), each scorer, tokens, cost,
  latency, the difference to the baseline, and the items that got worse, worst first.
  --mode step_replay (default: each recorded step's exact request to the candidate, no tool runs)
  or rerun (each item a full rerun of its run, tools by --tools reuse|execute).
  Gate: --min SCORE (every candidate's score at least SCORE) and --max-regressions N (no
  candidate worse than the baseline on more than N items); exits 1 when it fails, 0 otherwise.
  --scorers a,b (default all), --concurrency N (default 4), --tenant T, --json, --db PATH, --config FILE.`;

export async function evalCommand(argv: string[], io: Io): Promise<number> {
  const { values, positionals } = args('eval', argv, {
    candidate: { type: 'string', multiple: true },
    baseline: { type: 'string' },
    mode: { type: 'string' },
    tools: { type: 'string' },
    scorers: { type: 'string' },
    concurrency: { type: 'string' },
    min: { type: 'string' },
    'max-regressions': { type: 'string' },
    tenant: { type: 'string' },
    json: { type: 'boolean' },
    db: { type: 'string' },
    config: { type: 'string' },
  });
  const name = positionals[0];
  if (!name || positionals.length > 1) throw new UsageError(`eval: give one dataset (id or name)\n${evalHelp}`);
  const candidates = values.candidate ?? [];
  if (candidates.length === 0) throw new UsageError('eval: give at least one --candidate name@version');
  const mode = (values.mode ?? 'step_replay') as ExperimentMode;
  if (mode !== 'step_replay' && mode !== 'rerun')
    throw new UsageError(`eval: --mode is step_replay or rerun, not ${JSON.stringify(values.mode)}`);
  if (values.tools !== undefined && values.tools !== 'reuse' && values.tools !== 'execute')
    throw new UsageError(`eval: --tools is reuse or execute, not ${JSON.stringify(values.tools)}`);
  const min = values.min === undefined ? undefined : Number(values.min);
  if (min !== undefined && !(min >= 0 && min <= 1)) throw new UsageError('eval: --min is a score from 0 to 1');
  const maxRegressions =
    values['max-regressions'] === undefined
      ? undefined
      : intOption('eval', 'max-regressions', values['max-regressions'], { default: 0 });
  const tenant = values.tenant ?? 'default';

  const config = await loadConfig(values.config);
  const { store } = await openDb(io, values.db);
  const rt = evalRuntime(store, config);
  try {
    const dataset = await findDataset(rt, tenant, name);
    const experiment = await rt.evals.experiments.create(
      {
        dataset: dataset.id,
        mode,
        candidates,
        ...(values.baseline !== undefined ? { baseline: values.baseline } : {}),
        ...(values.scorers !== undefined ? { scorers: values.scorers.split(',').map((s) => s.trim()) } : {}),
        ...(values.tools !== undefined ? { tools: values.tools as 'reuse' | 'execute' } : {}),
        ...(values.concurrency !== undefined
          ? { concurrency: intOption('eval', 'concurrency', values.concurrency, { min: 1, default: 4 }) }
          : {}),
      },
      { tenant },
    );
    rt.startWorker({ concurrency: 4, pollMs: 50 });
    const p = progress(io);
    try {
      for (;;) {
        const b = await rt.evals.experiments.get(experiment.id, { tenant });
        const c = await rt.evals.counts(b);
        p.update(`experiment ${b.id}: ${c.done + c.failed} of ${c.done + c.failed + c.pending + c.running} items`);
        if (b.status !== 'running') break;
        if (io.signal.aborted) {
          line(io, `stopped: experiment ${b.id} goes on with the next worker (keel serve, keel worker)`);
          return 130;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      p.done();
    }
    const results = await rt.evals.experiments.results(experiment.id, { tenant });
    const gate = gateOf(results, min, maxRegressions);
    if (values.json) json(io, { ...results, gate });
    else render(io, results, gate);
    return gate.passed ? 0 : 1;
  } finally {
    await rt.close({ graceMs: 0 });
    await store.close();
  }
}

interface Gate {
  passed: boolean;
  failures: string[];
}

function gateOf(r: ExperimentResults, min: number | undefined, maxRegressions: number | undefined): Gate {
  const failures: string[] = [];
  for (const c of r.candidates) {
    if (c.label === r.baseline) continue;
    if (c.failed > 0) failures.push(`${c.label}: ${c.failed} item${c.failed === 1 ? '' : 's'} failed`);
    const score = c.scores.score ?? 0;
    if (min !== undefined && score < min) failures.push(`${c.label}: score ${score.toFixed(3)} < --min ${min}`);
    if (maxRegressions !== undefined && c.regressions.length > maxRegressions)
      failures.push(`${c.label}: ${c.regressions.length} regressions > --max-regressions ${maxRegressions}`);
  }
  return { passed: failures.length === 0, failures };
}

const f3 = (n: number | undefined) => (n === undefined ? '-' : n.toFixed(3));
const signed = (n: number | null) => (n === null ? '-' : `${n >= 0 ? '+' : ''}${n.toFixed(3)}`);

function render(io: Io, r: ExperimentResults, gate: Gate): void {
  const scorers = [...new Set(r.candidates.flatMap((c) => Object.keys(c.scores)))].filter((s) => s !== 'score');
  line(io, `experiment ${r.id} (${r.mode}, baseline ${r.baseline}): ${r.status}`);
  line(
    io,
    table(
      [
        'CANDIDATE',
        'ITEMS',
        'SCORE',
        ...scorers.map((s) => s.toUpperCase()),
        'TOKENS',
        'COST',
        'LATENCY',
        'VS BASELINE',
      ],
      r.candidates.map((c: CandidateResults) => [
        `${c.label}${c.label === r.baseline ? ' (baseline)' : ''}`,
        `${c.done}/${c.items}${c.failed > 0 ? ` (${c.failed} failed)` : ''}`,
        f3(c.scores.score),
        ...scorers.map((s) => f3(c.scores[s])),
        String(Math.round(c.metrics.tokens ?? 0)),
        `$${(c.metrics.cost ?? 0).toFixed(4)}`,
        `${Math.round(c.metrics.latency_ms ?? 0)}ms`,
        signed(c.vsBaseline),
      ]),
    ),
  );
  for (const c of r.candidates) {
    if (c.regressions.length === 0) continue;
    line(
      io,
      `\n${c.label}: ${c.regressions.length} item${c.regressions.length === 1 ? '' : 's'} worse than the baseline (worst first)`,
    );
    line(
      io,
      table(
        ['SOURCE RUN', 'SCORE', 'BASELINE', 'DIFF'],
        c.regressions.slice(0, 20).map((x) => [x.sourceRunId, f3(x.score), f3(x.baseline), signed(x.diff)]),
      ),
    );
  }
  line(io, gate.passed ? '\ngate: passed' : `\ngate: FAILED\n${gate.failures.map((x) => `  ${x}`).join('\n')}`);
}
