/**
 * The tenants registry as the source of quotas (ADR-0043): each tenant's quotas (`store.tenants`)
 * and each API key's own (`store.keys`), read in one snapshot that a process keeps for `ttlMs`. A
 * change an operator makes (`keel tenants set`, `PUT /v1/tenants/{id}`) applies in every process
 * within that time. With no quotas anywhere, quotas cost a step nothing: `inEffect` says so from
 * the snapshot, and no reservation is made.
 */
import type { StoreOps, TenantQuotas } from '../../store/index.ts';

/** How long a process keeps its snapshot of the registry's quotas. */
export const REGISTRY_QUOTAS_TTL_MS = 2000;

interface Snapshot {
  tenants: Map<string, TenantQuotas>;
  keys: Map<string, TenantQuotas>;
  /** Whether any of them has a limit. */
  anyLimit: boolean;
  readAt: number;
}

const hasLimits = (q: TenantQuotas): boolean =>
  q.concurrentRuns !== undefined ||
  q.runsPerMinute !== undefined ||
  q.tokensPerDay !== undefined ||
  q.costPerDay !== undefined ||
  q.costPerMonth !== undefined;

export class RegistryQuotas {
  /** The snapshot's age is the process's time (`Date.now`), not the runtime's clock: a manual clock must not keep it forever. */
  private snapshot: Snapshot | undefined;
  private reading: Promise<Snapshot> | undefined;
  /** Counts `invalidate` calls: a read begun before one must not leave its older snapshot. */
  private generation = 0;
  private readonly store: Pick<StoreOps, 'tenants' | 'keys'>;
  private readonly ttlMs: number;

  constructor(store: Pick<StoreOps, 'tenants' | 'keys'>, ttlMs = REGISTRY_QUOTAS_TTL_MS) {
    this.store = store;
    this.ttlMs = ttlMs;
  }

  /** Forgets the snapshot: the next read sees the registry as it is (this process changed it). */
  invalidate(): void {
    this.snapshot = undefined;
    this.reading = undefined;
    this.generation++;
  }

  /** A tenant's quotas (`keyId` null) or an API key's own, as the registry held them at most `ttlMs` ago. */
  readonly source = async (tenant: string, keyId: string | null): Promise<TenantQuotas | undefined> => {
    const s = await this.current();
    return keyId === null ? s.tenants.get(tenant) : s.keys.get(keyId);
  };

  /**
   * Whether any tenant or key has a limit: at once from a fresh snapshot (no await on a send's
   * path when nothing changed), else once the registry is read.
   */
  any(): boolean | Promise<boolean> {
    const s = this.snapshot;
    if (s && Date.now() - s.readAt < this.ttlMs) return s.anyLimit;
    return this.current().then((r) => r.anyLimit);
  }

  private current(): Promise<Snapshot> {
    const s = this.snapshot;
    if (s && Date.now() - s.readAt < this.ttlMs) return Promise.resolve(s);
    if (this.reading) return this.reading;
    const reading = this.read().finally(() => {
      if (this.reading === reading) this.reading = undefined;
    });
    this.reading = reading;
    return reading;
  }

  private async read(): Promise<Snapshot> {
    const generation = this.generation;
    const readAt = Date.now();
    const [tenants, keys] = await Promise.all([this.store.tenants.list(), this.store.keys.list()]);
    const s: Snapshot = { tenants: new Map(), keys: new Map(), anyLimit: false, readAt };
    for (const t of tenants) if (Object.keys(t.quotas).length > 0) s.tenants.set(t.id, t.quotas);
    for (const k of keys)
      if (k.revokedAt === null && k.quotas && Object.keys(k.quotas).length > 0) s.keys.set(k.id, k.quotas);
    s.anyLimit = [...s.tenants.values(), ...s.keys.values()].some(hasLimits);
    // Read before a change this process made: answers its caller, but is not kept.
    if (generation === this.generation) this.snapshot = s;
    return s;
  }
}
