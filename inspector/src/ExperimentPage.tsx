import type { ExperimentResults } from 'keel/client';
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ErrorNote } from './ErrorNote.tsx';
import { countsText, delta, modeLabel, score } from './experiment-format.ts';
import { money, ms, oneLine, shortId, time, tokens } from './format.ts';
import { keel, readAll } from './keel.ts';
import { Link } from './router.tsx';
import { StatusBadge } from './StatusBadge.tsx';
import type {
  CandidateResults,
  DatasetItemView,
  Decision,
  ExperimentItemView,
  Outcome,
  ReplayedStep,
} from './types.ts';
import { useAction } from './use-action.ts';
import { useResource } from './use-resource.ts';

/** One dataset item of the experiment: its source, and the experiment item of each candidate. */
interface ItemRow {
  datasetItemId: string;
  /** 1-based, in the dataset's order. */
  n: number;
  source: DatasetItemView | undefined;
  sourceRunId: string | undefined;
  byCandidate: Map<string, ExperimentItemView>;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * An experiment: the results per candidate (scores, metrics, the difference to the baseline), the
 * regressions worst first, then one row per dataset item with each candidate's score; an item
 * opens its comparison (step replay: each recorded decision beside each candidate's; full reruns:
 * the final answers and links to compare the runs) and takes a rating. Read again every 2 s while
 * the experiment runs.
 */
export function ExperimentPage(props: { id: string }) {
  const id = props.id;
  const [live, setLive] = useState(true);
  const poll = live ? { pollMs: 2000 } : {};
  const results = useResource(id, (c) => keel().experiments.results(id, c), poll);
  const items = useResource(
    id,
    async (c) => {
      const all = await readAll((q) => keel().experiments.items(id, q, c));
      return { ...all, data: all.data as ExperimentItemView[] };
    },
    poll,
  );
  // Read once: the scorers' order, and the dataset (gone if it was deleted: the results stay).
  const exp = useResource(id, (c) => keel().experiments.get(id, c));
  const r = results.data;
  const datasetId = r?.dataset_id ?? null;
  const dataset = useResource(datasetId, (c) => keel().datasets.get(datasetId!, c));
  const datasetItems = useResource(datasetId, async (c) => {
    const all = await readAll((q) => keel().datasets.items(datasetId!, q, c));
    return { ...all, data: all.data as DatasetItemView[] };
  });
  const [open, setOpen] = useState<string | null>(null);
  useEffect(() => {
    // A cancelled experiment's running items still end: read until they have.
    if (r && r.status !== 'running' && !r.counts.running && live) {
      setLive(false);
      // The items may have been read before the last of them ended.
      items.reload();
    }
  }, [r]);
  if (!r) return <ErrorNote error={results.error} />;

  const reload = () => {
    results.reload();
    items.reload();
  };
  const labels = r.candidates.map((c) => c.label);
  const rows = itemRows(items.data?.data ?? [], datasetItems.data?.data ?? []);
  const opened = rows.find((x) => x.datasetItemId === open);
  const scorers = [
    ...new Set([
      ...(exp.data?.scorers ?? []),
      ...r.candidates.flatMap((c) => Object.keys(c.scores).filter((k) => k !== 'score')),
    ]),
  ];
  return (
    <section class="experiment">
      <h1>{r.name}</h1>
      <div class="row" data-testid="experiment-summary">
        <StatusBadge status={r.status} />
        <span>{modeLabel(r.mode)}</span>
        <span class="muted">{countsText(r.counts)}</span>
        <span class="muted">
          baseline: {r.baseline === 'recorded' ? 'the recorded runs' : r.baseline} · dataset{' '}
          {dataset.data ? `${dataset.data.name} (${dataset.data.item_count} items)` : shortId(r.dataset_id)} · created{' '}
          {time(r.created_at)}
          {r.ended_at ? ` · ended ${time(r.ended_at)}` : ''}
        </span>
      </div>
      <ErrorNote error={results.error} />

      <h2>Results</h2>
      <ResultsTable results={r} scorers={scorers} />

      <Regressions
        results={r}
        rows={rows}
        onOpen={(id) => {
          setOpen(id);
          requestAnimationFrame(() => document.getElementById('item-detail')?.scrollIntoView());
        }}
      />

      <h2>Items</h2>
      <ErrorNote error={items.error} />
      <ItemsTable
        rows={rows}
        labels={labels}
        results={r}
        open={open}
        onOpen={(id) => setOpen(open === id ? null : id)}
      />
      {items.data?.truncated && <p class="muted">The first {items.data.data.length} items are shown.</p>}
      {opened && (
        <ItemDetail
          key={opened.datasetItemId}
          experimentId={r.id}
          row={opened}
          labels={labels}
          mode={r.mode}
          onClose={() => setOpen(null)}
          onRated={reload}
        />
      )}
    </section>
  );
}

/** The experiment's items grouped by dataset item, in the dataset's order. */
function itemRows(items: ExperimentItemView[], sources: DatasetItemView[]): ItemRow[] {
  const byId = new Map(sources.map((s) => [s.id, s]));
  const rows = new Map<string, ItemRow>();
  for (const i of items) {
    let row = rows.get(i.dataset_item_id);
    if (!row) {
      const source = byId.get(i.dataset_item_id);
      row = {
        datasetItemId: i.dataset_item_id,
        n: rows.size + 1,
        source,
        sourceRunId: source?.source_run_id,
        byCandidate: new Map(),
      };
      rows.set(i.dataset_item_id, row);
    }
    row.byCandidate.set(i.candidate, i);
    row.sourceRunId ??= i.result?.sourceRunId;
  }
  return [...rows.values()];
}

/** The baseline's score of a dataset item: the recorded run's, or the baseline candidate's. */
function baselineScore(row: ItemRow, results: ExperimentResults): number | undefined {
  if (results.baseline === 'recorded') {
    for (const i of row.byCandidate.values()) if (i.result?.baseline) return i.result.baseline.score;
    return undefined;
  }
  const b = row.byCandidate.get(results.baseline);
  return b?.status === 'done' ? num(b.scores.score) : undefined;
}

function ResultsTable(props: { results: ExperimentResults; scorers: string[] }) {
  const r = props.results;
  return (
    <table class="list results" data-testid="results">
      <thead>
        <tr>
          <th>Candidate</th>
          <th>Agent</th>
          <th>Items</th>
          <th>Score</th>
          {props.scorers.map((s) => (
            <th key={s}>{s}</th>
          ))}
          <th>Tokens</th>
          <th>Cost</th>
          <th>Latency</th>
          <th>vs baseline</th>
        </tr>
      </thead>
      <tbody>
        {r.candidates.map((c) => (
          <ResultRow key={c.label} c={c} scorers={props.scorers} isBaseline={c.label === r.baseline} />
        ))}
      </tbody>
    </table>
  );
}

function ResultRow(props: { c: CandidateResults; scorers: string[]; isBaseline: boolean }) {
  const c = props.c;
  const d = delta(c.vs_baseline);
  const has = c.done > 0;
  return (
    <tr data-testid="result-row" data-candidate={c.label}>
      <td>
        <strong>{c.label}</strong>
        {props.isBaseline && <span class="badge">baseline</span>}
      </td>
      <td class="mono">{c.agent}</td>
      <td>
        {c.done} of {c.items} done
        {c.failed > 0 && <span class="error"> · {c.failed} failed</span>}
      </td>
      <td class="overall" data-testid="overall">
        {has ? score(c.scores.score) : '–'}
      </td>
      {props.scorers.map((s) => (
        <td key={s} data-scorer={s}>
          {score(c.scores[s])}
        </td>
      ))}
      <td>{has ? tokens(Math.round(c.metrics.tokens ?? 0)) : '–'}</td>
      <td>{has ? money(c.metrics.cost ?? 0) : '–'}</td>
      <td>{has ? ms(c.metrics.latency_ms) : '–'}</td>
      <td class={d.cls} data-testid="vs-baseline">
        {props.isBaseline ? <span class="muted">baseline</span> : d.text}
      </td>
    </tr>
  );
}

/** Every candidate's items scored below the baseline, the worst first. */
function Regressions(props: { results: ExperimentResults; rows: ItemRow[]; onOpen: (datasetItemId: string) => void }) {
  const all = props.results.candidates
    .flatMap((c) => c.regressions.map((x) => ({ ...x, candidate: c.label })))
    .sort((a, b) => a.diff - b.diff);
  const anyDone = props.results.candidates.some((c) => c.done > 0 && c.label !== props.results.baseline);
  const n = (id: string) => props.rows.find((x) => x.datasetItemId === id)?.n;
  return (
    <section data-testid="regressions">
      <h2>Regressions {all.length > 0 && <span class="badge worse">{all.length}</span>}</h2>
      {all.length === 0 ? (
        <p class="empty">{anyDone ? 'No item scored below the baseline.' : 'No item is done yet.'}</p>
      ) : (
        <table class="list">
          <thead>
            <tr>
              <th>Candidate</th>
              <th>Item</th>
              <th>Source run</th>
              <th>Score</th>
              <th>Baseline</th>
              <th>Diff</th>
            </tr>
          </thead>
          <tbody>
            {all.map((x) => (
              <tr key={`${x.candidate}/${x.dataset_item_id}`} data-testid="regression-row">
                <td>{x.candidate}</td>
                <td>
                  <button class="link" onClick={() => props.onOpen(x.dataset_item_id)}>
                    item {n(x.dataset_item_id) ?? shortId(x.dataset_item_id)}
                  </button>
                </td>
                <td>
                  <Link to={`/runs/${x.source_run_id}`}>run {shortId(x.source_run_id)}</Link>
                </td>
                <td>{score(x.score)}</td>
                <td>{score(x.baseline)}</td>
                <td class={delta(x.diff).cls}>{delta(x.diff).text}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

const ITEM_STATUS_CLASS: Record<ExperimentItemView['status'], string> = {
  pending: 'status-queued',
  running: 'status-running',
  done: 'status-completed',
  failed: 'status-failed',
};

function ItemsTable(props: {
  rows: ItemRow[];
  labels: string[];
  results: ExperimentResults;
  open: string | null;
  onOpen: (datasetItemId: string) => void;
}) {
  const recorded = props.results.baseline === 'recorded';
  return (
    <table class="list items" data-testid="items">
      <thead>
        <tr>
          <th>Item</th>
          <th>Asked</th>
          <th>Source run</th>
          {recorded && <th>Recorded</th>}
          {props.labels.map((l) => (
            <th key={l}>{l}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((row) => {
          const base = baselineScore(row, props.results);
          return (
            <tr
              key={row.datasetItemId}
              data-testid="item-row"
              class={props.open === row.datasetItemId ? 'clickable selected' : 'clickable'}
              onClick={() => props.onOpen(row.datasetItemId)}
            >
              <td>
                <button class="link" aria-expanded={props.open === row.datasetItemId}>
                  item {row.n}
                </button>
              </td>
              <td>{row.source?.trigger ? oneLine(row.source.trigger, 100) : <span class="muted">–</span>}</td>
              <td>
                {row.sourceRunId ? (
                  <span onClick={(e) => e.stopPropagation()}>
                    <Link to={`/runs/${row.sourceRunId}`}>run {shortId(row.sourceRunId)}</Link>
                  </span>
                ) : (
                  '–'
                )}
              </td>
              {recorded && <td>{score(base)}</td>}
              {props.labels.map((l) => (
                <ItemCell
                  key={l}
                  item={row.byCandidate.get(l)}
                  baseline={l === props.results.baseline ? undefined : base}
                />
              ))}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** A candidate's score on an item (red when below the baseline's), its rating, or how far it is. */
function ItemCell(props: { item: ExperimentItemView | undefined; baseline: number | undefined }) {
  const i = props.item;
  if (!i) return <td class="muted">–</td>;
  const s = num(i.scores.score);
  const rating = num(i.scores.rating);
  const worse = s !== undefined && props.baseline !== undefined && s < props.baseline - 1e-9;
  return (
    <td data-testid="item-score" data-candidate={i.candidate} class={worse ? 'worse' : ''}>
      {i.status === 'done' ? score(s) : <span class={`badge ${ITEM_STATUS_CLASS[i.status]}`}>{i.status}</span>}
      {rating !== undefined && (
        <span class="muted" data-testid="item-rating">
          {' '}
          · rated {score(rating)}
        </span>
      )}
    </td>
  );
}

/** One dataset item, each candidate beside the recording: scores, rating, and the decisions or runs. */
function ItemDetail(props: {
  experimentId: string;
  row: ItemRow;
  labels: string[];
  mode: ExperimentResults['mode'];
  onClose: () => void;
  onRated: () => void;
}) {
  const row = props.row;
  const src = row.source;
  return (
    <section class="card item-detail" id="item-detail" data-testid="item-detail">
      <div class="row spread">
        <h2>Item {row.n}</h2>
        <button class="link" onClick={props.onClose}>
          close
        </button>
      </div>
      {src?.trigger && <blockquote class="assistant-text user-text">{src.trigger}</blockquote>}
      <div class="row muted">
        {row.sourceRunId && <Link to={`/runs/${row.sourceRunId}`}>source run {shortId(row.sourceRunId)}</Link>}
        {src && (
          <span>
            recorded on {src.agent.name}@{src.agent.version} · {src.steps} {src.steps === 1 ? 'step' : 'steps'} ·{' '}
            {src.reference.status}
          </span>
        )}
        {src?.expected !== null && src?.expected !== undefined && <span>expected: {oneLine(src.expected, 200)}</span>}
        {src?.notes && <span>notes: {src.notes}</span>}
      </div>
      <div class="cards" style={{ gridTemplateColumns: `repeat(${props.labels.length}, minmax(0, 1fr))` }}>
        {props.labels.map((l) => (
          <CandidateCard
            key={l}
            label={l}
            item={row.byCandidate.get(l)}
            sourceRunId={row.sourceRunId}
            experimentId={props.experimentId}
            onRated={props.onRated}
          />
        ))}
      </div>
      {props.mode === 'step_replay' ? (
        <ReplaySteps row={row} labels={props.labels} />
      ) : (
        <RerunOutcomes row={row} labels={props.labels} />
      )}
    </section>
  );
}

function CandidateCard(props: {
  label: string;
  item: ExperimentItemView | undefined;
  sourceRunId: string | undefined;
  experimentId: string;
  onRated: () => void;
}) {
  const i = props.item;
  const res = i?.result;
  const scores = Object.entries(i?.scores ?? {}).filter(
    ([k, v]) => k !== 'score' && k !== 'rating' && num(v) !== undefined,
  );
  return (
    <div class="card candidate" data-testid="candidate-card" data-candidate={props.label}>
      <h3>
        {props.label} {i && <span class={`badge ${ITEM_STATUS_CLASS[i.status]}`}>{i.status}</span>}
      </h3>
      {i?.status === 'done' && (
        <div>
          score <strong>{score(num(i.scores.score))}</strong>
          <span class="muted">{scores.map(([k, v]) => ` · ${k} ${score(num(v))}`).join('')}</span>
        </div>
      )}
      {res?.steps && (
        <div class="muted">
          {res.requestsMatched ?? 0} of {res.steps.length} requests the same, byte for byte
        </div>
      )}
      {res?.metrics && (
        <div class="muted">
          {tokens(res.metrics.tokens)} tokens · {money(res.metrics.cost ?? 0)} · {ms(res.metrics.latency_ms)}
        </div>
      )}
      {i?.run_id && (
        <div class="row">
          <Link to={`/runs/${i.run_id}`}>run {shortId(i.run_id)}</Link>
          {props.sourceRunId && (
            <Link to={`/compare/${props.sourceRunId}/${i.run_id}`}>compare with the source run</Link>
          )}
        </div>
      )}
      {i?.error && <pre class="args error">{oneLine(i.error.message ?? i.error, 400)}</pre>}
      {i?.status === 'done' && <RateForm experimentId={props.experimentId} item={i} onRated={props.onRated} />}
    </div>
  );
}

/** A late score named `rating`, from 0 to 1, merged into the item's scores. */
function RateForm(props: { experimentId: string; item: ExperimentItemView; onRated: () => void }) {
  const [value, setValue] = useState('');
  const act = useAction(props.onRated);
  const rating = num(props.item.scores.rating);
  const v = Number(value);
  const valid = value.trim() !== '' && Number.isFinite(v) && v >= 0 && v <= 1;
  return (
    <form
      class="row rate"
      data-testid="rate"
      onSubmit={(e) => {
        e.preventDefault();
        if (!valid) return;
        void act.run(async () => {
          await keel().experiments.score(props.experimentId, props.item.id, { rating: v });
          setValue('');
        });
      }}
    >
      <input
        type="number"
        min="0"
        max="1"
        step="0.05"
        aria-label={`Rating of ${props.item.candidate}`}
        placeholder="0 to 1"
        value={value}
        onInput={(e) => setValue(e.currentTarget.value)}
      />
      <button type="submit" class="secondary" disabled={act.busy || !valid}>
        Rate
      </button>
      {rating !== undefined && <span data-testid="rating">rated {score(rating)}</span>}
      <ErrorNote error={act.error} />
    </form>
  );
}

const sameDecision = (a: Decision, b: Decision) =>
  a.text === b.text && JSON.stringify(a.toolCalls) === JSON.stringify(b.toolCalls);

/** Step replay: each recorded step's decision beside each candidate's, on the same request. */
function ReplaySteps(props: { row: ItemRow; labels: string[] }) {
  const byLabel = new Map(props.labels.map((l) => [l, props.row.byCandidate.get(l)?.result?.steps]));
  const numbers = [...new Set([...byLabel.values()].flatMap((s) => (s ?? []).map((x) => x.step)))].sort(
    (a, b) => a - b,
  );
  if (numbers.length === 0) return <p class="empty">No candidate has replayed this item yet.</p>;
  const stepOf = (l: string, n: number) => byLabel.get(l)?.find((x) => x.step === n);
  return (
    <table class="list replay" data-testid="replay">
      <thead>
        <tr>
          <th>Step</th>
          <th>Recorded</th>
          {props.labels.map((l) => (
            <th key={l}>{l}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {numbers.map((n) => {
          const recorded = props.labels.map((l) => stepOf(l, n)).find((x) => x)!.recorded;
          return (
            <tr key={n} data-testid="replay-step">
              <th>{n}</th>
              <td data-testid="step-recorded">
                <DecisionView d={recorded} />
              </td>
              {props.labels.map((l) => (
                <ReplayCell key={l} label={l} step={stepOf(l, n)} item={props.row.byCandidate.get(l)} />
              ))}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

function ReplayCell(props: { label: string; step: ReplayedStep | undefined; item: ExperimentItemView | undefined }) {
  const s = props.step;
  if (!s)
    return (
      <td class="muted" data-testid="step-candidate" data-candidate={props.label}>
        {props.item && props.item.status !== 'done' ? props.item.status : '–'}
      </td>
    );
  return (
    <td data-testid="step-candidate" data-candidate={props.label}>
      <div class="row marks">
        {s.requestMatches ? (
          <span class="mark same" data-testid="request-match" title="the same request fingerprint as the recorded step">
            = request, byte for byte
          </span>
        ) : (
          <span
            class="mark differs"
            data-testid="request-match"
            title="another request fingerprint than the recorded step"
          >
            ≠ request differs
          </span>
        )}
        {s.candidate &&
          (sameDecision(s.recorded, s.candidate) ? (
            <span class="mark same">= same decision</span>
          ) : (
            <span class="mark differs">≠ decision differs</span>
          ))}
      </div>
      {s.candidate ? <DecisionView d={s.candidate} /> : <p class="error">{s.error ?? 'no decision'}</p>}
    </td>
  );
}

function DecisionView(props: { d: Decision }) {
  const d = props.d;
  return (
    <div class="decision">
      {d.text ? (
        <blockquote class="assistant-text" data-testid="decision-text">
          {d.text}
        </blockquote>
      ) : (
        <p class="empty">no text</p>
      )}
      {d.toolCalls.map((c, i) => (
        <div key={i} class="mono call" data-testid="decision-call">
          <span class="tool-name">{c.name}</span> {oneLine(c.input, 200)}
        </div>
      ))}
    </div>
  );
}

/** Full reruns: the recorded outcome beside each candidate's run's (each run compares with the source, step by step). */
function RerunOutcomes(props: { row: ItemRow; labels: string[] }) {
  const outcomes = props.labels.map((l) => props.row.byCandidate.get(l)?.result?.outcome);
  const reference =
    props.labels.map((l) => props.row.byCandidate.get(l)?.result?.reference).find((x) => x) ??
    props.row.source?.reference;
  if (!reference && outcomes.every((o) => !o)) return <p class="empty">No candidate's run has ended yet.</p>;
  const cell = (o: Outcome | undefined, key: string, f: (o: Outcome) => ComponentChildren) => (
    <td key={key}>{o ? f(o) : <span class="muted">–</span>}</td>
  );
  const rows: Array<[string, (o: Outcome) => ComponentChildren]> = [
    ['Final answer', (o) => (o.finalText ? <blockquote class="assistant-text">{o.finalText}</blockquote> : '–')],
    ['Status', (o) => o.status],
    ['Tool calls', (o) => o.toolCalls.map((c) => c.name).join(', ') || '–'],
  ];
  return (
    <table class="list replay" data-testid="rerun-outcomes">
      <thead>
        <tr>
          <th />
          <th>Recorded</th>
          {props.labels.map((l) => (
            <th key={l}>{l}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {rows.map(([name, f]) => (
          <tr key={name}>
            <th>{name}</th>
            {cell(reference, 'recorded', f)}
            {outcomes.map((o, i) => cell(o, props.labels[i]!, f))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
