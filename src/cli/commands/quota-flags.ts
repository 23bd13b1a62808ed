/**
 * `--quota NAME=N` (repeatable) and `--on-limit wait|fail`, as `keel tenants set` and `keel keys
 * create` take them: quotas by their runtime names (concurrentRuns, runsPerMinute, tokensPerDay,
 * costPerDay, costPerMonth). `NAME=none` removes a limit (null in the result). The store checks
 * the values (whole numbers ≥ 0 for counts, numbers ≥ 0 for costs).
 */
import type { QuotaLimits, TenantQuotas } from '../../store/index.ts';
import { UsageError } from '../args.ts';

const NAMES: ReadonlyArray<keyof QuotaLimits> = [
  'concurrentRuns',
  'runsPerMinute',
  'tokensPerDay',
  'costPerDay',
  'costPerMonth',
];

/** The limits the flags set (a number) or remove (null); `onLimit` when `--on-limit` is given. */
export function quotaFlags(
  command: string,
  flags: readonly string[] | undefined,
  onLimit: string | undefined,
): { [K in keyof QuotaLimits]?: number | null } & Pick<TenantQuotas, 'onLimit'> {
  const out: { [K in keyof QuotaLimits]?: number | null } & Pick<TenantQuotas, 'onLimit'> = {};
  for (const flag of flags ?? []) {
    const m = /^([A-Za-z]+)=(.+)$/.exec(flag);
    if (!m) throw new UsageError(`${command}: --quota takes NAME=N, e.g. --quota concurrentRuns=5 (not ${flag})`);
    const name = m[1] as keyof QuotaLimits;
    if (!NAMES.includes(name)) throw new UsageError(`${command}: no quota ${m[1]} (known: ${NAMES.join(', ')})`);
    if (m[2] === 'none') {
      out[name] = null;
      continue;
    }
    const n = Number(m[2]);
    if (!Number.isFinite(n) || m[2]!.trim() === '')
      throw new UsageError(`${command}: --quota ${name} takes a number (or none), not ${m[2]}`);
    out[name] = n;
  }
  if (onLimit !== undefined) {
    if (onLimit !== 'wait' && onLimit !== 'fail')
      throw new UsageError(`${command}: --on-limit is wait or fail, not ${onLimit}`);
    out.onLimit = onLimit;
  }
  return out;
}

/** `base` with the flags' changes: limits set or removed, the policy set. */
export function withQuotaFlags(base: TenantQuotas, flags: ReturnType<typeof quotaFlags>): TenantQuotas {
  const out: TenantQuotas = { ...base };
  for (const [k, v] of Object.entries(flags)) {
    if (v === null) delete out[k as keyof QuotaLimits];
    else (out as Record<string, unknown>)[k] = v;
  }
  return out;
}

/** Quotas as one line: `concurrentRuns=5 costPerDay=2.5 onLimit=fail`, or `none`. */
export const quotasLine = (q: TenantQuotas | null): string =>
  q && Object.keys(q).length > 0
    ? Object.entries(q)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(' ')
    : 'none';
