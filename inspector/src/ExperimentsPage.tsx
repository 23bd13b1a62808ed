import type { Dataset } from 'keel/client';
import { useState } from 'preact/hooks';
import { ErrorNote } from './ErrorNote.tsx';
import { countsText, modeLabel } from './experiment-format.ts';
import { oneLine, shortId, time } from './format.ts';
import { keel, readAll } from './keel.ts';
import { Link, navigate } from './router.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import type { ExperimentMode } from './types.ts';
import { useAction } from './use-action.ts';
import { useResource } from './use-resource.ts';

/** Rows a list reads at most (the API lists oldest first: the page reads them all and shows the newest first). */
const MAX = 2000;

const newestFirst = <T extends { id: string; created_at: string }>(rows: T[]): T[] =>
  [...rows].sort((a, b) => b.created_at.localeCompare(a.created_at) || b.id.localeCompare(a.id));

/**
 * The tenant's experiments (name, mode, status, how far, created) and datasets (name, items), with a
 * form that starts an experiment on a dataset. Both lists are read again every 3 s (no stream
 * spans experiments).
 */
export function ExperimentsPage() {
  const experiments = useResource('experiments', (c) => readAll((q) => keel().experiments.list(q, c), MAX), {
    pollMs: 3000,
  });
  const datasets = useResource('datasets', (c) => readAll((q) => keel().datasets.list(q, c), MAX), { pollMs: 3000 });
  const exps = newestFirst(experiments.data?.data ?? []);
  const sets = newestFirst(datasets.data?.data ?? []);
  return (
    <section>
      <h1>Experiments</h1>
      <ErrorNote error={experiments.error} />
      <table class="list" data-testid="experiments">
        <thead>
          <tr>
            <th>Name</th>
            <th>Mode</th>
            <th>Status</th>
            <th>Items</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {exps.map((e) => (
            <tr key={e.id} data-testid="experiment-row">
              <td>
                <Link to={`/experiments/${e.id}`}>{e.name}</Link>
                <div class="muted mono">{shortId(e.id)}</div>
              </td>
              <td>{modeLabel(e.mode)}</td>
              <td>
                <StatusBadge status={e.status} />
              </td>
              <td>{countsText(e.counts)}</td>
              <td>{time(e.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {experiments.data && exps.length === 0 && <p class="empty">No experiments yet: start one on a dataset below.</p>}
      {experiments.data?.truncated && <p class="muted">The first {MAX} experiments are shown.</p>}

      <h2>Datasets</h2>
      <ErrorNote error={datasets.error} />
      <table class="list" data-testid="datasets">
        <thead>
          <tr>
            <th>Name</th>
            <th>Items</th>
            <th>Made from</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {sets.map((d) => (
            <tr key={d.id} data-testid="dataset-row">
              <td>
                {d.name}
                <div class="muted mono">{shortId(d.id)}</div>
              </td>
              <td>{d.item_count}</td>
              <td class="muted mono">{sourceText(d.source)}</td>
              <td>{time(d.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {datasets.data && sets.length === 0 && (
        <p class="empty">No datasets yet: make one from ended runs with POST /v1/datasets.</p>
      )}
      {sets.length > 0 && <NewExperiment datasets={sets} />}
    </section>
  );
}

/** What a dataset was made from: so many runs, or a filter. */
function sourceText(source: Record<string, unknown>): string {
  const runs = source.runs;
  if (Array.isArray(runs)) return `${runs.length} ${runs.length === 1 ? 'run' : 'runs'}`;
  if (source.filter !== undefined) return `filter ${oneLine(source.filter, 80)}`;
  return oneLine(source, 80);
}

/** Starts an experiment on a dataset: candidates as `name@version, …`, by step replay or full reruns; opens it. */
function NewExperiment(props: { datasets: Dataset[] }) {
  const [dataset, setDataset] = useState('');
  const [candidates, setCandidates] = useState('');
  const [mode, setMode] = useState<ExperimentMode>('step_replay');
  const act = useAction();
  const chosen = props.datasets.some((d) => d.id === dataset) ? dataset : props.datasets[0]!.id;
  return (
    <div class="actions">
      <h2>Start an experiment</h2>
      <form
        class="row"
        data-testid="experiment-form"
        onSubmit={(e) => {
          e.preventDefault();
          const list = candidates
            .split(',')
            .map((c) => c.trim())
            .filter((c) => c !== '');
          if (list.length === 0) return;
          void act.run(async () => {
            const created = await keel().experiments.create({ dataset: chosen, candidates: list, mode });
            navigate(`/experiments/${created.id}`);
          });
        }}
      >
        <select aria-label="Dataset" value={chosen} onChange={(e) => setDataset(e.currentTarget.value)}>
          {props.datasets.map((d) => (
            <option key={d.id} value={d.id}>
              {d.name} ({d.item_count} {d.item_count === 1 ? 'item' : 'items'})
            </option>
          ))}
        </select>
        <input
          class="candidates"
          aria-label="Candidates"
          placeholder="Candidates: name@version, name@version"
          value={candidates}
          onInput={(e) => setCandidates(e.currentTarget.value)}
        />
        <select aria-label="Mode" value={mode} onChange={(e) => setMode(e.currentTarget.value as ExperimentMode)}>
          <option value="step_replay">step replay (each recorded request again)</option>
          <option value="rerun">full reruns</option>
        </select>
        <button type="submit" disabled={act.busy || candidates.trim() === ''}>
          Start experiment
        </button>
      </form>
      <ErrorNote error={act.error} />
    </div>
  );
}
