/**
 * The quotas part of the storage port (docs/operations.md, ADR-0043): a ledger of the model
 * calls charged to a tenant and an API key over UTC days and months. Each model call of a run has one
 * row per scope it is charged to, keyed by the call's id (run, turn, step): reserved from an
 * estimate before the call, settled with its actual tokens and cost after it. A call made again (a
 * retry, a recovered run) replaces its own row: nothing is counted twice.
 */

/** Budgets over a UTC day or month: the part of TenantQuotas a ledger counts. Each absent limit is unlimited. */
export interface QuotaBudget {
  tokensPerDay?: number;
  costPerDay?: number;
  costPerMonth?: number;
}

export type QuotaBudgetName = keyof QuotaBudget;

/** One scope a call is charged to (`tenant:acme`, `key:key_123`) and its budget. */
export interface QuotaScope {
  scope: string;
  budget: QuotaBudget;
}

export interface QuotaReservation {
  /** The model call: `runId:turn:step`. Reserving it again replaces its rows. */
  callId: string;
  runId: string;
  scopes: readonly QuotaScope[];
  /** The estimate reserved (tokens, and cost in USD). */
  tokens: number;
  cost: number;
  /** Start of the UTC day and of the UTC month the call is charged to (epoch ms). */
  day: number;
  month: number;
  now: number;
}

/** What a scope used in a period: settled calls, and reservations not settled yet. */
export interface QuotaAmount {
  used: number;
  reserved: number;
}

export interface QuotaUsage {
  tokensDay: QuotaAmount;
  costDay: QuotaAmount;
  costMonth: QuotaAmount;
}

export type QuotaGrant =
  | { granted: true }
  | {
      granted: false;
      /** The scope and its limit the call does not fit in, with what was charged to it (this call left out). */
      scope: string;
      limit: QuotaBudgetName;
      max: number;
      usage: QuotaAmount;
    };

/** The quotas namespace of the port (`store.quotas`). */
export interface QuotaOps {
  /**
   * Charges the call's estimate to every scope if it fits in each budget (the call's own earlier
   * rows left out: they are replaced), atomically; else charges nothing and says which limit.
   * An estimate larger than a whole limit counts as the limit (it fits in an empty period).
   */
  reserve(r: QuotaReservation): Promise<QuotaGrant>;
  /** Replaces the call's reservation with its actual tokens and cost (every scope). Unknown calls: nothing. */
  settle(callId: string, tokens: number, cost: number): Promise<void>;
  /** Removes the call's reservation when it was never settled (the call did not happen). */
  release(callId: string): Promise<void>;
  /** What `scope` used in the UTC day starting at `day` and the UTC month starting at `month`. */
  usage(scope: string, day: number, month: number): Promise<QuotaUsage>;
}
