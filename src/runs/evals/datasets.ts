/**
 * Datasets from the log (issue 40): a list of runs, or a filter, becomes items, each a frozen copy
 * of one ended run (frozen-run.ts) with an optional expected answer and notes. Erasing a source
 * session removes its items (the store does it with the session).
 */
import { newId } from '../../core/index.ts';
import type { JsonValue } from '../../model/index.ts';
import {
  NotFoundError,
  StoreError,
  type DatasetItemRecord,
  type DatasetRecord,
  type JsonObject,
  type NewDatasetItem,
  type RunRecord,
} from '../../store/index.ts';
import { isTerminal } from '../lifecycle/run-status.ts';
import type { EvalsHost } from './evals-host.ts';
import { freezeRun } from './frozen-run.ts';
import { matchingRuns, type RunFilter } from './run-filter.ts';

/** Items at most in one dataset. */
export const MAX_DATASET_ITEMS = 5_000;

export interface DatasetRequest {
  name: string;
  /** The runs to take (ended ones), each with an expected answer or notes if wanted... */
  runs?: Array<string | { runId: string; expected?: JsonValue; notes?: string }>;
  /** ... or the runs a filter matches (ended ones, oldest first). */
  filter?: RunFilter;
}

/** Creates a dataset of `tenant`'s runs; a run of another tenant is not found, one that has not ended is refused. */
export async function createDataset(host: EvalsHost, tenant: string, req: DatasetRequest): Promise<DatasetRecord> {
  if ((req.runs === undefined) === (req.filter === undefined))
    throw new StoreError('validation', 'a dataset is made from `runs` or from a `filter`: give one of them');
  const picked: Array<{ run: RunRecord; expected?: JsonValue; notes?: string }> = [];
  if (req.runs) {
    if (req.runs.length === 0) throw new StoreError('validation', 'runs: give at least one run');
    if (req.runs.length > MAX_DATASET_ITEMS)
      throw new StoreError('validation', `runs: at most ${MAX_DATASET_ITEMS} in one dataset`);
    for (const r of req.runs) {
      const spec = typeof r === 'string' ? { runId: r } : r;
      const run = await host.store.runs.get(spec.runId);
      const session = run && (await host.store.sessions.get(run.sessionId));
      if (!run || !session || session.tenant !== tenant || session.erasedAt !== null)
        throw new NotFoundError('run', spec.runId);
      if (!isTerminal(run.status))
        throw new StoreError('validation', `run ${run.id} is ${run.status}: a dataset takes runs that have ended`);
      picked.push({ run, ...spec });
    }
  } else {
    const runs = await matchingRuns(host.store, tenant, req.filter!, MAX_DATASET_ITEMS);
    for (const run of runs) if (isTerminal(run.status)) picked.push({ run });
    if (picked.length === 0) throw new StoreError('validation', 'the filter matches no run that has ended');
  }
  const items: NewDatasetItem[] = [];
  for (const p of picked) {
    const frozen = await freezeRun(host.log, p.run);
    if (frozen.steps.length === 0) continue;
    items.push({
      id: newId(),
      sourceSessionId: p.run.sessionId,
      sourceRunId: p.run.id,
      data: frozen as unknown as JsonObject,
      expected: p.expected ?? null,
      notes: p.notes ?? null,
    });
  }
  if (items.length === 0) throw new StoreError('validation', 'none of these runs recorded a step');
  const source: JsonObject = req.runs
    ? { runs: picked.map((p) => p.run.id) }
    : { filter: req.filter as unknown as JsonObject };
  return host.store.datasets.create({ id: newId(), tenant, name: req.name, source, createdAt: Date.now() }, items);
}

/** The dataset, if it is `tenant`'s (another tenant's is not found). */
export async function datasetOf(host: EvalsHost, tenant: string, id: string): Promise<DatasetRecord> {
  const d = await host.store.datasets.get(id);
  if (!d || d.tenant !== tenant) throw new NotFoundError('dataset', id);
  return d;
}

/** Every item of a dataset, in order. */
export async function allItems(host: EvalsHost, datasetId: string): Promise<DatasetItemRecord[]> {
  const out: DatasetItemRecord[] = [];
  for (let after: number | undefined; ;) {
    const page = await host.store.datasets.items(datasetId, {
      limit: 500,
      ...(after !== undefined ? { afterPosition: after } : {}),
    });
    out.push(...page);
    if (page.length < 500) return out;
    after = page.at(-1)!.position;
  }
}
