/** PostgreSQL schema version 13 (datasets and batches): see its comment. */
import { batchesDdl } from '../../batch-rows.ts';
import { datasetsDdl } from '../../dataset-rows.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // Datasets (frozen points in sessions) and batches (claimable, fenced work items: bulk reruns and
  // experiments), issue 40: new tables only (dataset-rows.ts, batch-rows.ts).
  version: 13,
  sql: datasetsDdl('BIGINT') + batchesDdl('BIGINT'),
};
