/**
 * Datasets (issue 40): points in stored sessions, frozen. Each item is a copy of what a run had
 * and did (its context up to its user message, its recorded requests and decisions: `data`, built
 * by src/runs/evals), with the source it came from. Erasing the source session removes its items
 * (erasure means erasure): see `SessionOps.erase`.
 */
import type { JsonObject } from './json.ts';

/** A score or an expected answer: any JSON value. */
type JsonValue = unknown;

export interface DatasetRecord {
  id: string;
  tenant: string | null;
  name: string;
  /** How it was made: the filter or the list of runs it was built from (as the API took it). */
  source: JsonObject;
  /** Items left (fewer than made when a source session was erased since). */
  itemCount: number;
  createdAt: number;
}

export interface DatasetItemRecord {
  id: string;
  datasetId: string;
  /** Order in the dataset, from 0. */
  position: number;
  sourceSessionId: string;
  sourceRunId: string;
  /** The frozen copy (see src/runs/evals/dataset-item.ts). */
  data: JsonObject;
  expected: JsonValue | null;
  notes: string | null;
  createdAt: number;
}

export type NewDatasetItem = Omit<DatasetItemRecord, 'datasetId' | 'position' | 'createdAt'>;

export interface DatasetQuery {
  tenant?: string;
  /** Datasets with an id after this one (cursor). */
  after?: string;
  limit: number;
}

/** The datasets namespace of the port (`store.datasets`). */
export interface DatasetOps {
  /**
   * A dataset and its items (positions in the order given, from 0; each item's `createdAt` the
   * dataset's), in one write. `conflict` when the id or an item's id exists (then nothing is written).
   */
  create(d: Omit<DatasetRecord, 'itemCount'>, items: readonly NewDatasetItem[]): Promise<DatasetRecord>;
  get(id: string): Promise<DatasetRecord | undefined>;
  /** By id, after the cursor; only a tenant's when given. */
  list(q: DatasetQuery): Promise<DatasetRecord[]>;
  /** Its items by position, after `afterPosition` (cursor), at most `limit`. */
  items(datasetId: string, q: { afterPosition?: number; limit: number }): Promise<DatasetItemRecord[]>;
  item(id: string): Promise<DatasetItemRecord | undefined>;
  /** Removes the dataset and its items; false when it did not exist. Its experiments stay (their items keep copies). */
  delete(id: string): Promise<boolean>;
}
