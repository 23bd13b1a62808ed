/**
 * The store's part of tenant quotas (docs/operations.md, ADR-0043): the ledger table, the
 * migration that adds `waiting_for_quota` to the run statuses, and the decision of a reservation
 * (the same for both backends, run inside their transaction).
 */
import type { QuotaBudgetName, QuotaGrant, QuotaReservation, QuotaUsage } from './port/index.ts';

/**
 * `quota_charges`: one row per model call and scope charged (`tenant:acme`, `key:key_1`), with
 * the UTC day and month it is charged to, its tokens and cost (an estimate until `settled`).
 */
export function quotaChargesDdl(int: 'INTEGER' | 'BIGINT', real: 'REAL' | 'DOUBLE PRECISION'): string {
  const rowid = int === 'INTEGER' ? ' WITHOUT ROWID' : '';
  return `
      CREATE TABLE IF NOT EXISTS quota_charges (
        scope TEXT NOT NULL,
        call_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        day ${int} NOT NULL,
        month ${int} NOT NULL,
        tokens ${int} NOT NULL,
        cost ${real} NOT NULL,
        settled ${int} NOT NULL DEFAULT 0,
        at ${int} NOT NULL,
        PRIMARY KEY (scope, call_id)
      )${rowid};
      CREATE INDEX IF NOT EXISTS quota_charges_day ON quota_charges (scope, day);
      CREATE INDEX IF NOT EXISTS quota_charges_month ON quota_charges (scope, month);
      CREATE INDEX IF NOT EXISTS quota_charges_call ON quota_charges (call_id);
  `;
}

/** The statuses of the runs table's CHECK constraint after the quota migration. */
const STATUSES_WITH_QUOTA = `'queued','running','waiting_approval','waiting_for_user','paused','completed','failed','cancelled','timed_out','sleeping','waiting_for_signal','waiting_for_quota'`;
const IDLE = `'queued','paused','waiting_approval','waiting_for_user','sleeping','waiting_for_signal','waiting_for_quota'`;
const WAITING = `'waiting_approval','waiting_for_user','sleeping','waiting_for_signal','waiting_for_quota'`;

/**
 * SQLite: the statuses listed in the runs table's definition (its CHECK constraint and its virtual
 * `due_at` column) gain `waiting_for_quota`. Neither changes what is stored on disk (every row stays
 * valid; a virtual column is computed on read), so the table's definition is edited in place, as
 * SQLite documents for such changes (lang_altertable.html, "other kinds of table schema changes"),
 * rather than rebuilt; the index on `due_at` is rebuilt after.
 */
export function sqliteQuotaStatusSql(tableSql: string): string {
  const edited = tableSql.replaceAll(`'waiting_for_signal')`, `'waiting_for_signal','waiting_for_quota')`);
  if ((edited.match(/'waiting_for_quota'/g) ?? []).length < 4)
    throw new Error('the runs table is not as Keel made it: cannot add the status waiting_for_quota');
  return edited;
}

/** PostgreSQL migration 18: the status, `due_at` again with it, and the ledger. */
export const POSTGRES_QUOTAS_MIGRATION = `
  ALTER TABLE runs DROP CONSTRAINT runs_status_check;
  ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN (${STATUSES_WITH_QUOTA}));
  DROP INDEX runs_due;
  ALTER TABLE runs DROP COLUMN due_at;
  ALTER TABLE runs ADD COLUMN due_at bigint GENERATED ALWAYS AS (
    CASE WHEN status IN (${IDLE}) THEN
      LEAST(deadline_at, CASE WHEN status IN (${WAITING}) THEN wait_expires_at END)
    END
  ) STORED;
  CREATE INDEX runs_due ON runs (due_at, id) WHERE due_at IS NOT NULL;
  ${quotaChargesDdl('BIGINT', 'DOUBLE PRECISION')}
`;

/** What the ledger holds of a scope, the reserving call left out. */
export interface ScopeTotals {
  tokensDay: number;
  costDay: number;
  costMonth: number;
}

/** The first limit of `budget` the reservation does not fit in, given what the scope holds. */
export function overLimit(
  r: QuotaReservation,
  budget: QuotaReservation['scopes'][number]['budget'],
  held: ScopeTotals,
): { limit: QuotaBudgetName; max: number } | undefined {
  const checks: Array<[QuotaBudgetName, number, number]> = [
    ['tokensPerDay', held.tokensDay, r.tokens],
    ['costPerDay', held.costDay, r.cost],
    ['costPerMonth', held.costMonth, r.cost],
  ];
  for (const [limit, has, adds] of checks) {
    const max = budget[limit];
    if (max === undefined) continue;
    // An estimate above the whole limit counts as the limit: it fits in an empty period.
    if (has + Math.min(adds, max) > max + 1e-12) return { limit, max };
  }
  return undefined;
}

/** The grant of a refused reservation: the limit and what the scope holds in its period. */
export function refusal(
  scope: string,
  o: { limit: QuotaBudgetName; max: number },
  usage: QuotaUsage,
): Extract<QuotaGrant, { granted: false }> {
  const amount =
    o.limit === 'tokensPerDay' ? usage.tokensDay : o.limit === 'costPerDay' ? usage.costDay : usage.costMonth;
  return { granted: false, scope, limit: o.limit, max: o.max, usage: amount };
}

/** A row of the usage query: sums by period and settlement. */
export interface QuotaUsageRow {
  period: 'day' | 'month';
  settled: number;
  tokens: number | string | null;
  cost: number | string | null;
}

/** The usage of a scope from its rows (both backends). */
export function toQuotaUsage(rows: readonly QuotaUsageRow[]): QuotaUsage {
  const u: QuotaUsage = {
    tokensDay: { used: 0, reserved: 0 },
    costDay: { used: 0, reserved: 0 },
    costMonth: { used: 0, reserved: 0 },
  };
  for (const r of rows) {
    const key = Number(r.settled) ? 'used' : 'reserved';
    if (r.period === 'day') {
      u.tokensDay[key] += Number(r.tokens ?? 0);
      u.costDay[key] += Number(r.cost ?? 0);
    } else u.costMonth[key] += Number(r.cost ?? 0);
  }
  return u;
}

/** The usage query (both dialects: `?` placeholders; PostgreSQL's are numbered by the caller). */
export const quotaUsageSql = (p: (n: number) => string, exceptCall: boolean): string => {
  const except = exceptCall ? ` AND call_id <> ${p(4)}` : '';
  return `SELECT 'day' AS period, settled, sum(tokens) AS tokens, sum(cost) AS cost FROM quota_charges WHERE scope = ${p(1)} AND day = ${p(2)}${except} GROUP BY settled
     UNION ALL
     SELECT 'month' AS period, settled, sum(tokens) AS tokens, sum(cost) AS cost FROM quota_charges WHERE scope = ${p(1)} AND month = ${p(3)}${except} GROUP BY settled`;
};
