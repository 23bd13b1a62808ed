/**
 * `runtime.evals`: datasets from the log, experiments on them, bulk reruns (issue 40,
 * docs/evals.md). Every call names the tenant it acts for; another tenant's ids are not found.
 */
import type { JsonValue } from '../../model/index.ts';
import {
  NotFoundError,
  StoreError,
  type BatchItemRecord,
  type BatchRecord,
  type DatasetItemRecord,
  type DatasetRecord,
} from '../../store/index.ts';
import { createBulkRerun, type BulkRerunRequest } from './bulk-reruns.ts';
import { createDataset, datasetOf, type DatasetRequest } from './datasets.ts';
import type { EvalsHost } from './evals-host.ts';
import { createExperiment, experimentResults, type ExperimentRequest, type ExperimentResults } from './experiments.ts';

const DEFAULT_TENANT = 'default';

export class EvalsApi {
  private readonly host: EvalsHost;

  constructor(host: EvalsHost) {
    this.host = host;
  }

  readonly datasets = {
    create: (req: DatasetRequest, o: { tenant?: string } = {}): Promise<DatasetRecord> =>
      createDataset(this.host, o.tenant ?? DEFAULT_TENANT, req),
    get: (id: string, o: { tenant?: string } = {}): Promise<DatasetRecord> =>
      datasetOf(this.host, o.tenant ?? DEFAULT_TENANT, id),
    list: (o: { tenant?: string; after?: string; limit?: number } = {}): Promise<DatasetRecord[]> =>
      this.host.store.datasets.list({
        tenant: o.tenant ?? DEFAULT_TENANT,
        limit: o.limit ?? 100,
        ...(o.after ? { after: o.after } : {}),
      }),
    items: async (
      id: string,
      o: { tenant?: string; afterPosition?: number; limit?: number } = {},
    ): Promise<DatasetItemRecord[]> => {
      await datasetOf(this.host, o.tenant ?? DEFAULT_TENANT, id);
      return this.host.store.datasets.items(id, {
        limit: o.limit ?? 100,
        ...(o.afterPosition !== undefined ? { afterPosition: o.afterPosition } : {}),
      });
    },
    delete: async (id: string, o: { tenant?: string } = {}): Promise<void> => {
      await datasetOf(this.host, o.tenant ?? DEFAULT_TENANT, id);
      await this.host.store.datasets.delete(id);
    },
  };

  readonly experiments = {
    create: (req: ExperimentRequest, o: { tenant?: string } = {}): Promise<BatchRecord> =>
      createExperiment(this.host, o.tenant ?? DEFAULT_TENANT, req),
    get: (id: string, o: { tenant?: string } = {}): Promise<BatchRecord> => this.batchOf(id, 'experiment', o.tenant),
    list: (o: { tenant?: string; after?: string; limit?: number } = {}): Promise<BatchRecord[]> =>
      this.host.store.batches.list({
        tenant: o.tenant ?? DEFAULT_TENANT,
        kind: 'experiment',
        limit: o.limit ?? 100,
        ...(o.after ? { after: o.after } : {}),
      }),
    results: async (id: string, o: { tenant?: string } = {}): Promise<ExperimentResults> =>
      experimentResults(this.host, await this.batchOf(id, 'experiment', o.tenant)),
    items: (id: string, o: { tenant?: string; afterPosition?: number; limit?: number } = {}) =>
      this.itemsOf(id, 'experiment', o),
    /** A late score (a person's rating, days later): merged into the item's scores. */
    score: async (
      id: string,
      itemId: string,
      scores: Record<string, JsonValue>,
      o: { tenant?: string } = {},
    ): Promise<BatchItemRecord> => {
      await this.batchOf(id, 'experiment', o.tenant);
      const item = await this.host.store.batches.item(itemId);
      if (!item || item.batchId !== id) throw new NotFoundError('experiment item', itemId);
      for (const [k, v] of Object.entries(scores))
        if (typeof v !== 'number' || !(v >= 0 && v <= 1) || k === 'score')
          throw new StoreError('validation', `scores.${k}: a score from 0 to 1, under a name other than "score"`);
      return this.host.store.batches.addScores(itemId, scores);
    },
    cancel: async (id: string, o: { tenant?: string } = {}): Promise<BatchRecord> => {
      await this.batchOf(id, 'experiment', o.tenant);
      await this.host.store.batches.cancel(id, Date.now());
      return this.batchOf(id, 'experiment', o.tenant);
    },
  };

  readonly reruns = {
    create: (req: BulkRerunRequest, o: { tenant?: string } = {}): Promise<BatchRecord> =>
      createBulkRerun(this.host, o.tenant ?? DEFAULT_TENANT, req),
    get: (id: string, o: { tenant?: string } = {}): Promise<BatchRecord> => this.batchOf(id, 'reruns', o.tenant),
    items: (id: string, o: { tenant?: string; afterPosition?: number; limit?: number } = {}) =>
      this.itemsOf(id, 'reruns', o),
    counts: async (id: string, o: { tenant?: string } = {}) => {
      await this.batchOf(id, 'reruns', o.tenant);
      return this.host.store.batches.counts(id);
    },
    cancel: async (id: string, o: { tenant?: string } = {}): Promise<BatchRecord> => {
      await this.batchOf(id, 'reruns', o.tenant);
      await this.host.store.batches.cancel(id, Date.now());
      return this.batchOf(id, 'reruns', o.tenant);
    },
  };

  /** How many items of a batch (one the caller got through this API) are in each status. */
  counts(batch: BatchRecord): Promise<Record<BatchItemRecord['status'], number>> {
    return this.host.store.batches.counts(batch.id);
  }

  /** Resolves when the batch is no longer running (or `timeoutMs` passed: then it rejects). */
  async wait(id: string, o: { tenant?: string; timeoutMs?: number; pollMs?: number } = {}): Promise<BatchRecord> {
    const deadline = o.timeoutMs !== undefined ? Date.now() + o.timeoutMs : Infinity;
    for (;;) {
      const b = await this.host.store.batches.get(id);
      if (!b || b.tenant !== (o.tenant ?? DEFAULT_TENANT)) throw new NotFoundError('batch', id);
      if (b.status !== 'running') return b;
      if (Date.now() > deadline) throw new StoreError('timeout', `batch ${id} is still running`);
      await new Promise((r) => setTimeout(r, o.pollMs ?? 100));
    }
  }

  private async batchOf(id: string, kind: BatchRecord['kind'], tenant?: string): Promise<BatchRecord> {
    const b = await this.host.store.batches.get(id);
    if (!b || b.kind !== kind || b.tenant !== (tenant ?? DEFAULT_TENANT))
      throw new NotFoundError(kind === 'experiment' ? 'experiment' : 'rerun batch', id);
    return b;
  }

  private async itemsOf(
    id: string,
    kind: BatchRecord['kind'],
    o: { tenant?: string; afterPosition?: number; limit?: number },
  ): Promise<BatchItemRecord[]> {
    await this.batchOf(id, kind, o.tenant);
    return this.host.store.batches.items(id, {
      limit: o.limit ?? 100,
      ...(o.afterPosition !== undefined ? { afterPosition: o.afterPosition } : {}),
    });
  }
}
