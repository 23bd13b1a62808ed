/**
 * Batches (issue 40): tracked sets of work items run with a concurrency limit, each item done
 * exactly once across crashes. One mechanism for bulk reruns (`kind: 'reruns'`, an item per source
 * run) and experiments (`kind: 'experiment'`, an item per dataset item and candidate). An item is
 * claimed with a lease and a fencing token, as runs are: a worker that lost it can no longer
 * write it, and an item whose worker died is claimed again once its lease expires.
 */
import type { JsonObject } from './json.ts';

/** A score or an expected answer: any JSON value. */
type JsonValue = unknown;

export type BatchKind = 'reruns' | 'experiment';
export type BatchStatus = 'running' | 'completed' | 'cancelled';
export type BatchItemStatus = 'pending' | 'running' | 'done' | 'failed';

export interface BatchRecord {
  id: string;
  tenant: string | null;
  kind: BatchKind;
  /** What the batch does (its request as the API took it, normalized by src/runs/evals). */
  spec: JsonObject;
  status: BatchStatus;
  /** Items at most running at once. */
  concurrency: number;
  createdAt: number;
  endedAt: number | null;
}

export interface BatchItemRecord {
  id: string;
  batchId: string;
  /** Order in the batch, from 0. */
  position: number;
  /** Unique in its batch (an experiment's `datasetItemId/candidate`, a rerun batch's source run id). */
  key: string;
  /** The session the item's content came from: erasing it removes the item (see `SessionOps.erase`). */
  sourceSessionId: string | null;
  /** What the item does (JSON, the batch's kind's). */
  subject: JsonObject;
  status: BatchItemStatus;
  /** The run it started (a rerun), set in the transaction that creates the run. */
  runId: string | null;
  /** Claims so far (1 at the first). */
  attempt: number;
  lease: { owner: string; expiresAt: number } | null;
  /** Increases at every claim; `finish` and `setRun` are checked against it. */
  fencingToken: number;
  result: JsonObject | null;
  /** Scores by scorer name (late scores by API merge into it). */
  scores: Record<string, JsonValue>;
  error: JsonObject | null;
  startedAt: number | null;
  endedAt: number | null;
}

export type NewBatchItem = Pick<BatchItemRecord, 'id' | 'key' | 'sourceSessionId' | 'subject'>;

export interface BatchQuery {
  tenant?: string;
  kind?: BatchKind;
  /** Batches with an id after this one (cursor). */
  after?: string;
  limit: number;
}

/** How many items of a batch are in each status. */
export type BatchCounts = Record<BatchItemStatus, number>;

/** The batches namespace of the port (`store.batches`). */
export interface BatchOps {
  /**
   * A batch (running) and its items (pending, positions in the order given, from 0), in one write.
   * `conflict` when the id or an item's id exists, or two items share a key (then nothing is written).
   */
  create(b: Omit<BatchRecord, 'status' | 'endedAt'>, items: readonly NewBatchItem[]): Promise<BatchRecord>;
  get(id: string): Promise<BatchRecord | undefined>;
  /** By id, after the cursor; only a tenant's or a kind's when given. */
  list(q: BatchQuery): Promise<BatchRecord[]>;
  /** All 0 for an unknown batch. */
  counts(batchId: string): Promise<BatchCounts>;
  /** Its items by position, after `afterPosition` (cursor), at most `limit`; only those in `statuses` when given. */
  items(
    batchId: string,
    q: { afterPosition?: number; limit: number; statuses?: readonly BatchItemStatus[] },
  ): Promise<BatchItemRecord[]>;
  item(id: string): Promise<BatchItemRecord | undefined>;
  /**
   * Claims the next item of a running batch for `owner` until `now + leaseMs`: a pending one, or a
   * running one whose lease expired (`lease.expiresAt <= now`; its attempt and fencing token go up),
   * from the oldest batch with room first (by `createdAt`, then id), and in it the lowest position
   * first; never more running items (with a live lease, `expiresAt > now`) in a batch than its
   * concurrency. Two claimers never get the same item. Every claim adds 1 to the fencing token and
   * the attempt (1 at the first); `startedAt` is the first claim's time.
   */
  claim(owner: string, leaseMs: number, now: number): Promise<BatchItemRecord | undefined>;
  /** Extends the lease while the caller holds the item with `token`; false when it no longer does. */
  renew(itemId: string, owner: string, token: number, until: number): Promise<boolean>;
  /** Records the run the item started, while the caller holds it with `token`; false when it no longer does. */
  setRun(itemId: string, token: number, runId: string): Promise<boolean>;
  /**
   * Ends the item (`done` or `failed`, with its result, scores, error; lease cleared; endedAt `now`)
   * while the caller holds it with `token`: exactly once; false when it no longer holds it or it
   * ended. Its scores merge into any it has (added by `addScores` while it ran; these win).
   * When it was the batch's last unfinished item, a running batch is `completed` (endedAt `now`) in
   * the same write (a cancelled one stays cancelled). An erasure that removes a running batch's last
   * unfinished items completes it too (see `SessionOps.erase`).
   */
  finish(
    itemId: string,
    token: number,
    end: {
      status: 'done' | 'failed';
      result: JsonObject | null;
      scores: Record<string, JsonValue>;
      error: JsonObject | null;
    },
    now: number,
  ): Promise<boolean>;
  /** Merges `scores` into the item's (a late score: a person's rating); NotFoundError for an unknown item. */
  addScores(itemId: string, scores: Record<string, JsonValue>): Promise<BatchItemRecord>;
  /** Cancels a running batch: its pending items are not claimed again (running ones finish). False when it was not running. */
  cancel(batchId: string, now: number): Promise<boolean>;
}
