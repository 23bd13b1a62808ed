/** SQLite: the datasets operations of the port (`store.datasets`), synchronous, on the connection's shared state. */
import {
  DATASET_SELECT,
  expectedJson,
  toDataset,
  toDatasetItem,
  type DatasetItemRow,
  type DatasetRow,
} from '../dataset-rows.ts';
import type { FlatOpsOf } from '../port/layout.ts';
import { guard } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

/** How each operation runs (see PLAN in store.ts). */
export const DATASET_PLAN: {
  readonly [K in keyof FlatOpsOf<'datasets'>]: {
    outside: 'serial' | 'write' | 'immediate' | 'autocommit';
    savepoint?: true;
  };
} = {
  createDataset: { outside: 'write', savepoint: true },
  getDataset: { outside: 'serial' },
  listDatasets: { outside: 'serial' },
  listDatasetItems: { outside: 'serial' },
  getDatasetItem: { outside: 'serial' },
  deleteDataset: { outside: 'immediate', savepoint: true },
};

export function datasetOps(c: Shared): SyncOpsOf<'datasets'> {
  const { db, prepared } = c;
  const insert = db.prepare('INSERT INTO datasets (id, tenant, name, source, created_at) VALUES (?, ?, ?, ?, ?)');
  const insertItem = db.prepare(
    `INSERT INTO dataset_items (id, dataset_id, position, source_session_id, source_run_id, data, expected, notes, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const get = db.prepare<[string], DatasetRow>(`${DATASET_SELECT} WHERE d.id = ?`);
  const items = db.prepare<[string, number, number], DatasetItemRow>(
    'SELECT * FROM dataset_items WHERE dataset_id = ? AND position > ? ORDER BY position LIMIT ?',
  );
  const item = db.prepare<[string], DatasetItemRow>('SELECT * FROM dataset_items WHERE id = ?');
  const deleteItems = db.prepare<[string]>('DELETE FROM dataset_items WHERE dataset_id = ?');
  const deleteDataset = db.prepare<[string]>('DELETE FROM datasets WHERE id = ?');
  const ops: SyncOpsOf<'datasets'> = {
    // In the caller's write (its savepoint): an item that conflicts leaves no dataset behind.
    createDataset: (d, list) => {
      guard(`dataset ${d.id} already exists`, () =>
        insert.run(d.id, d.tenant, d.name, JSON.stringify(d.source), d.createdAt),
      );
      list.forEach((it, position) =>
        guard(`dataset item ${it.id} already exists`, () =>
          insertItem.run(
            it.id,
            d.id,
            position,
            it.sourceSessionId,
            it.sourceRunId,
            JSON.stringify(it.data),
            expectedJson(it.expected),
            it.notes,
            d.createdAt,
          ),
        ),
      );
      return ops.getDataset(d.id)!;
    },
    getDataset: (id) => {
      const row = get.get(id);
      return row ? toDataset(row) : undefined;
    },
    // A tenant's from the index of them: `? IS NULL OR tenant = ?` would read every tenant's.
    listDatasets: (q) => {
      const where = [
        ...(q.tenant !== undefined ? ['d.tenant = ?'] : []),
        ...(q.after !== undefined ? ['d.id > ?'] : []),
      ];
      const args = [...(q.tenant !== undefined ? [q.tenant] : []), ...(q.after !== undefined ? [q.after] : [])];
      return (
        prepared(`${DATASET_SELECT} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY d.id LIMIT ?`).all(
          ...args,
          Math.max(0, Math.floor(q.limit)),
        ) as DatasetRow[]
      ).map(toDataset);
    },
    listDatasetItems: (datasetId, q) =>
      items.all(datasetId, q.afterPosition ?? -1, Math.max(0, Math.floor(q.limit))).map(toDatasetItem),
    getDatasetItem: (id) => {
      const row = item.get(id);
      return row ? toDatasetItem(row) : undefined;
    },
    deleteDataset: (id) => {
      deleteItems.run(id);
      return deleteDataset.run(id).changes === 1;
    },
  };
  return ops;
}
