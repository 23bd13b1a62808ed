import { createHash, randomBytes } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { newId } from '../core/index.ts';
import type { ApiKeyRecord, ApiKeyScope, Store, TenantQuotas } from '../store/index.ts';
import type { ClientAddress } from './client-address.ts';
import { HttpProblem } from './problems.ts';

/** `scope`: the key's (see ApiKeyScope); null when authentication is off (a loopback operator may do everything). */
export type AuthEnv = {
  Variables: { tenant: string; keyId: string | null; rateLimit: number | null; scope: ApiKeyScope | null };
};

/** The routes of the admin scope only: the tenants registry and the tenants' keys. */
export const isAdminPath = (path: string): boolean => /^\/v1\/tenants(\/|$)/.test(path);

/**
 * The routes an admin key may take: the admin routes, and erasures (a tenant's, by date, the audit
 * and the verifying scan, as an operator; a tenant key erases only its own sessions there).
 */
const adminMayTake = (path: string): boolean => isAdminPath(path) || /^\/v1\/erasures(\/|$)/.test(path);

/** Refuses (403 `forbidden_scope`) an admin key outside the routes it may take, and a tenant key on the admin routes. */
export function checkScope(scope: ApiKeyScope, path: string): void {
  const admin = isAdminPath(path);
  if (scope === 'admin' && !adminMayTake(path))
    throw new HttpProblem(
      'forbidden_scope',
      'this API key has the admin scope: it manages tenants (/v1/tenants) and erasures (/v1/erasures) and nothing else; use a tenant key',
      { scope },
    );
  if (scope !== 'admin' && admin)
    throw new HttpProblem('forbidden_scope', 'managing tenants takes an API key with the admin scope', { scope });
}

export const hashKey = (secret: string): string => createHash('sha256').update(secret).digest('hex');

/** Creates an API key for a tenant. The secret is returned once; only its hash is stored. */
export async function createApiKey(
  store: { keys: Pick<Store['keys'], 'create'> },
  o: { tenant: string; name?: string; ratePerMinute?: number; scope?: ApiKeyScope; quotas?: TenantQuotas | null },
): Promise<{ secret: string; key: ApiKeyRecord }> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(o.tenant))
    throw new TypeError('a tenant name is 1-64 letters, digits, dots, dashes or underscores');
  const secret = `keel_${randomBytes(24).toString('base64url')}`;
  const key: ApiKeyRecord = {
    id: newId(),
    tenant: o.tenant,
    name: o.name ?? null,
    hash: hashKey(secret),
    prefix: secret.slice(0, 10),
    ratePerMinute: o.ratePerMinute ?? null,
    createdAt: Date.now(),
    revokedAt: null,
    scope: o.scope ?? 'tenant',
    quotas: o.quotas ?? null,
  };
  await store.keys.create(key);
  return { secret, key };
}

function secretOf(header: string | undefined, apiKeyHeader: string | undefined): string | undefined {
  if (apiKeyHeader) return apiKeyHeader.trim();
  const m = header?.match(/^Bearer\s+(\S+)$/i);
  return m?.[1];
}

/** API keys looked up recently, by hash: at most `max`, each trusted for `ttlMs` (a revocation takes effect within it). */
export class ApiKeyCache {
  private readonly entries = new Map<string, { key: ApiKeyRecord | undefined; at: number }>();
  private readonly lookup: { keys: Pick<Store['keys'], 'find'> };
  private readonly max: number;
  private readonly ttlMs: number;

  constructor(lookup: { keys: Pick<Store['keys'], 'find'> }, o: { max?: number; ttlMs?: number } = {}) {
    this.lookup = lookup;
    this.max = o.max ?? 10_000;
    this.ttlMs = o.ttlMs ?? 5000;
  }

  get size(): number {
    return this.entries.size;
  }

  async find(secret: string): Promise<ApiKeyRecord | undefined> {
    const hash = hashKey(secret);
    const hit = this.entries.get(hash);
    if (hit && Date.now() - hit.at <= this.ttlMs) {
      // Most recently used last: the first entry is the one to drop.
      this.entries.delete(hash);
      this.entries.set(hash, hit);
      return hit.key;
    }
    const key = await this.lookup.keys.find(hash);
    this.entries.delete(hash);
    this.entries.set(hash, { key, at: Date.now() });
    while (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value!);
    return key;
  }
}

/**
 * Failed authentications per client address: past `perMinute` in a minute, the address is refused
 * (429) before its key is even looked up, until the minute is over. Bounded like the cache.
 */
export class FailedAuthLimiter {
  private readonly failures = new Map<string, { n: number; since: number }>();
  private readonly perMinute: number;
  private readonly max: number;

  constructor(o: { perMinute?: number; max?: number } = {}) {
    this.perMinute = o.perMinute ?? 30;
    this.max = o.max ?? 10_000;
  }

  /** Throws `rate_limited` while the address is over its failures. */
  check(address: string): void {
    const f = this.failures.get(address);
    if (!f) return;
    const left = 60_000 - (Date.now() - f.since);
    if (left <= 0) this.failures.delete(address);
    else if (f.n >= this.perMinute) {
      throw new HttpProblem(
        'rate_limited',
        `too many failed authentications from ${address}: try again in ${Math.ceil(left / 1000)} s`,
        { retry_after: Math.ceil(left / 1000) },
      );
    }
  }

  failed(address: string): void {
    const now = Date.now();
    const f = this.failures.get(address);
    if (f && now - f.since < 60_000) f.n++;
    else {
      this.failures.delete(address);
      this.failures.set(address, { n: 1, since: now });
      while (this.failures.size > this.max) this.failures.delete(this.failures.keys().next().value!);
    }
  }
}

/** The key a request presents, checked: its record, or an `unauthorized` problem (counted as a failure of its address). */
export async function authenticate(
  c: { env: unknown; req: { header(name: string): string | undefined } },
  keys: ApiKeyCache,
  failures: FailedAuthLimiter,
  clientAddress: ClientAddress,
): Promise<ApiKeyRecord> {
  const address = clientAddress(c);
  failures.check(address);
  const secret = secretOf(c.req.header('authorization'), c.req.header('x-api-key'));
  if (!secret) throw new HttpProblem('unauthorized', 'send an API key as "Authorization: Bearer <key>"');
  const key = await keys.find(secret);
  if (!key || key.revokedAt !== null) {
    failures.failed(address);
    throw new HttpProblem('unauthorized', key ? 'this API key was revoked' : 'unknown API key');
  }
  return key;
}

/**
 * With `required`, every request needs `Authorization: Bearer <key>` (or `x-api-key`) of an
 * unrevoked key, and acts for that key's tenant. With `off` (loopback without keys, or
 * `--insecure`), everything is the `default` tenant.
 */
export function authMiddleware(
  keys: ApiKeyCache,
  failures: FailedAuthLimiter,
  mode: 'required' | 'off',
  clientAddress: ClientAddress,
): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    if (mode === 'off') {
      c.set('tenant', 'default');
      c.set('keyId', null);
      c.set('rateLimit', null);
      c.set('scope', null);
      return next();
    }
    const key = await authenticate(c, keys, failures, clientAddress);
    c.set('tenant', key.tenant);
    c.set('keyId', key.id);
    c.set('rateLimit', key.ratePerMinute);
    c.set('scope', key.scope);
    checkScope(key.scope, c.req.path);
    return next();
  };
}
