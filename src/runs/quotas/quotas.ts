/**
 * Tenant quotas (docs/operations.md, ADR-0043): what a tenant (and an API key) may use, held
 * in the store across every process on it. Tokens and cost per UTC day or month are a ledger of
 * model calls (`store.quotas`: reserved from an estimate before each call, settled after it, keyed
 * by the call so that a retry or a recovery never counts twice); runs per minute and concurrent
 * runs are windows and slots of provider flow control's `store.limits`, under keys of their own.
 */
import type { Clock } from '../../core/clock.ts';
import type {
  LimitDecision,
  QuotaBudgetName,
  QuotaGrant,
  QuotaScope,
  QuotaUsage,
  StoreOps,
  TenantQuotas,
} from '../../store/index.ts';
import { QuotaExceededError } from './quota-exceeded-error.ts';
import type { QuotaOptions } from './quota-options.ts';
import { dayStart, monthStart, nextDay, nextMonth } from './periods.ts';
import { quotaCallId } from './quota-call-id.ts';
import type { RegistryQuotas } from './registry-quotas.ts';

const MINUTE = 60_000;

/**
 * Why a run stopped at a quota: the scope and limit, and what was charged to it (`unavailable`:
 * the store could not answer, the run waits a recheck rather than spend unchecked).
 */
export interface QuotaRefusal {
  scope: string;
  limit: QuotaBudgetName | 'concurrentRuns' | 'unavailable';
  max: number;
  used: number;
  reserved: number;
}

/** What happens to a run a quota refused: it waits until `wakeAt`, or fails. */
export type QuotaStop =
  { policy: 'wait'; wakeAt: number; refusal: QuotaRefusal } | { policy: 'fail'; refusal: QuotaRefusal };

/** A run's slot among its tenant's (and key's) concurrent runs: renewed with the run's lease, released when its execution ends. */
export interface RunSlot {
  release(): Promise<void>;
  renew(): Promise<void>;
}

/** The quotas that apply to a run: its tenant's and its API key's own. */
interface Applying {
  tenant: TenantQuotas | undefined;
  key: TenantQuotas | undefined;
}

/** One limit against its use, as `GET /v1/usage` shows it. */
export interface QuotaLine {
  limit: number;
  used: number;
  reserved?: number;
  /** ISO 8601: when the period ends (null for concurrent runs). */
  resets_at: string | null;
}

/** A scope's quotas against their use (`quota` in `GET /v1/usage`). */
export interface QuotaReport {
  scope: string;
  on_limit: 'wait' | 'fail';
  concurrent_runs?: QuotaLine;
  runs_per_minute?: QuotaLine;
  tokens_per_day?: QuotaLine;
  cost_per_day?: QuotaLine;
  cost_per_month?: QuotaLine;
}

/** The scopes' names in the store. */
export const tenantScope = (tenant: string): string => `tenant:${tenant}`;
export const keyScope = (keyId: string): string => `key:${keyId}`;

/** Runs per minute: a window of flow control's limits, counted whatever waits ahead of it. */
const countRun: LimitDecision = (a, s) => {
  if (a.requestsPerWindow === undefined || s.requests + 1 <= a.requestsPerWindow) return { granted: true };
  const rows = s.usage();
  const oldest = rows[s.requests - a.requestsPerWindow];
  return { granted: false, reason: 'requests', retryAt: Math.max(a.now + 1, (oldest?.at ?? a.now) + a.windowMs) };
};

/** A run slot: one of the tenant's concurrent runs, free or not. */
const takeSlot: LimitDecision = (a, s) =>
  a.concurrency === undefined || s.slots < a.concurrency
    ? { granted: true }
    : { granted: false, reason: 'concurrency', retryAt: Math.max(a.now + 1, s.oldestSlotExpiry ?? a.now + 1000) };

export class Quotas {
  private readonly store: Pick<StoreOps, 'quotas' | 'limits'>;
  private readonly clock: Clock;
  private readonly options: QuotaOptions;
  private readonly registry: RegistryQuotas | undefined;
  readonly recheckMs: number;

  /** `registry`: the tenants registry when it is the source (it knows whether any quota is set). */
  constructor(
    store: Pick<StoreOps, 'quotas' | 'limits'>,
    clock: Clock,
    options: QuotaOptions,
    registry?: RegistryQuotas,
  ) {
    this.registry = registry;
    this.store = store;
    this.clock = clock;
    this.options = options;
    this.recheckMs = options.recheckMs ?? 5000;
  }

