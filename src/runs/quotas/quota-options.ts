/** How a runtime learns each tenant's quotas (ADR-0043): `createRuntime({ quotas })` and `quotas` in keel.config. */
import { z } from 'zod';
import type { TenantQuotas } from '../../store/index.ts';

export interface QuotaOptions {
  /** The quotas of a tenant the source says nothing of (and of every tenant without a source). */
  default?: TenantQuotas;
  /**
   * A tenant's quotas (`keyId` null), or an API key's own (`keyId` set; undefined: the key has none
   * of its own, only its tenant's apply). Called at each model call's reservation and each run's
   * creation, so keep it cheap (cache); the tenants registry (`store.tenants`) is meant to plug in here.
   */
  source?: (tenant: string, keyId: string | null) => Promise<TenantQuotas | undefined>;
  /**
   * A run that waits for quota held by reservations not settled yet (calls in flight) tries again
   * this soon rather than at the period's end. Default 5000 ms.
   */
  recheckMs?: number;
}

const limit = z.number().finite().nonnegative();

/** What a quotas object may hold (keel.config, the runtime option): an unknown field is refused. */
export const TenantQuotasSchema = z.strictObject({
  concurrentRuns: z.number().int().positive().optional(),
  runsPerMinute: z.number().int().positive().optional(),
  tokensPerDay: limit.optional(),
  costPerDay: limit.optional(),
  costPerMonth: limit.optional(),
  onLimit: z.enum(['wait', 'fail']).optional(),
});

/** Throws a TypeError naming the field at fault unless `q` is valid quotas. */
export function checkTenantQuotas(q: unknown, where: string): TenantQuotas {
  const parsed = TenantQuotasSchema.safeParse(q);
  if (parsed.success) return parsed.data as TenantQuotas;
  const issue = parsed.error.issues[0]!;
  const field = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : issue.path.join('.');
  throw new TypeError(
    `${where}${field ? `.${field}` : ''}: ${issue.code === 'unrecognized_keys' ? 'not a quota' : issue.message}`,
  );
}
