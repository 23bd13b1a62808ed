/** What a caller gets when a tenant's quota refuses it (ADR-0043): HTTP 429 `quota_exceeded`, with Retry-After. */
import { StoreError } from '../../store/index.ts';

export class QuotaExceededError extends StoreError {
  readonly tenant: string;
  /** The scope refused: `tenant:<id>` or `key:<id>`. */
  readonly scope: string;
  readonly limit: string;
  readonly max: number;
  /** When to try again (epoch ms, by the runtime's clock) and how long that is from now. */
  readonly retryAt: number;
  readonly retryAfterMs: number;
  constructor(o: { tenant: string; scope: string; limit: string; max: number; retryAt: number; now: number }) {
    super(
      'quota_exceeded',
      `${o.scope} is over its quota ${o.limit} (${o.max}): try again at ${new Date(o.retryAt).toISOString()}`,
    );
    this.name = 'QuotaExceededError';
    this.tenant = o.tenant;
    this.scope = o.scope;
    this.limit = o.limit;
    this.max = o.max;
    this.retryAt = o.retryAt;
    this.retryAfterMs = Math.max(0, o.retryAt - o.now);
  }
}
