/**
 * Experiments (issue 40): a dataset against candidates (agent versions, or overrides) and a
 * baseline (the recorded runs, or another candidate), by step replay or by full reruns. An
 * experiment is a batch (store.batches) with one item per dataset item and candidate: each runs
 * once (claimed with a lease, finished under its fencing token), is scored when it ends, and late
 * scores merge into it by API. `experimentResults` aggregates per candidate, with each item's
 * difference to the baseline and the items that got worse first.
 */
import { newId } from '../../core/index.ts';
import { runEvents } from '../../session/index.ts';
import {
  NotFoundError,
  StoreError,
  type BatchItemRecord,
  type BatchRecord,
  type JsonObject,
  type NewBatchItem,
} from '../../store/index.ts';
import { withOverrides } from '../reruns/rerun-agent.ts';
import type { AgentOverrides } from '../reruns/rerun-lineage.ts';
import type { ToolPolicies } from '../reruns/tool-policy.ts';
import { allItems, datasetOf } from './datasets.ts';
import type { EvalsHost } from './evals-host.ts';
import { outcomeOf, type FrozenRun, type Outcome } from './frozen-run.ts';
import { BUILT_IN_SCORERS, metricsOf, type ScoredItem, type Scorer } from './scorers.ts';
import { recordedStepOutcome, replaySteps } from './step-replay.ts';

export type ExperimentMode = 'step_replay' | 'rerun';

/** A candidate: a registered agent version, changed by overrides if given; `label` names it in results (default `agent`). */
export interface Candidate {
  label: string;
  agent: string;
  overrides?: AgentOverrides;
}

export type CandidateInput = string | { agent: string; label?: string; overrides?: AgentOverrides };

export interface ExperimentRequest {
  dataset: string;
  name?: string;
  /** Default `step_replay`. */
  mode?: ExperimentMode;
  candidates: CandidateInput[];
  /** What the candidates are compared with: the recorded runs (default), or another candidate. */
  baseline?: 'recorded' | CandidateInput;
  /** Scorer names (built-in and configured); default all of them. */
  scorers?: string[];
  /** Tool policies of full reruns (see docs/evals.md); default by effect class. */
  tools?: 'reuse' | 'execute' | ToolPolicies;
  /** Items running at once (default 4). */
  concurrency?: number;
}

/** An experiment's batch spec (as stored). */
export interface ExperimentSpec {
  name: string;
  datasetId: string;
  mode: ExperimentMode;
  candidates: Candidate[];
  /** The baseline candidate's label, or `recorded`. */
  baseline: 'recorded' | Candidate;
  scorers: string[];
  tools?: 'reuse' | 'execute' | ToolPolicies;
}

/** What an experiment item is about. */
interface Subject {
  datasetItemId: string;
  /** The run the dataset item froze. */
  sourceRunId: string;
  candidate: string;
}

const RECORDED = 'recorded';

function candidateOf(c: CandidateInput, fallbackLabel?: string): Candidate {
  const spec = typeof c === 'string' ? { agent: c } : c;
  return {
    label: spec.label ?? fallbackLabel ?? spec.agent,
    agent: spec.agent,
    ...(spec.overrides && Object.keys(spec.overrides).length > 0 ? { overrides: spec.overrides } : {}),
  };
}

/** Every scorer this runtime knows: the built-in ones and the configured ones. */
export function scorersOf(host: Pick<EvalsHost, 'scorers'>): Record<string, Scorer> {
  return { ...BUILT_IN_SCORERS, ...host.scorers };
}

/** Creates and starts an experiment of `tenant`'s dataset: its items are claimed by the runtime's workers. */
export async function createExperiment(host: EvalsHost, tenant: string, req: ExperimentRequest): Promise<BatchRecord> {
  const dataset = await datasetOf(host, tenant, req.dataset);
  if (req.candidates.length === 0) throw new StoreError('validation', 'candidates: give at least one');
  const candidates = req.candidates.map((c) => candidateOf(c));
  const baseline =
    req.baseline === undefined || req.baseline === RECORDED ? RECORDED : candidateOf(req.baseline, 'baseline');
  const all = baseline === RECORDED ? candidates : [...candidates, baseline];
  const labels = new Set<string>();
  for (const c of all) {
    if (c.label === RECORDED)
      throw new StoreError('validation', `"${RECORDED}" names the recorded runs, not a candidate`);
    if (labels.has(c.label))
      throw new StoreError('validation', `two candidates are labelled ${c.label}: give them labels of their own`);
    labels.add(c.label);
    // Refused now, not when an item runs: an unknown agent, tool or model.
    withOverrides(host.agentFor(c.agent), c.overrides, host.resolveModel);
  }
  const known = scorersOf(host);
  const scorers = req.scorers ?? Object.keys(known);
  const unknown = scorers.filter((s) => !known[s]);
  if (unknown.length > 0)
    throw new StoreError('validation', `no scorer ${unknown.join(', ')} (known: ${Object.keys(known).join(', ')})`);
  const concurrency = req.concurrency ?? 4;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256)
    throw new StoreError('validation', 'concurrency: a whole number from 1 to 256');
  const spec: ExperimentSpec = {
    name: req.name ?? `${dataset.name}: ${candidates.map((c) => c.label).join(', ')}`,
    datasetId: dataset.id,
    mode: req.mode ?? 'step_replay',
    candidates,
    baseline,
    scorers,
    ...(req.tools !== undefined ? { tools: req.tools } : {}),
  };
  const items: NewBatchItem[] = [];
  for (const item of await allItems(host, dataset.id))
    for (const c of all)
      items.push({
        id: newId(),
        key: `${item.id}/${c.label}`,
        sourceSessionId: item.sourceSessionId,
        subject: { datasetItemId: item.id, sourceRunId: item.sourceRunId, candidate: c.label } satisfies Subject,
      });
  const batch = await host.store.batches.create(
    {
      id: newId(),
      tenant,
      kind: 'experiment',
      spec: spec as unknown as JsonObject,
      concurrency,
      createdAt: Date.now(),
    },
    items,
  );
  host.wake();
  return batch;
}