  /**
   * Whether any quota may apply: a default, a source of the runtime's own, or a limit somewhere
   * in the registry. When none does, a run and its steps pay nothing for quotas (no reads, no
   * reservations, no settlements). Answered at once when the registry's snapshot is fresh.
   */
  inEffect(): boolean | Promise<boolean> {
    if (this.options.default !== undefined || !this.registry) return true;
    return this.registry.any();
  }

  /** The tenant's quotas (the source's, else the default) and the key's own (the source's only). */
  async applying(tenant: string, keyId: string | null): Promise<Applying> {
    const source = this.options.source;
    const own = source ? await source(tenant, null) : undefined;
    const key = source && keyId !== null ? await source(tenant, keyId) : undefined;
    // A tenant's own quotas override the default field by field.
    return { tenant: own ? { ...this.options.default, ...own } : this.options.default, key };
  }

  private static scopes(
    tenant: string,
    keyId: string | null,
    q: Applying,
  ): Array<{ scope: string; quotas: TenantQuotas }> {
    const out: Array<{ scope: string; quotas: TenantQuotas }> = [];
    if (q.tenant) out.push({ scope: tenantScope(tenant), quotas: q.tenant });
    if (q.key && keyId !== null) out.push({ scope: keyScope(keyId), quotas: q.key });
    return out;
  }

  /**
   * Before one model call of a run (`turn`, `step`): reserves its estimate for the tenant and the
   * key, or says what happens to the run (its policy). Reserving the same call again (a retry of
   * the step, a recovered run) replaces its reservation.
   */
  async reserveCall(c: {
    runId: string;
    tenant: string;
    keyId: string | null;
    turn: number;
    step: number;
    tokens: number;
    cost: number;
  }): Promise<{ callId: string } | QuotaStop | undefined> {
    const q = await this.applying(c.tenant, c.keyId);
    const scopes: QuotaScope[] = Quotas.scopes(c.tenant, c.keyId, q)
      .filter(
        ({ quotas: x }) => x.tokensPerDay !== undefined || x.costPerDay !== undefined || x.costPerMonth !== undefined,
      )
      .map(({ scope, quotas: x }) => ({
        scope,
        budget: {
          ...(x.tokensPerDay !== undefined ? { tokensPerDay: x.tokensPerDay } : {}),
          ...(x.costPerDay !== undefined ? { costPerDay: x.costPerDay } : {}),
          ...(x.costPerMonth !== undefined ? { costPerMonth: x.costPerMonth } : {}),
        },
      }));
    if (scopes.length === 0) return undefined;
    const now = this.clock.now();
    const callId = quotaCallId(c.runId, c.turn, c.step);
    const grant: QuotaGrant = await this.store.quotas.reserve({
      callId,
      runId: c.runId,
      scopes,
      tokens: c.tokens,
      cost: c.cost,
      day: dayStart(now),
      month: monthStart(now),
      now,
    });
    if (grant.granted) return { callId };
    const refusal: QuotaRefusal = {
      scope: grant.scope,
      limit: grant.limit,
      max: grant.max,
      used: grant.usage.used,
      reserved: grant.usage.reserved,
    };
    const policy = this.policyOf(grant.scope, c.tenant, q);
    if (policy === 'fail') return { policy, refusal };
    const end = grant.limit === 'costPerMonth' ? nextMonth(now) : nextDay(now);
    // Calls in flight hold part of the budget: it may free when they settle, before the period ends.
    const wakeAt = grant.usage.reserved > 0 ? Math.min(end, now + this.recheckMs) : end;
    return { policy, wakeAt, refusal };
  }

  private policyOf(scope: string, tenant: string, q: Applying): 'wait' | 'fail' {
    const quotas = scope === tenantScope(tenant) ? q.tenant : q.key;
    return quotas?.onLimit ?? q.tenant?.onLimit ?? 'wait';
  }

  /** The call did not happen (its turn ended before it, or failed): its reservation goes. */
  release(callId: string): Promise<void> {
    return this.store.quotas.release(callId);
  }

