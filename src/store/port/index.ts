/**
 * The storage port: everything durable goes through this async interface, whatever the backend
 * (embedded SQLite, PostgreSQL). Backends pass one contract suite per part (test/store/*contract*).
 *
 * One namespace per concept (`store.sessions`, `store.events`, `store.runs`, …), each declared in a
 * file of its own here; the queue role (`store.claims`: due runs, claiming, leases) and the feed
 * transport role (`store.notices`: change notices, broadcasts) are namespaces of their own.
 *
 * Events are append-only: the port has no way to change or remove one. Runs are rows whose every
 * change is a guarded compare-and-set, so two workers can never both win a transition.
 */
import type { BatchOps } from './batches.ts';
import type { ClaimOps } from './claims.ts';
import type { DatasetOps } from './datasets.ts';
import type { ErasureOps } from './erasure.ts';
import type { EventOps } from './events.ts';
import type { IdempotencyOps } from './idempotency.ts';
import type { InputOps } from './inputs.ts';
import type { KeyOps } from './keys.ts';
import type { LimitOps } from './limits.ts';
import type { NoticeOps } from './notices.ts';
import type { QuotaOps } from './quotas.ts';
import type { RetentionOps } from './retention.ts';
import type { RunOps } from './runs.ts';
import type { ScheduleOps } from './schedules.ts';
import type { SessionOps } from './sessions.ts';
import type { TenantOps } from './tenants.ts';
import type { WaitOps } from './waits.ts';
import type { WebhookOps } from './webhooks.ts';

export * from './batches.ts';
export * from './blobs.ts';
export * from './claims.ts';
export * from './datasets.ts';
export * from './erasure.ts';
export * from './errors.ts';
export * from './events.ts';
export * from './idempotency.ts';
export * from './inputs.ts';
export * from './json.ts';
export * from './keys.ts';
export * from './limits.ts';
export * from './notices.ts';
export * from './quotas.ts';
export * from './retention.ts';
export * from './runs.ts';
export * from './schedules.ts';
export * from './sessions.ts';
export * from './tenants.ts';
export * from './waits.ts';
export * from './webhooks.ts';

/** Every data operation, by namespace. Inside `transaction` they all commit or roll back together. */
export interface StoreOps {
  sessions: SessionOps;
  events: EventOps;
  runs: RunOps;
  /** The queue role: due runs, claims, leases. */
  claims: ClaimOps;
  inputs: InputOps;
  keys: KeyOps;
  /** The tenants registry: weights (fair dispatch) and quotas. */
  tenants: TenantOps;
  idempotency: IdempotencyOps;
  schedules: ScheduleOps;
  webhooks: WebhookOps;
  waits: WaitOps;
  limits: LimitOps;
  datasets: DatasetOps;
  /** Bulk reruns and experiments: claimable, fenced work items. */
  batches: BatchOps;
  /** Tenant quotas: the ledger of model calls charged to tenants and API keys (ADR-0043). */
  quotas: QuotaOps;
  /** Erasing tenants and idle sessions, the erasure audit, and the scan that proves an erasure (ADR-0041). */
  erasure: ErasureOps;
  /** Retention: idle sessions, archives, pruning, policies, the worker's lease. */
  retention: RetentionOps;
}

/** What flow control needs of a store (its limits namespace). */
export type LimitStoreOps = Pick<StoreOps, 'limits'>;

export interface Store extends StoreOps {
  readonly kind: string;
  /**
   * How many transactions of this instance make progress at once (PostgreSQL: half its pool);
   * absent, one (SQLite writes one at a time). A worker claims this many runs at once.
   */
  readonly parallelTransactions?: number;
  /** The feed transport role: change notices, broadcasts and the barrier on them (each absent when the backend cannot). */
  readonly notices: NoticeOps;
  /**
   * Tells `listener` how long each write transaction of this instance took, in seconds, from its
   * start to its commit (the commit-latency metric); returns the unregistration. Synchronous, on
   * the commit path: keep it cheap.
   */
  observeCommits?(listener: (seconds: number) => void): () => void;
  /**
   * Runs `fn` as one unit of work: everything it does through `tx` commits together or not at all.
   * What `fn` reads of a session or a run (`sessions.get`, `runs.get`) stays as read until it commits:
   * another transaction that reads the same row waits (SQLite runs one writer at a time; PostgreSQL
   * locks the row, ADR-0011).
   */
  transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