/** What an experiment item came to: its result and scores (stored when it ends). */
export interface ItemEnd {
  result: JsonObject;
  scores: Record<string, number>;
}

/**
 * Runs one experiment item: the candidate on the dataset item (step replay, or a full rerun
 * recorded on the item in the run's own transaction), then its scores. `runId` is the rerun an
 * earlier claim of the item started (it is waited for, never started again).
 */
export async function runExperimentItem(
  host: EvalsHost,
  batch: BatchRecord,
  item: BatchItemRecord,
  signal: AbortSignal,
): Promise<ItemEnd> {
  const spec = batch.spec as unknown as ExperimentSpec;
  const subject = item.subject as unknown as Subject;
  const source = await host.store.datasets.item(subject.datasetItemId);
  if (!source) throw new NotFoundError('dataset item', subject.datasetItemId);
  const frozen = source.data as unknown as FrozenRun;
  const candidate = [...spec.candidates, ...(spec.baseline === RECORDED ? [] : [spec.baseline])].find(
    (c) => c.label === subject.candidate,
  );
  if (!candidate) throw new NotFoundError('candidate', subject.candidate);

  let outcome: Outcome;
  let reference: Outcome;
  const result: JsonObject = { mode: spec.mode, candidate: candidate.label, sourceRunId: source.sourceRunId };
  if (spec.mode === 'step_replay') {
    const agent = withOverrides(host.agentFor(candidate.agent), candidate.overrides, host.resolveModel);
    const replay = await replaySteps(agent, frozen, signal);
    outcome = replay.outcome;
    reference = recordedStepOutcome(frozen);
    result.steps = replay.steps as unknown as JsonObject[];
    result.requestsMatched = replay.steps.filter((s) => s.requestMatches).length;
  } else {
    let runId = item.runId;
    if (runId === null) {
      const first = frozen.steps[0]?.step ?? 1;
      const run = await host.rerun(
        source.sourceRunId,
        {
          from: first,
          agent: candidate.agent,
          ...(candidate.overrides ? { overrides: candidate.overrides } : {}),
          ...(spec.tools !== undefined ? { tools: spec.tools } : {}),
          title: `${spec.name}: ${candidate.label}`,
        },
        async (tx, run) => {
          // The item records its run in the run's own transaction: a claim after a crash finds it.
          if (!(await tx.batches.setRun(item.id, item.fencingToken, run.id)))
            throw new StoreError('conflict', `experiment item ${item.id} is no longer held by this worker`);
        },
      );
      runId = run.id;
    }
    const ended = await host.waitTerminal(runId, signal);
    outcome = outcomeOf(ended, await runEvents(host.log, ended.sessionId, ended.id));
    reference = frozen.outcome;
    result.runId = runId;
  }
  const scored: ScoredItem = {
    id: source.id,
    sourceRunId: source.sourceRunId,
    expected: source.expected as ScoredItem['expected'],
    notes: source.notes,
  };
  const scores = await score(host, spec.scorers, scored, outcome, reference);
  result.outcome = outcome as unknown as JsonObject;
  result.reference = reference as unknown as JsonObject;
  result.metrics = metricsOf(outcome);
  if (spec.baseline === RECORDED) {
    // The recorded run against itself: what a candidate is measured from.
    const base = await score(host, spec.scorers, scored, reference, reference);
    result.baseline = { score: base.score!, metrics: metricsOf(reference) };
  }
  return { result, scores };
}

