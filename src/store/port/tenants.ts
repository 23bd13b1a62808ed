/**
 * Tenants: who shares one Keel. A tenant is named by its API keys and sessions (a string); this
 * registry adds what an operator sets for it: its weight in fair dispatch and its quotas
 * (docs/operations.md). A tenant with no row has weight 1 and the runtime's default quotas.
 */

/** Limits on what one tenant (or one API key) may use. Each absent limit is unlimited. */
export interface QuotaLimits {
  /** Runs of the tenant that are not terminal and not queued at once (claimed, running or waiting on a model). */
  concurrentRuns?: number;
  /** Runs created in any sliding minute. */
  runsPerMinute?: number;
  /** Model tokens (input + output) in a UTC day. */
  tokensPerDay?: number;
  /** Model cost in a UTC day, in the unit of the runs' `cost` (USD). */
  costPerDay?: number;
  /** Model cost in a UTC calendar month. */
  costPerMonth?: number;
}

/** What happens to a run at a limit: it waits durably (`waiting_for_quota`) or fails (`quota_exceeded`). */
export type QuotaPolicy = 'wait' | 'fail';

export interface TenantQuotas extends QuotaLimits {
  /** Default `wait`. */
  onLimit?: QuotaPolicy;
}

export interface TenantRecord {
  id: string;
  /** Free text for operators. */
  name: string | null;
  /** Share of the workers' claims when tenants compete (fair dispatch); ≥ 1, default 1. */
  weight: number;
  quotas: TenantQuotas;
  createdAt: number;
  updatedAt: number;
}

/** What an operator sets; absent fields keep their value (or the default for a new tenant). */
export interface TenantUpdate {
  id: string;
  name?: string | null;
  weight?: number;
  quotas?: TenantQuotas;
}

/** The tenants namespace of the port (`store.tenants`). */
export interface TenantOps {
  /** Creates or updates the tenant's row. */
  put(t: TenantUpdate, now: number): Promise<TenantRecord>;
  get(id: string): Promise<TenantRecord | undefined>;
  list(): Promise<TenantRecord[]>;
  /** Removes the row (its keys and sessions stay; it goes back to the defaults). False when there was none. */
  delete(id: string): Promise<boolean>;
}
