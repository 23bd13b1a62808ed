/**
 * Bulk reruns (issue 40): every run a filter matches, rerun the same way ("fork every run that
 * failed yesterday onto version 3"), with a concurrency limit, as one tracked batch: an item per
 * source run, each rerun started once (recorded on the item in the run's own transaction).
 */
import { newId } from '../../core/index.ts';
import {
  StoreError,
  type BatchItemRecord,
  type BatchRecord,
  type JsonObject,
  type NewBatchItem,
} from '../../store/index.ts';
import type { RerunRequest } from '../reruns/start-rerun.ts';
import type { EvalsHost } from './evals-host.ts';
import type { ItemEnd } from './experiments.ts';
import { matchingRuns, type RunFilter } from './run-filter.ts';

/** Source runs at most in one bulk rerun. */
export const MAX_BULK_RERUNS = 10_000;

export interface BulkRerunRequest {
  filter: RunFilter;
  /** How each run is rerun (`message` is not taken: each run keeps its own). */
  rerun: Omit<RerunRequest, 'message' | 'options'>;
  /** Reruns at once (default 4). */
  concurrency?: number;
}

export async function createBulkRerun(host: EvalsHost, tenant: string, req: BulkRerunRequest): Promise<BatchRecord> {
  const concurrency = req.concurrency ?? 4;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256)
    throw new StoreError('validation', 'concurrency: a whole number from 1 to 256');
  if (req.rerun.agent !== undefined) host.agentFor(req.rerun.agent);
  const runs = await matchingRuns(host.store, tenant, req.filter, MAX_BULK_RERUNS);
  if (runs.length === 0) throw new StoreError('validation', 'the filter matches no run');
  const items: NewBatchItem[] = runs.map((r) => ({
    id: newId(),
    key: r.id,
    sourceSessionId: r.sessionId,
    subject: { runId: r.id },
  }));
  const batch = await host.store.batches.create(
    {
      id: newId(),
      tenant,
      kind: 'reruns',
      spec: { filter: req.filter, rerun: req.rerun } as unknown as JsonObject,
      concurrency,
      createdAt: Date.now(),
    },
    items,
  );
  host.wake();
  return batch;
}

/** Reruns one source run (once: an earlier claim's rerun is waited for) and waits for it to end. */
export async function runBulkRerunItem(
  host: EvalsHost,
  batch: BatchRecord,
  item: BatchItemRecord,
  signal: AbortSignal,
): Promise<ItemEnd> {
  const { rerun } = batch.spec as unknown as { rerun: BulkRerunRequest['rerun'] };
  const sourceRunId = (item.subject as { runId: string }).runId;
  let runId = item.runId;
  if (runId === null) {
    const run = await host.rerun(sourceRunId, rerun, async (tx, run) => {
      if (!(await tx.batches.setRun(item.id, item.fencingToken, run.id)))
        throw new StoreError('conflict', `rerun item ${item.id} is no longer held by this worker`);
    });
    runId = run.id;
  }
  const ended = await host.waitTerminal(runId, signal);
  return { result: { sourceRunId, runId, status: ended.status }, scores: {} };
}