/** Each scorer's score, and `score`: their mean. */
async function score(
  host: EvalsHost,
  names: readonly string[],
  item: ScoredItem,
  candidate: Outcome,
  reference: Outcome,
): Promise<Record<string, number>> {
  const known = scorersOf(host);
  const scores: Record<string, number> = {};
  for (const name of names) {
    const s = await known[name]!(item, candidate, reference);
    if (typeof s !== 'number' || !Number.isFinite(s)) throw new Error(`scorer ${name} gave ${String(s)}, not a number`);
    scores[name] = s;
  }
  const values = Object.values(scores);
  scores.score = values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
  return scores;
}

export interface CandidateResults {
  label: string;
  agent: string;
  items: number;
  done: number;
  failed: number;
  /** Mean of each score over the items done (late scores too). */
  scores: Record<string, number>;
  /** Mean tokens, cost and latency. */
  metrics: Record<string, number>;
  /** Mean score minus the baseline's over the same items. */
  vsBaseline: number | null;
  /** Items scored below the baseline, the worst first. */
  regressions: Array<{ datasetItemId: string; sourceRunId: string; score: number; baseline: number; diff: number }>;
}

export interface ExperimentResults {
  id: string;
  name: string;
  status: BatchRecord['status'];
  mode: ExperimentMode;
  datasetId: string;
  baseline: string;
  counts: Record<string, number>;
  candidates: CandidateResults[];
  createdAt: number;
  endedAt: number | null;
}

/** An experiment's results so far, per candidate (see the file's comment). */
export async function experimentResults(host: EvalsHost, batch: BatchRecord): Promise<ExperimentResults> {
  const spec = batch.spec as unknown as ExperimentSpec;
  const items = await allBatchItems(host, batch.id);
  const byCandidate = new Map<string, BatchItemRecord[]>();
  for (const i of items) {
    const label = (i.subject as unknown as Subject).candidate;
    const list = byCandidate.get(label);
    if (list) list.push(i);
    else byCandidate.set(label, [i]);
  }
  const baselineLabel = spec.baseline === RECORDED ? RECORDED : spec.baseline.label;
  const baselineOf = (datasetItemId: string, own: BatchItemRecord): number | undefined => {
    if (spec.baseline === RECORDED) return (own.result?.baseline as { score?: number } | undefined)?.score;
    const b = (byCandidate.get(baselineLabel) ?? []).find(
      (i) => (i.subject as unknown as Subject).datasetItemId === datasetItemId && i.status === 'done',
    );
    return b ? num(b.scores.score) : undefined;
  };
  const candidates = [...spec.candidates, ...(spec.baseline === RECORDED ? [] : [spec.baseline])].map(
    (c): CandidateResults => {
      const own = byCandidate.get(c.label) ?? [];
      const done = own.filter((i) => i.status === 'done');
      const scores: Record<string, number> = {};
      const names = new Set(done.flatMap((i) => Object.keys(i.scores)));
      for (const n of names)
        scores[n] = mean(done.flatMap((i) => (typeof i.scores[n] === 'number' ? [i.scores[n] as number] : [])));
      const metrics: Record<string, number> = {};
      for (const m of ['tokens', 'cost', 'latency_ms'])
        metrics[m] = mean(done.map((i) => num((i.result?.metrics as Record<string, unknown> | undefined)?.[m])));
      const regressions: CandidateResults['regressions'] = [];
      const diffs: number[] = [];
      if (c.label !== baselineLabel)
        for (const i of done) {
          const s = i.subject as unknown as Subject;
          const base = baselineOf(s.datasetItemId, i);
          if (base === undefined) continue;
          const diff = num(i.scores.score) - base;
          diffs.push(diff);
          if (diff < -1e-9)
            regressions.push({
              datasetItemId: s.datasetItemId,
              sourceRunId: String(i.result?.sourceRunId ?? ''),
              score: num(i.scores.score),
              baseline: base,
              diff,
            });
        }
      regressions.sort((a, b) => a.diff - b.diff);
      return {
        label: c.label,
        agent: c.agent,
        items: own.length,
        done: done.length,
        failed: own.filter((i) => i.status === 'failed').length,
        scores,
        metrics,
        vsBaseline: c.label === baselineLabel || diffs.length === 0 ? null : mean(diffs),
        regressions,
      };
    },
  );
  return {
    id: batch.id,
    name: spec.name,
    status: batch.status,
    mode: spec.mode,
    datasetId: spec.datasetId,
    baseline: baselineLabel,
    counts: await host.store.batches.counts(batch.id),
    candidates,
    createdAt: batch.createdAt,
    endedAt: batch.endedAt,
  };
}

/** Every item of a batch, in order. */
export async function allBatchItems(host: Pick<EvalsHost, 'store'>, batchId: string): Promise<BatchItemRecord[]> {
  const out: BatchItemRecord[] = [];
  for (let after: number | undefined; ;) {
    const page = await host.store.batches.items(batchId, {
      limit: 1000,
      ...(after !== undefined ? { afterPosition: after } : {}),
    });
    out.push(...page);
    if (page.length < 1000) return out;
    after = page.at(-1)!.position;
  }
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
