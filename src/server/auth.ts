import { createHash, randomBytes } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { newId } from '../core/index.ts';
import type { ApiKeyRecord, Store } from '../store/index.ts';
import { HttpProblem } from './problems.ts';

export type AuthEnv = { Variables: { tenant: string; keyId: string | null; rateLimit: number | null } };

export const hashKey = (secret: string): string => createHash('sha256').update(secret).digest('hex');

/** Creates an API key for a tenant. The secret is returned once; only its hash is stored. */
export async function createApiKey(store: Store, o: { tenant: string; name?: string; ratePerMinute?: number }): Promise<{ secret: string; key: ApiKeyRecord }> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(o.tenant)) throw new TypeError('a tenant name is 1-64 letters, digits, dots, dashes or underscores');
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
  };
  await store.createApiKey(key);
  return { secret, key };
}

function secretOf(header: string | undefined, apiKeyHeader: string | undefined): string | undefined {
  if (apiKeyHeader) return apiKeyHeader.trim();
  const m = header?.match(/^Bearer\s+(\S+)$/i);
  return m?.[1];
}

/**
 * With `required`, every request needs `Authorization: Bearer <key>` (or `x-api-key`) of an
 * unrevoked key, and acts for that key's tenant. With `off` (loopback without keys, or
 * `--insecure`), everything is the `default` tenant.
 */
export function authMiddleware(store: Store, mode: 'required' | 'off'): MiddlewareHandler<AuthEnv> {
  const cache = new Map<string, { key: ApiKeyRecord | undefined; at: number }>();
  return async (c, next) => {
    if (mode === 'off') {
      c.set('tenant', 'default');
      c.set('keyId', null);
      c.set('rateLimit', null);
      return next();
    }
    const secret = secretOf(c.req.header('authorization'), c.req.header('x-api-key'));
    if (!secret) throw new HttpProblem('unauthorized', 'send an API key as "Authorization: Bearer <key>"');
    const hash = hashKey(secret);
    let hit = cache.get(hash);
    // Revocations take effect within a few seconds without a store read per request.
    if (!hit || Date.now() - hit.at > 5000) {
      hit = { key: await store.findApiKey(hash), at: Date.now() };
      cache.set(hash, hit);
    }
    const key = hit.key;
    if (!key || key.revokedAt !== null) throw new HttpProblem('unauthorized', key ? 'this API key was revoked' : 'unknown API key');
    c.set('tenant', key.tenant);
    c.set('keyId', key.id);
    c.set('rateLimit', key.ratePerMinute);
    return next();
  };
}

/** A token bucket per API key (or per client address when auth is off). */
export function rateLimitMiddleware(defaultPerMinute: number): MiddlewareHandler<AuthEnv> {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return async (c, next) => {
    const perMinute = c.get('rateLimit') ?? defaultPerMinute;
    if (perMinute <= 0) return next();
    const id = c.get('keyId') ?? 'anonymous';
    const now = Date.now();
    const b = buckets.get(id) ?? { tokens: perMinute, at: now };
    b.tokens = Math.min(perMinute, b.tokens + ((now - b.at) / 60_000) * perMinute);
    b.at = now;
    if (b.tokens < 1) {
      const retryAfter = Math.ceil(((1 - b.tokens) / perMinute) * 60);
      buckets.set(id, b);
      throw new HttpProblem('rate_limited', `more than ${perMinute} requests a minute`, { retry_after: retryAfter });
    }
    b.tokens -= 1;
    buckets.set(id, b);
    if (buckets.size > 10_000) for (const [k, v] of buckets) if (now - v.at > 120_000) buckets.delete(k);
    return next();
  };
}
