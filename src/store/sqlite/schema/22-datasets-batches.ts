/** SQLite schema version 22 (datasets and batches): see its comment. */
import { batchesDdl } from '../../batch-rows.ts';
import { datasetsDdl } from '../../dataset-rows.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // Datasets (frozen points in sessions) and batches (claimable, fenced work items: bulk reruns and
  // experiments), issue 40: new tables only (dataset-rows.ts, batch-rows.ts).
  version: 22,
  sql: datasetsDdl('INTEGER') + batchesDdl('INTEGER'),
};
