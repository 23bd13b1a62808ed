/**
 * Datasets as the SQL backends store them (tables `datasets` and `dataset_items`: SQLite schema
 * v22, PostgreSQL v13), their mapping to the port's records, and the DDL both share. A dataset's
 * item count is not a column: it is counted from its items (the index of their positions), so it
 * is right whatever removed some (an erasure of their source session).
 */
import type { DatasetItemRecord, DatasetRecord, JsonObject } from './port/index.ts';

export type DatasetRow = {
  id: string;
  tenant: string | null;
  name: string;
  source: string;
  created_at: number;
  /** Not a column: counted by the query that reads the dataset (DATASET_SELECT). */
  item_count: number;
};

export type DatasetItemRow = {
  id: string;
  dataset_id: string;
  position: number;
  source_session_id: string;
  source_run_id: string;
  data: string;
  expected: string | null;
  notes: string | null;
  created_at: number;
};

/** A dataset's row with its item count, from `datasets d` (followed by the caller's WHERE). */
export const DATASET_SELECT =
  'SELECT d.*, (SELECT count(*) FROM dataset_items i WHERE i.dataset_id = d.id) AS item_count FROM datasets d';

export const toDataset = (r: DatasetRow): DatasetRecord => ({
  id: r.id,
  tenant: r.tenant,
  name: r.name,
  source: JSON.parse(r.source) as JsonObject,
  itemCount: Number(r.item_count),
  createdAt: Number(r.created_at),
});

export const toDatasetItem = (r: DatasetItemRow): DatasetItemRecord => ({
  id: r.id,
  datasetId: r.dataset_id,
  position: Number(r.position),
  sourceSessionId: r.source_session_id,
  sourceRunId: r.source_run_id,
  data: JSON.parse(r.data) as JsonObject,
  expected: r.expected === null ? null : JSON.parse(r.expected),
  notes: r.notes,
  createdAt: Number(r.created_at),
});

/** An expected answer as its column holds it: JSON, or NULL for none. */
export const expectedJson = (expected: unknown): string | null =>
  expected === null || expected === undefined ? null : JSON.stringify(expected);

/** The DDL of both backends; `int` is the 64-bit integer type (INTEGER in SQLite, BIGINT in PostgreSQL). */
export const datasetsDdl = (int: string): string => `
  CREATE TABLE datasets (
    id TEXT PRIMARY KEY,
    tenant TEXT,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at ${int} NOT NULL
  );
  CREATE INDEX datasets_tenant ON datasets (tenant, id);
  -- Frozen copies of points in sessions, in order; an erasure of the source session removes its items.
  CREATE TABLE dataset_items (
    id TEXT PRIMARY KEY,
    dataset_id TEXT NOT NULL REFERENCES datasets (id),
    position INTEGER NOT NULL,
    source_session_id TEXT NOT NULL,
    source_run_id TEXT NOT NULL,
    data TEXT NOT NULL,
    expected TEXT,
    notes TEXT,
    created_at ${int} NOT NULL,
    UNIQUE (dataset_id, position)
  );
  CREATE INDEX dataset_items_source_session ON dataset_items (source_session_id);
`;
