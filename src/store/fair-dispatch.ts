/**
 * Fair dispatch (ADR-0042): which tenant's run a claim takes when several tenants have runs ready.
 *
 * Each tenant has a pass in `tenant_dispatch` (its weighted service: each claim of one of its ready
 * runs adds 1 / weight) and the start of its last claim. The virtual time is the latest start of
 * any tenant. A claim takes the tenant whose effective pass, the greater of its pass and the virtual
 * time, is the least (ties: the tenant whose oldest ready run is the oldest), and that tenant's
 * oldest ready run (created_at then id: runs carry no claim priority, so order inside a tenant is
 * arrival order). A tenant that was idle starts again at the virtual time: it keeps no credit from
 * its idle time, and a tenant that arrives behind another's backlog is served at the next claim.
 *
 * Its cost follows the tenants with ready runs, not the runs: they are found by a skip scan of the
 * partial index on the ready runs by (tenant, created_at, id), one index probe per tenant, and each
 * tenant's oldest ready run is the first entry of its part of that index. Runs whose lease expired
 * (recoveries) are taken first, oldest first, and charge nobody: their claim was charged when they
 * were first taken from the queue.
 */
import type { ClaimPolicy, RunStatus } from './port/index.ts';

export type Dialect = 'sqlite' | 'postgres';

const quoted = (s: RunStatus): string => `'${s.replace(/'/g, '')}'`;

/** The ready runs of `policy` as a condition on `runs` (written as the partial index's predicate for the usual one status). */
export function readySql(policy: ClaimPolicy, d: Dialect, alias = ''): string {
  const a = alias ? `${alias}.` : '';
  const statuses =
    policy.ready.length === 1
      ? `${a}status = ${quoted(policy.ready[0]!)}`
      : `${a}status IN (${policy.ready.map(quoted).join(', ') || 'NULL'})`;
  return `${statuses} AND ${d === 'sqlite' ? `${a}queued_behind = 0` : `NOT ${a}queued_behind`}`;
}

const INDEXED_POLICY: ClaimPolicy = { ready: ['queued'], recoverable: [], to: 'running' };

/** The partial index of the ready runs by tenant (the usual policy: `queued`, not queued behind). */
export const readyByTenantIndexSql = (d: Dialect): string =>
  `CREATE INDEX IF NOT EXISTS runs_ready_by_tenant ON runs (tenant, created_at, id) WHERE ${readySql(INDEXED_POLICY, d)}`;

/**
 * `runs` (as `alias`) read through the ready runs' index when the policy's ready runs are the
 * index's: SQLite's planner, without statistics, would otherwise take the index on the status and
 * read every queued run. PostgreSQL plans from its statistics.
 */
export function readyRunsTable(policy: ClaimPolicy, d: Dialect, alias = ''): string {
  const indexed = d === 'sqlite' && policy.ready.length === 1 && policy.ready[0] === 'queued';
  return `runs${alias ? ` ${alias}` : ''}${indexed ? ' INDEXED BY runs_ready_by_tenant' : ''}`;
}

/** The greater of two numbers, in the dialect. */
const greatest = (d: Dialect, a: string, b: string): string =>
  d === 'sqlite' ? `MAX(${a}, ${b})` : `GREATEST(${a}, ${b})`;

/**
 * The tenants with ready runs, the one to serve first first: its tenant, effective pass and the
 * creation time of its oldest ready run. A skip scan of the ready runs' index (a recursive query,
 * one probe per tenant), then each tenant's row of `tenant_dispatch`. `limit` (a parameter
 * placeholder or a number) bounds the list.
 */
export function tenantsToServeSql(policy: ClaimPolicy, d: Dialect, limit: string): string {
  const ready = readySql(policy, d);
  return `WITH RECURSIVE active(tenant) AS (
      SELECT (SELECT tenant FROM ${readyRunsTable(policy, d)} WHERE ${ready} AND tenant IS NOT NULL ORDER BY tenant LIMIT 1)
      UNION ALL
      SELECT (SELECT r.tenant FROM ${readyRunsTable(policy, d, 'r')} WHERE ${readySql(policy, d, 'r')} AND r.tenant > active.tenant ORDER BY r.tenant LIMIT 1)
      FROM active WHERE active.tenant IS NOT NULL
    ),
    clock(v) AS (SELECT COALESCE(MAX(start), 0) FROM tenant_dispatch)
    SELECT a.tenant AS tenant, ${greatest(d, 'COALESCE(td.pass, 0)', 'clock.v')} AS pass,
           (SELECT h.created_at FROM ${readyRunsTable(policy, d, 'h')} WHERE ${readySql(policy, d, 'h')} AND h.tenant = a.tenant ORDER BY h.created_at, h.id LIMIT 1) AS head
    FROM active a CROSS JOIN clock LEFT JOIN tenant_dispatch td ON td.tenant = a.tenant
    WHERE a.tenant IS NOT NULL
    ORDER BY 2, 3, 1
    LIMIT ${limit}`;
}

/**
 * Charges a tenant one claim (its placeholder, `tenant`, appears twice): its pass becomes the
 * greater of its pass and the virtual time, plus 1 / its weight (1 with no row in `tenants`). The
 * claim's start, that greater value, moves the virtual time on only for a claim fair dispatch
 * chose (`picked`): a claim of a named run (`runId`) is charged but advances nobody else's clock,
 * so the tenants it went ahead of keep their place. One statement: concurrent claims add up.
 */
export function chargeSql(d: Dialect, tenant: [string, string], picked: boolean): string {
  const from = greatest(d, 'tenant_dispatch.pass', 'excluded.start');
  return `INSERT INTO tenant_dispatch (tenant, pass, start)
    SELECT ${tenant[0]}, clock.v + 1.0 / w.weight, clock.v
    FROM (SELECT COALESCE(MAX(start), 0) AS v FROM tenant_dispatch) clock,
         (SELECT COALESCE((SELECT weight FROM tenants WHERE id = ${tenant[1]}), 1) AS weight) w
    WHERE true
    ON CONFLICT (tenant) DO UPDATE SET pass = ${from} + (excluded.pass - excluded.start),
                                       start = ${picked ? from : 'tenant_dispatch.start'}`;
}