  /**
   * At the first step of an execution: a slot among the tenant's (and key's) concurrent runs,
   * leased like the run (`leaseMs`, renewed with it); undefined when none applies.
   */
  async takeRunSlot(c: {
    runId: string;
    token: number;
    tenant: string;
    keyId: string | null;
    leaseMs: number;
  }): Promise<RunSlot | QuotaStop | undefined> {
    const q = await this.applying(c.tenant, c.keyId);
    const limited = Quotas.scopes(c.tenant, c.keyId, q).filter((s) => s.quotas.concurrentRuns !== undefined);
    if (limited.length === 0) return undefined;
    const id = `${c.runId}:${c.token}`;
    const taken: string[] = [];
    const giveBack = () => Promise.all(taken.map((key) => this.store.limits.release(key, id))).then(() => {});
    for (const s of limited) {
      const key = `quota:${s.scope}:concurrent`;
      const now = this.clock.now();
      const grant = await this.store.limits.acquire(
        {
          key,
          id,
          waiter: 'keel-quota',
          rank: 0,
          since: now,
          now,
          concurrency: s.quotas.concurrentRuns!,
          tokens: 0,
          windowMs: MINUTE,
          slotLeaseMs: c.leaseMs,
          waiterLeaseMs: 1,
        },
        takeSlot,
      );
      if (!grant.granted) {
        await giveBack();
        await this.store.limits.leaveQueue(key, 'keel-quota');
        const state = await this.store.limits.state(key, now);
        const refusal: QuotaRefusal = {
          scope: s.scope,
          limit: 'concurrentRuns',
          max: s.quotas.concurrentRuns!,
          used: state.slots,
          reserved: 0,
        };
        const policy = this.policyOf(s.scope, c.tenant, q);
        return policy === 'fail'
          ? { policy, refusal }
          : { policy, wakeAt: Math.min(grant.retryAt, now + this.recheckMs), refusal };
      }
      taken.push(key);
    }
    return {
      release: giveBack,
      renew: async () => {
        // By the quotas' clock, as the slot was taken (the run's own lease is by the system clock).
        const until = this.clock.now() + c.leaseMs;
        for (const key of taken) await this.store.limits.renew(key, id, until);
      },
    };
  }

  /**
   * At a run's creation: one more of the tenant's (and key's) runs in the sliding minute, or
   * QuotaExceededError with when to try again.
   */
  async admitRun(tenant: string, keyId: string | null): Promise<void> {
    const q = await this.applying(tenant, keyId);
    for (const s of Quotas.scopes(tenant, keyId, q)) {
      const max = s.quotas.runsPerMinute;
      if (max === undefined) continue;
      const now = this.clock.now();
      const key = `quota:${s.scope}:runs`;
      const grant = await this.store.limits.acquire(
        {
          key,
          id: `${now}:${Math.random().toString(36).slice(2)}`,
          waiter: 'keel-quota',
          rank: 0,
          since: now,
          now,
          requestsPerWindow: max,
          tokens: 0,
          windowMs: MINUTE,
          slotLeaseMs: MINUTE,
          waiterLeaseMs: 1,
        },
        countRun,
      );
      if (!grant.granted) {
        await this.store.limits.leaveQueue(key, 'keel-quota');
        throw new QuotaExceededError({
          tenant,
          scope: s.scope,
          limit: 'runsPerMinute',
          max,
          retryAt: grant.retryAt,
          now,
        });
      }
    }
  }

  /** The tenant's quotas against their use now, and the key's own (`GET /v1/usage`, the inspector). */
  async report(tenant: string, keyId: string | null): Promise<{ tenant: QuotaReport | null; key: QuotaReport | null }> {
    const q = await this.applying(tenant, keyId);
    const now = this.clock.now();
    const one = async (scope: string, x: TenantQuotas): Promise<QuotaReport> => {
      const r: QuotaReport = { scope, on_limit: x.onLimit ?? q.tenant?.onLimit ?? 'wait' };
      const iso = (t: number) => new Date(t).toISOString();
      if (x.concurrentRuns !== undefined) {
        const s = await this.store.limits.state(`quota:${scope}:concurrent`, now);
        r.concurrent_runs = { limit: x.concurrentRuns, used: s.slots, resets_at: null };
      }
      if (x.runsPerMinute !== undefined) {
        const s = await this.store.limits.state(`quota:${scope}:runs`, now, MINUTE);
        r.runs_per_minute = { limit: x.runsPerMinute, used: s.requests, resets_at: iso(now + MINUTE) };
      }
      if (x.tokensPerDay !== undefined || x.costPerDay !== undefined || x.costPerMonth !== undefined) {
        const u: QuotaUsage = await this.store.quotas.usage(scope, dayStart(now), monthStart(now));
        if (x.tokensPerDay !== undefined)
          r.tokens_per_day = { limit: x.tokensPerDay, ...u.tokensDay, resets_at: iso(nextDay(now)) };
        if (x.costPerDay !== undefined)
          r.cost_per_day = { limit: x.costPerDay, ...u.costDay, resets_at: iso(nextDay(now)) };
        if (x.costPerMonth !== undefined)
          r.cost_per_month = { limit: x.costPerMonth, ...u.costMonth, resets_at: iso(nextMonth(now)) };
      }
      return r;
    };
    return {
      tenant: q.tenant ? await one(tenantScope(tenant), q.tenant) : null,
      key: q.key && keyId !== null ? await one(keyScope(keyId), q.key) : null,
    };
  }
}
