/**
 * PostgreSQL: the erasure operations of the port (`store.erasure`, ADR-0041): which sessions an
 * erasure reaches, a tenant's own rows, the audit, and the scan of every table of the schema for
 * what an erasure should have left nothing of.
 */
import type { ErasureFinding, ErasureRecord } from '../port/index.ts';
import { keptBecause, needleForms, rowKey } from '../erasure-scan.ts';
import { TERMINAL } from './shared.ts';
import type { Sql } from './sql.ts';
import type { PgOpsOf } from './context.ts';

type ErasureRow = { id: string; scope: string; target_hash: string; by: string; at: string; counts: string };

const toErasure = (r: ErasureRow): ErasureRecord => ({
  id: r.id,
  scope: r.scope as ErasureRecord['scope'],
  targetHash: r.target_hash,
  by: r.by,
  at: Number(r.at),
  counts: JSON.parse(r.counts) as Record<string, number>,
});

/** A tenant's own rows, in the order they go (children first). */
const TENANT_ROWS: ReadonlyArray<[kind: string, sql: string]> = [
  ['scheduleFires', 'DELETE FROM schedule_fires WHERE schedule_id IN (SELECT id FROM schedules WHERE tenant = $1)'],
  ['schedules', 'DELETE FROM schedules WHERE tenant = $1'],
  [
    'webhookAttempts',
    'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE tenant = $1)',
  ],
  ['webhookDeliveries', 'DELETE FROM webhook_deliveries WHERE tenant = $1'],
  ['webhooks', 'DELETE FROM webhooks WHERE tenant = $1'],
  ['datasetItems', 'DELETE FROM dataset_items WHERE dataset_id IN (SELECT id FROM datasets WHERE tenant = $1)'],
  ['datasets', 'DELETE FROM datasets WHERE tenant = $1'],
  ['batchItems', 'DELETE FROM batch_items WHERE batch_id IN (SELECT id FROM batches WHERE tenant = $1)'],
  ['batches', 'DELETE FROM batches WHERE tenant = $1'],
  ['idempotencyRecords', 'DELETE FROM idempotency_keys WHERE tenant = $1'],
  // Quotas (ADR-0043): the ledger of the tenant and of its keys, their windows and slots; fair dispatch's pass; the registry's row.
  [
    'quotaCharges',
    "DELETE FROM quota_charges WHERE scope = 'tenant:' || $1 OR scope IN (SELECT 'key:' || id FROM api_keys WHERE tenant = $1)",
  ],
  ...(['state', 'slots', 'usage', 'waiters'] as const).map((t): [string, string] => [
    'quotaLimits',
    `DELETE FROM model_limit_${t} WHERE key IN ('quota:tenant:' || $1 || ':concurrent', 'quota:tenant:' || $1 || ':runs')
       OR key IN (SELECT 'quota:key:' || id || ':concurrent' FROM api_keys WHERE tenant = $1)
       OR key IN (SELECT 'quota:key:' || id || ':runs' FROM api_keys WHERE tenant = $1)`,
  ]),
  ['tenantDispatch', 'DELETE FROM tenant_dispatch WHERE tenant = $1'],
  ['tenantRecord', 'DELETE FROM tenants WHERE id = $1'],
];

