/** PostgreSQL: the datasets operations of the port (`store.datasets`). */
import {
  DATASET_SELECT,
  expectedJson,
  toDataset,
  toDatasetItem,
  type DatasetItemRow,
  type DatasetRow,
} from '../dataset-rows.ts';
import { StoreError } from '../port/index.ts';
import { hasNul } from '../plain-text.ts';
import { constraintOf, sqlState, UNIQUE_VIOLATION } from './sql.ts';
import type { PgOpsOf } from './context.ts';

/** Items one statement inserts (as arrays, unnest): a large dataset in a few round trips. */
export const ITEMS_PER_INSERT = 500;

const INSERT_ITEMS = `INSERT INTO dataset_items (id, dataset_id, position, source_session_id, source_run_id, data, expected, notes, created_at)
  SELECT u.id, $1::text, $2::integer + u.n::integer - 1, u.source_session_id, u.source_run_id, u.data, u.expected, u.notes, $3::bigint
  FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
       WITH ORDINALITY AS u (id, source_session_id, source_run_id, data, expected, notes, n)`;

export const pgDatasetsOps: PgOpsOf<'datasets'> = {
  createDataset: async ({ atomic }, d, items) => {
    try {
      return await atomic(async (q) => {
        await q.run('INSERT INTO datasets (id, tenant, name, source, created_at) VALUES ($1, $2, $3, $4, $5)', [
          d.id,
          d.tenant,
          d.name,
          JSON.stringify(d.source),
          d.createdAt,
        ]);
        for (let from = 0; from < items.length; from += ITEMS_PER_INSERT) {
          const chunk = items.slice(from, from + ITEMS_PER_INSERT);
          await q.run(INSERT_ITEMS, [
            d.id,
            from,
            d.createdAt,
            chunk.map((it) => it.id),
            chunk.map((it) => it.sourceSessionId),
            chunk.map((it) => it.sourceRunId),
            chunk.map((it) => JSON.stringify(it.data)),
            chunk.map((it) => expectedJson(it.expected)),
            chunk.map((it) => it.notes),
          ]);
        }
        return toDataset((await q.one<DatasetRow>(`${DATASET_SELECT} WHERE d.id = $1`, [d.id]))!);
      });
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError(
          'conflict',
          constraintOf(e) === 'datasets_pkey'
            ? `dataset ${d.id} already exists`
            : 'an item of the dataset already exists',
          { cause: e },
        );
      throw e;
    }
  },

  // An id with NUL cannot be stored (plain-text.ts): not found, as on SQLite.
  getDataset: async ({ sql }, id) => {
    if (hasNul(id)) return undefined;
    const row = await sql.one<DatasetRow>(`${DATASET_SELECT} WHERE d.id = $1`, [id]);
    return row ? toDataset(row) : undefined;
  },

  // A tenant's from the index of them: a cached plan of `$1 IS NULL OR tenant = $1` would read every tenant's.
  listDatasets: async ({ sql }, q) => {
    const args: unknown[] = [];
    const where = [
      ...(q.tenant !== undefined ? [`d.tenant = $${args.push(q.tenant)}`] : []),
      ...(q.after !== undefined ? [`d.id > $${args.push(q.after)}`] : []),
    ];
    const text = `${DATASET_SELECT} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY d.id LIMIT $${args.push(Math.max(0, Math.floor(q.limit)))}`;
    return (await sql.rows<DatasetRow>(text, args)).map(toDataset);
  },

  listDatasetItems: async ({ sql }, datasetId, q) => {
    if (hasNul(datasetId)) return [];
    return (
      await sql.rows<DatasetItemRow>(
        'SELECT * FROM dataset_items WHERE dataset_id = $1 AND position > $2 ORDER BY position LIMIT $3',
        [datasetId, q.afterPosition ?? -1, Math.max(0, Math.floor(q.limit))],
      )
    ).map(toDatasetItem);
  },

  getDatasetItem: async ({ sql }, id) => {
    if (hasNul(id)) return undefined;
    const row = await sql.one<DatasetItemRow>('SELECT * FROM dataset_items WHERE id = $1', [id]);
    return row ? toDatasetItem(row) : undefined;
  },

  deleteDataset: ({ atomic }, id) =>
    hasNul(id)
      ? Promise.resolve(false)
      : atomic(async (q) => {
          await q.run('DELETE FROM dataset_items WHERE dataset_id = $1', [id]);
          return (await q.run('DELETE FROM datasets WHERE id = $1', [id])) === 1;
        }),
};
