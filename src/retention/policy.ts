/**
 * Retention policies (docs/operations.md): how long a session may stay idle before it
 * is archived, how long it stays archived before it is deleted, and how long each operational
 * table keeps its finished rows. Operator-wide from `keel.config` (a default, by tenant, by
 * agent), and by API for a tenant (and an agent of it). For each setting the most specific
 * policy that sets it wins: tenant's agent (API) › tenant (API) › agent (config) › tenant
 * (config) › default (config). `null` says "never" and stops the fall-through.
 */
import { OPERATIONAL_TABLES, StoreError, type OperationalTable, type StoredRetentionPolicy } from '../store/index.ts';

export const RETENTION_DAY_MS = 86_400_000;

/** What a policy says of sessions. An absent setting falls through to the next policy. */
export interface SessionRetention {
  /** Sessions idle (no run unfinished, started or ended) this many days are archived to the archive store; null: never. */
  archiveAfterDays?: number | null;
  /** Archived sessions are deleted (erased, their archive removed) this many days after they were archived; null: never. */
  deleteAfterDays?: number | null;
}

/** The operator's retention settings (`retention` in keel.config). */
export interface RetentionSettings {
  /** Every session's policy unless a more specific one says otherwise. */
  sessions?: SessionRetention;
  /** By tenant. */
  tenants?: Record<string, SessionRetention>;
  /** By agent name (the session's agent), whatever the tenant. */
  agents?: Record<string, SessionRetention>;
  /** Days each operational table keeps its finished rows (null: forever); see TABLE_DEFAULT_DAYS. */
  tables?: Partial<Record<OperationalTable, number | null>>;
}

/**
 * The operational tables' defaults, in days: finished rows only (a pending delivery, an
 * unconsumed signal of a live run, a running experiment's items stay whatever their age).
 */
export const TABLE_DEFAULT_DAYS: Record<OperationalTable, number | null> = {
  idempotency: 7,
  schedule_fires: 90,
  webhook_deliveries: 30,
  signals: 30,
  callbacks: 30,
  flow_control: 2,
  experiment_items: 365,
};

const SESSION_FIELDS = ['archiveAfterDays', 'deleteAfterDays'] as const;

/** Raised for a policy that cannot be kept: `field` names what is wrong. */
export class RetentionPolicyError extends StoreError {
  readonly field: string;
  constructor(field: string, message: string) {
    super('invalid_retention_policy', `${field}: ${message}`);
    this.name = 'RetentionPolicyError';
    this.field = field;
  }
}

const days = (field: string, v: unknown): number | null => {
  if (v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 100_000)
    throw new RetentionPolicyError(field, 'a number of days from 0 to 100000, or null for never');
  return v;
};

/** A session policy checked: unknown fields (and `keepRuns`, not built: ADR-0044) refused with the field's name. */
export function checkedSessionRetention(input: unknown, at = 'policy'): SessionRetention {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new RetentionPolicyError(at, 'an object with archiveAfterDays and/or deleteAfterDays');
  const out: SessionRetention = {};
  for (const [k, v] of Object.entries(input)) {
    if (k === 'keepRuns')
      throw new RetentionPolicyError(
        `${at}.keepRuns`,
        'keeping the last N runs’ detail is not available: moving events out of the middle of a sealed log is not safe with the current storage (ADR-0044)',
      );
    if (!(SESSION_FIELDS as readonly string[]).includes(k))
      throw new RetentionPolicyError(`${at}.${k}`, `unknown setting (known: ${SESSION_FIELDS.join(', ')})`);
    if (v !== undefined) out[k as (typeof SESSION_FIELDS)[number]] = days(`${at}.${k}`, v);
  }
  return out;
}

/** The operator's settings checked (keel.config): each field at fault named. */
export function checkedRetentionSettings(input: unknown): RetentionSettings {
  if (input === undefined) return {};
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new RetentionPolicyError('retention', 'an object (sessions, tenants, agents, tables)');
  const out: RetentionSettings = {};
  for (const [k, v] of Object.entries(input)) {
    if (k === 'sessions') out.sessions = checkedSessionRetention(v, 'retention.sessions');
    else if (k === 'tenants' || k === 'agents') {
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        throw new RetentionPolicyError(`retention.${k}`, 'an object of policies by name');
      out[k] = Object.fromEntries(
        Object.entries(v).map(([name, p]) => [name, checkedSessionRetention(p, `retention.${k}.${name}`)]),
      );
    } else if (k === 'tables') {
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        throw new RetentionPolicyError('retention.tables', 'an object of days by table');
      out.tables = {};
      for (const [t, d] of Object.entries(v)) {
        if (!(OPERATIONAL_TABLES as readonly string[]).includes(t))
          throw new RetentionPolicyError(
            `retention.tables.${t}`,
            `unknown table (known: ${OPERATIONAL_TABLES.join(', ')})`,
          );
        out.tables[t as OperationalTable] = days(`retention.tables.${t}`, d);
      }
    } else
      throw new RetentionPolicyError(`retention.${k}`, 'unknown setting (known: sessions, tenants, agents, tables)');
  }
  return out;
}

/** The policies that apply, resolved for one session at a time (see the module's comment). */
export class PolicyResolver {
  private readonly stored = new Map<string, SessionRetention>();
  private readonly settings: RetentionSettings;

  constructor(settings: RetentionSettings, stored: readonly StoredRetentionPolicy[]) {
    this.settings = settings;
    for (const p of stored) this.stored.set(`${p.tenant}\u0000${p.agent ?? ''}`, p.policy as SessionRetention);
  }

  /** The chain for a session, most specific first. */
  private chain(tenant: string, agent: string | null): SessionRetention[] {
    const out: Array<SessionRetention | undefined> = [
      agent !== null ? this.stored.get(`${tenant}\u0000${agent}`) : undefined,
      this.stored.get(`${tenant}\u0000`),
      agent !== null ? this.settings.agents?.[agent] : undefined,
      this.settings.tenants?.[tenant],
      this.settings.sessions,
    ];
    return out.filter((p): p is SessionRetention => p !== undefined);
  }

  /** The effective session policy for a tenant's session of an agent. */
  effective(tenant: string, agent: string | null): Required<SessionRetention> {
    const chain = this.chain(tenant, agent);
    const pick = (f: (typeof SESSION_FIELDS)[number]) => {
      for (const p of chain) if (p[f] !== undefined) return p[f]!;
      return null;
    };
    return { archiveAfterDays: pick('archiveAfterDays'), deleteAfterDays: pick('deleteAfterDays') };
  }

  /** Every distinct value a setting takes in some policy (the periods a sweep scans for). */
  periods(field: (typeof SESSION_FIELDS)[number]): number[] {
    const all = [
      ...this.stored.values(),
      ...Object.values(this.settings.agents ?? {}),
      ...Object.values(this.settings.tenants ?? {}),
      ...(this.settings.sessions ? [this.settings.sessions] : []),
    ];
    return [...new Set(all.map((p) => p[field]).filter((d): d is number => typeof d === 'number'))].sort(
      (a, b) => a - b,
    );
  }

  /** Days each table keeps its finished rows (null: forever). */
  tableDays(table: OperationalTable): number | null {
    const d = this.settings.tables?.[table];
    return d === undefined ? TABLE_DEFAULT_DAYS[table] : d;
  }
}
