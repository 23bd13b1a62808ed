/**
 * The tenants registry's rows (TenantOps, src/store/port/tenants.ts) and the checks of what an
 * operator sets, the same for both stores: a weight is a whole number from 1 to 10,000, a quota a
 * number ≥ 0 (a whole number for counts), `onLimit` is `wait` or `fail`. Bad input is a
 * `validation` StoreError naming the field, never a row written half-checked.
 */
import {
  API_KEY_SCOPES,
  StoreError,
  type ApiKeyRecord,
  type ApiKeyScope,
  type QuotaLimits,
  type TenantQuotas,
  type TenantRecord,
  type TenantUpdate,
} from './port/index.ts';

export type TenantRow = {
  id: string;
  name: string | null;
  weight: number;
  quotas: string;
  created_at: number | string;
  updated_at: number | string;
};

export const toTenant = (r: TenantRow): TenantRecord => ({
  id: r.id,
  name: r.name,
  weight: Number(r.weight),
  quotas: JSON.parse(r.quotas) as TenantQuotas,
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
});

/** A tenant's id: what API keys and sessions carry (server/auth.ts checks the same on key creation). */
export const TENANT_ID = /^[A-Za-z0-9._-]{1,64}$/;
export const MAX_WEIGHT = 10_000;

/** Each quota: whether it counts whole things (runs, tokens) or may be fractional (cost). */
const QUOTA_FIELDS: Record<keyof QuotaLimits, 'count' | 'amount'> = {
  concurrentRuns: 'count',
  runsPerMinute: 'count',
  tokensPerDay: 'count',
  costPerDay: 'amount',
  costPerMonth: 'amount',
};

/** The names of the quotas (`keel tenants set --quota NAME=N`). */
export const QUOTA_NAMES = Object.keys(QUOTA_FIELDS) as Array<keyof QuotaLimits>;

const invalid = (message: string): StoreError => new StoreError('validation', message);

/** `quotas` checked (`what` names it in the error): only known fields, each a number ≥ 0, `onLimit` wait or fail. */
export function checkQuotas(quotas: unknown, what = 'quotas'): TenantQuotas {
  if (typeof quotas !== 'object' || quotas === null || Array.isArray(quotas))
    throw invalid(`${what} must be an object of limits, e.g. {"concurrentRuns": 5}`);
  const out: TenantQuotas = {};
  for (const [k, v] of Object.entries(quotas)) {
    if (v === undefined) continue;
    if (k === 'onLimit') {
      if (v !== 'wait' && v !== 'fail')
        throw invalid(`${what}.onLimit must be "wait" or "fail", not ${JSON.stringify(v)}`);
      out.onLimit = v;
      continue;
    }
    const kind = QUOTA_FIELDS[k as keyof QuotaLimits];
    if (!kind) throw invalid(`${what} has no limit ${JSON.stringify(k)} (known: ${QUOTA_NAMES.join(', ')}, onLimit)`);
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (kind === 'count' && !Number.isInteger(v)))
      throw invalid(
        `${what}.${k} must be ${kind === 'count' ? 'a whole number' : 'a number'} ≥ 0, not ${JSON.stringify(v)}`,
      );
    out[k as keyof QuotaLimits] = v;
  }
  return out;
}

/** An operator's update checked: a valid id, a weight from 1 to MAX_WEIGHT, quotas as `checkQuotas` says. */
export function checkTenantUpdate(t: TenantUpdate): TenantUpdate {
  if (typeof t.id !== 'string' || !TENANT_ID.test(t.id))
    throw invalid('a tenant id is 1-64 letters, digits, dots, dashes or underscores');
  if (t.name !== undefined && t.name !== null && (typeof t.name !== 'string' || t.name.length > 200))
    throw invalid('a tenant name is text of at most 200 characters');
  if (t.weight !== undefined && (!Number.isInteger(t.weight) || t.weight < 1 || t.weight > MAX_WEIGHT))
    throw invalid(`a tenant weight is a whole number from 1 to ${MAX_WEIGHT}, not ${JSON.stringify(t.weight)}`);
  return {
    id: t.id,
    ...(t.name !== undefined ? { name: t.name } : {}),
    ...(t.weight !== undefined ? { weight: t.weight } : {}),
    ...(t.quotas !== undefined ? { quotas: checkQuotas(t.quotas) } : {}),
  };
}

/** An API key's scope and quotas as both stores write them (checked: a known scope, quotas as `checkQuotas` says). */
export function keyColumns(k: ApiKeyRecord): { scope: ApiKeyScope; quotas: string | null } {
  if (!API_KEY_SCOPES.includes(k.scope))
    throw invalid(`an API key's scope is ${API_KEY_SCOPES.join(' or ')}, not ${JSON.stringify(k.scope)}`);
  return {
    scope: k.scope,
    quotas: k.quotas === null ? null : JSON.stringify(checkQuotas(k.quotas, "the key's quotas")),
  };
}