export const pgErasureOps: PgOpsOf<'erasure'> = {
  erasableSessions: async ({ sql }, q) =>
    (
      await sql.rows<{ id: string }>(
        `SELECT s.id FROM sessions s
         WHERE s.erased_at IS NULL AND s.id > $1 AND ($2::text IS NULL OR s.tenant = $2)
           AND ($3::bigint IS NULL OR (s.created_at < $3 AND NOT EXISTS (
             SELECT 1 FROM runs r WHERE r.session_id = s.id AND (r.status NOT IN (${TERMINAL}) OR r.ended_at >= $3 OR r.created_at >= $3))))
         ORDER BY s.id LIMIT $4`,
        [q.after ?? '', q.tenant ?? null, q.idleBefore ?? null, q.limit],
      )
    ).map((r) => r.id),
  eraseTenantData: ({ atomic }, tenant, at) =>
    atomic(async (q) => {
      const counts: Record<string, number> = {};
      counts.keys = await q.run(
        'UPDATE api_keys SET name = NULL, quotas = NULL, revoked_at = coalesce(revoked_at, $2) WHERE tenant = $1',
        [tenant, at],
      );
      for (const [kind, text] of TENANT_ROWS) counts[kind] = (counts[kind] ?? 0) + (await q.run(text, [tenant]));
      return counts;
    }),
  recordErasure: async ({ sql }, r) => {
    await sql.run('INSERT INTO erasures (id, scope, target_hash, by, at, counts) VALUES ($1, $2, $3, $4, $5, $6)', [
      r.id,
      r.scope,
      r.targetHash,
      r.by,
      r.at,
      JSON.stringify(r.counts),
    ]);
  },
  listErasures: async ({ sql }, page) =>
    (
      await sql.rows<ErasureRow>(
        'SELECT * FROM erasures WHERE ($1::text IS NULL OR id < $1) ORDER BY id DESC LIMIT $2',
        [page.before ?? null, page.limit],
      )
    ).map(toErasure),
  scanForRemnants: ({ sql }, needles) => scan(sql, needles),
  // Nothing by default: a VACUUM of every table after each erasure costs more than an erasure should.
  purgeErased: async ({ sql }, options) => {
    const later = 'WAL segments and backups keep what was erased until they expire (see docs/operations.md)';
    if (!options?.vacuum) return `dead row versions stay in the table files until VACUUM reclaims them; ${later}`;
    const tables = await sql.rowsPlannedForValues<{ name: string }>(
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
    );
    for (const t of tables) await sql.raw(`VACUUM ${quote(t.name)}`);
    return `every table was vacuumed (dead row versions reclaimed, not overwritten); ${later}`;
  },
};

/** `%form%` for LIKE, its wildcards escaped. */
const pattern = (form: string) => `%${form.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * Every table of the schema (from the catalog), every column as text, searched for every needle:
 * the database picks the rows that hold one (LIKE), then each of their columns is checked here.
 */
async function scan(sql: Sql, needles: readonly string[]): Promise<ErasureFinding[]> {
  const findings: ErasureFinding[] = [];
  if (needles.length === 0) return findings;
  const forms = needles.map((n) => ({ needle: n, forms: needleForms(n) }));
  const patterns = forms.flatMap((f) => f.forms.map(pattern));
  const columns = await sql.rowsPlannedForValues<{ table_name: string; column_name: string; data_type: string }>(
    `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
     JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
     WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
     ORDER BY c.table_name, c.ordinal_position`,
  );
  const byTable = new Map<string, string[]>();
  const types = new Map<string, string>();
  for (const c of columns) {
    byTable.set(c.table_name, [...(byTable.get(c.table_name) ?? []), c.column_name]);
    types.set(`${c.table_name}.${c.column_name}`, c.data_type);
  }
  for (const [table, cols] of byTable) {
    const keys = (
      await sql.rowsPlannedForValues<{ name: string }>(
        `SELECT a.attname AS name FROM pg_index i
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
         WHERE i.indrelid = (quote_ident(current_schema()) || '.' || quote_ident($1))::regclass AND i.indisprimary
         ORDER BY array_position(i.indkey, a.attnum)`,
        [table],
      )
    ).map((k) => k.name);
    const keyColumns = keys.length > 0 ? keys : ['ctid'];
    // Bytes as text with their printable ASCII as it is (`escape`), the rest as \ooo: a needle in them is found.
    const asText = (c: string) =>
      types.get(`${table}.${c}`) === 'bytea' ? `encode(${quote(c)}, 'escape')` : `${quote(c)}::text`;
    const selected = cols.map((c) => `${asText(c)} AS ${quote(c)}`).join(', ');
    const haystack = `concat_ws(chr(1), ${cols.map(asText).join(', ')})`;
    const rows = await sql.rowsPlannedForValues<Record<string, string | null>>(
      `SELECT ctid::text AS ctid, ${selected} FROM ${quote(table)} WHERE ${haystack} LIKE ANY($1::text[])`,
      [patterns],
    );
    for (const row of rows) {
      for (const column of cols) {
        const value = row[column];
        if (value === null || value === undefined) continue;
        for (const f of forms) {
          if (!f.forms.some((x) => value.includes(x))) continue;
          const finding: ErasureFinding = { table, column, row: rowKey(row, keyColumns), needle: f.needle };
          const kept = keptBecause(table, column, row);
          if (
            kept &&
            (kept.session === undefined ||
              (
                await sql.rowsPlannedForValues('SELECT 1 FROM sessions WHERE id = $1 AND erased_at IS NOT NULL', [
                  kept.session,
                ])
              ).length > 0)
          )
            finding.kept = kept.reason;
          findings.push(finding);
        }
      }
    }
  }
  return findings;
}
