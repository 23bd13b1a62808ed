import type { MiddlewareHandler } from 'hono';
import type { AuthEnv } from './auth.ts';
import type { ClientAddress } from './client-address.ts';
import { HttpProblem } from './problems.ts';

/**
 * Token buckets by id (an API key, a client address), each refilling at its rate a minute. At most
 * `max` are kept, the least recently used dropped first: a dropped bucket starts full again, so a
 * flood of new addresses costs memory up to `max` and no more.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly max: number;

  constructor(o: { max?: number } = {}) {
    this.max = o.max ?? 10_000;
  }

  get size(): number {
    return this.buckets.size;
  }

  /** Takes a token from `id`'s bucket: undefined when there was one, else the seconds until there is. */
  take(id: string, perMinute: number, now = Date.now()): number | undefined {
    const b = this.buckets.get(id) ?? { tokens: perMinute, at: now };
    b.tokens = Math.min(perMinute, b.tokens + (Math.max(0, now - b.at) / 60_000) * perMinute);
    b.at = now;
    // Most recently used last: the first entry is the one to drop.
    this.buckets.delete(id);
    this.buckets.set(id, b);
    while (this.buckets.size > this.max) this.buckets.delete(this.buckets.keys().next().value!);
    if (b.tokens < 1) return Math.ceil(((1 - b.tokens) / perMinute) * 60);
    b.tokens -= 1;
    return undefined;
  }
}

/**
 * Requests a minute: per API key (its own rate, else `defaultPerMinute`), and, for requests
 * without one (auth off, callback URLs), per client address. 0: no limit.
 */
export function rateLimitMiddleware(
  defaultPerMinute: number,
  address: ClientAddress,
  buckets = new TokenBuckets(),
): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const perMinute = c.get('rateLimit') ?? defaultPerMinute;
    if (perMinute <= 0) return next();
    const key = c.get('keyId');
    const retryAfter = buckets.take(key !== null ? `key ${key}` : `address ${address(c)}`, perMinute);
    if (retryAfter !== undefined)
      throw new HttpProblem('rate_limited', `more than ${perMinute} requests a minute`, { retry_after: retryAfter });
    return next();
  };
}
