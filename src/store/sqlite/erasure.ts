/**
 * SQLite: the erasure operations of the port (`store.erasure`, ADR-0041): which sessions an
 * erasure reaches, a tenant's own rows, the audit, and the scan of every table for what an erasure
 * should have left nothing of.
 */
import { closeSync, existsSync, openSync, readSync } from 'node:fs';
import type Database from 'better-sqlite3';
import type { ErasureFinding, ErasureRecord } from '../port/index.ts';
import { type FlatOpsOf } from '../port/layout.ts';
import { keptBecause, needleForms, rowKey } from '../erasure-scan.ts';
import { TERMINAL_SQL } from '../rows.ts';
import { decompressBatch } from './event-batch-codec.ts';
import { idKey } from './id-keys.ts';
import { withSecureDelete } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

type ErasureOpName = keyof FlatOpsOf<'erasure'>;

/** How each erasure operation runs (see PLAN in store.ts). */
export const ERASURE_PLAN: {
  readonly [K in ErasureOpName]: { outside: 'serial' | 'write' | 'immediate' | 'autocommit'; savepoint?: true };
} = {
  erasableSessions: { outside: 'serial' },
  eraseTenantData: { outside: 'immediate', savepoint: true },
  recordErasure: { outside: 'autocommit' },
  listErasures: { outside: 'serial' },
  scanForRemnants: { outside: 'serial' },
  // Outside any transaction: a checkpoint inside one cannot take the WAL.
  purgeErased: { outside: 'serial' },
};

type ErasureRow = { id: string; scope: string; target_hash: string; by: string; at: number; counts: string };

const toErasure = (r: ErasureRow): ErasureRecord => ({
  id: r.id,
  scope: r.scope as ErasureRecord['scope'],
  targetHash: r.target_hash,
  by: r.by,
  at: r.at,
  counts: JSON.parse(r.counts) as Record<string, number>,
});

/** A tenant's own rows, in the order they go (children first); each `DELETE … WHERE tenant = ?` unless said. */
const TENANT_ROWS: ReadonlyArray<[kind: string, sql: string]> = [
  ['scheduleFires', 'DELETE FROM schedule_fires WHERE schedule_id IN (SELECT id FROM schedules WHERE tenant = ?)'],
  ['schedules', 'DELETE FROM schedules WHERE tenant = ?'],
  [
    'webhookAttempts',
    'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE tenant = ?)',
  ],
  ['webhookDeliveries', 'DELETE FROM webhook_deliveries WHERE tenant = ?'],
  ['webhooks', 'DELETE FROM webhooks WHERE tenant = ?'],
  ['datasetItems', 'DELETE FROM dataset_items WHERE dataset_id IN (SELECT id FROM datasets WHERE tenant = ?)'],
  ['datasets', 'DELETE FROM datasets WHERE tenant = ?'],
  ['batchItems', 'DELETE FROM batch_items WHERE batch_id IN (SELECT id FROM batches WHERE tenant = ?)'],
  ['batches', 'DELETE FROM batches WHERE tenant = ?'],
  ['idempotencyRecords', 'DELETE FROM idempotency_keys WHERE tenant = ?'],
  // Quotas (ADR-0043): the ledger of the tenant and of its keys, their windows and slots; fair dispatch's pass; the registry's row.
  [
    'quotaCharges',
    "DELETE FROM quota_charges WHERE scope = 'tenant:' || ? OR scope IN (SELECT 'key:' || id FROM api_keys WHERE tenant = ?)",
  ],
  ...(['state', 'slots', 'usage', 'waiters'] as const).map((t): [string, string] => [
    'quotaLimits',
    `DELETE FROM model_limit_${t} WHERE key IN ('quota:tenant:' || ? || ':concurrent', 'quota:tenant:' || ? || ':runs')
       OR key IN (SELECT 'quota:key:' || id || ':concurrent' FROM api_keys WHERE tenant = ?)
       OR key IN (SELECT 'quota:key:' || id || ':runs' FROM api_keys WHERE tenant = ?)`,
  ]),
  ['tenantDispatch', 'DELETE FROM tenant_dispatch WHERE tenant = ?'],
  ['tenantRecord', 'DELETE FROM tenants WHERE id = ?'],
];

export function erasureOps(db: Database.Database): SyncOpsOf<'erasure'> {
  const insert = db.prepare<[string, string, string, string, number, string]>(
    'INSERT INTO erasures (id, scope, target_hash, by, at, counts) VALUES (?, ?, ?, ?, ?, ?)',
  );
  return {
    erasableSessions: (q) =>
      db
        .prepare<unknown[], { id: string }>(
          `SELECT s.id FROM sessions s
             WHERE s.erased_at IS NULL AND s.id > ? AND (? IS NULL OR s.tenant = ?)
               AND (? IS NULL OR (s.created_at < ? AND NOT EXISTS (
                 SELECT 1 FROM runs r WHERE r.session_id = s.id AND (r.status NOT IN (${TERMINAL_SQL}) OR r.ended_at >= ? OR r.created_at >= ?))))
             ORDER BY s.id LIMIT ?`,
        )
        .all(
          q.after ?? '',
          q.tenant ?? null,
          q.tenant ?? null,
          q.idleBefore ?? null,
          q.idleBefore ?? null,
          q.idleBefore ?? null,
          q.idleBefore ?? null,
          q.limit,
        )
        .map((r) => r.id),
    eraseTenantData: (tenant, at) =>
      withSecureDelete(db, () => {
        const counts: Record<string, number> = {};
        counts.keys = db
          .prepare(
            'UPDATE api_keys SET name = NULL, quotas = NULL, revoked_at = coalesce(revoked_at, ?) WHERE tenant = ?',
          )
          .run(at, tenant).changes;
        for (const [kind, sql] of TENANT_ROWS) {
          const params = Array<string>(sql.split('?').length - 1).fill(tenant);
          counts[kind] = (counts[kind] ?? 0) + db.prepare(sql).run(...params).changes;
        }
        return counts;
      }),
    recordErasure: (r) => {
      insert.run(r.id, r.scope, r.targetHash, r.by, r.at, JSON.stringify(r.counts));
    },
    listErasures: (page) =>
      db
        .prepare<[string | null, string | null, number], ErasureRow>(
          'SELECT * FROM erasures WHERE (? IS NULL OR id < ?) ORDER BY id DESC LIMIT ?',
        )
        .all(page.before ?? null, page.before ?? null, page.limit)
        .map(toErasure),
    scanForRemnants: (needles) => {
      const findings = scan(db, needles);
      // In the files' bytes: the needles no row holds (a row's explains its bytes).
      const unexplained = needles.filter((n) => !findings.some((f) => f.needle === n));
      return [...findings, ...scanFiles(db, unexplained)];
    },
    purgeErased: (options) => {
      if (db.memory) return 'an in-memory database: nothing on disk';
      if (options?.vacuum) db.exec('VACUUM');
      const [r] = db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
      const rebuilt = options?.vacuum ? 'the database file was rebuilt (VACUUM); ' : '';
      return r && r.busy === 0
        ? `${rebuilt}the WAL was checkpointed into the database file and truncated`
        : `${rebuilt}the WAL could not be truncated now (another connection reads from it): the next checkpoint will`;
    },
  };
}

/** Every table of the database (from its catalog), every value that can hold text, searched for every needle. */
function scan(db: Database.Database, needles: readonly string[]): ErasureFinding[] {
  const findings: ErasureFinding[] = [];
  if (needles.length === 0) return findings;
  const forms = needles.map((n) => ({ needle: n, forms: needleForms(n) }));
  // An id as the log's index tables keep it (ADR-0009): a UUID as its 16 bytes.
  const binary = needles.flatMap((n) => {
    const k = idKey(n);
    return typeof k === 'string' ? [] : [{ needle: n, bytes: k }];
  });
  const erased = db.prepare<[string], { e: number }>(
    'SELECT 1 AS e FROM sessions WHERE id = ? AND erased_at IS NOT NULL',
  );
  const tables = db
    .prepare<[], { name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )
    .all();
  for (const { name: table } of tables) {
    const columns = db.pragma(`table_info(${quote(table)})`) as Array<{ name: string; pk: number }>;
    const keys = columns
      .filter((c) => c.pk > 0)
      .sort((a, b) => a.pk - b.pk)
      .map((c) => c.name);
    const withoutRowid = columns.length > 0 && isWithoutRowid(db, table);
    const keyColumns = keys.length > 0 ? keys : ['rowid'];
    const select =
      keys.length > 0 || withoutRowid ? `SELECT * FROM ${quote(table)}` : `SELECT rowid, * FROM ${quote(table)}`;
    for (const row of db.prepare<[], Record<string, unknown>>(select).iterate()) {
      for (const { name: column } of columns) {
        const value = row[column];
        if (value === null || value === undefined || typeof value === 'number' || typeof value === 'bigint') continue;
        const found = new Set<string>();
        if (Buffer.isBuffer(value)) {
          const text =
            table === 'event_batches' && column === 'data'
              ? decompressBatch(row.codec as number, value)
              : value.toString('utf8');
          for (const f of forms) if (f.forms.some((x) => text.includes(x))) found.add(f.needle);
          for (const b of binary) if (value.includes(b.bytes)) found.add(b.needle);
        } else {
          const text =
            table === 'event_batches' && column === 'data'
              ? decompressBatch(row.codec as number, String(value))
              : String(value);
          for (const f of forms) if (f.forms.some((x) => text.includes(x))) found.add(f.needle);
        }
        for (const needle of found) {
          const finding: ErasureFinding = { table, column, row: rowKey(row, keyColumns), needle };
          const kept = keptBecause(table, column, row);
          if (kept && (kept.session === undefined || erased.get(kept.session))) finding.kept = kept.reason;
          findings.push(finding);
        }
      }
    }
  }
  return findings;
}

/** How much of a file is read at once by `scanFiles`. */
const CHUNK = 1 << 20;

/**
 * The database file and its WAL, byte by byte, for the needles (as UTF-8, JSON-escaped, and an id's
 * 16 bytes): what deleted rows left in freed space. An in-memory database has no file.
 */
function scanFiles(db: Database.Database, needles: readonly string[]): ErasureFinding[] {
  if (db.memory || needles.length === 0) return [];
  const patterns = needles.flatMap((needle) => {
    const k = idKey(needle);
    return [
      ...needleForms(needle).map((f) => ({ needle, bytes: Buffer.from(f, 'utf8') })),
      ...(typeof k === 'string' ? [] : [{ needle, bytes: k }]),
    ];
  });
  const overlap = Math.max(...patterns.map((p) => p.bytes.length)) - 1;
  const findings: ErasureFinding[] = [];
  for (const [table, path] of [
    ['(database file)', db.name],
    ['(WAL file)', `${db.name}-wal`],
  ] as const) {
    if (!existsSync(path)) continue;
    const fd = openSync(path, 'r');
    try {
      const found = new Map<string, number>();
      const buffer = Buffer.alloc(CHUNK + overlap);
      let kept = 0;
      for (let position = 0; ;) {
        const n = readSync(fd, buffer, kept, CHUNK, position);
        if (n === 0) break;
        const view = buffer.subarray(0, kept + n);
        for (const p of patterns) {
          if (found.has(p.needle)) continue;
          const at = view.indexOf(p.bytes);
          if (at >= 0) found.set(p.needle, position - kept + at);
        }
        kept = Math.min(overlap, view.length);
        view.copy(buffer, 0, view.length - kept);
        position += n;
      }
      for (const [needle, offset] of found) findings.push({ table, column: 'bytes', row: `offset=${offset}`, needle });
    } finally {
      closeSync(fd);
    }
  }
  return findings;
}

function isWithoutRowid(db: Database.Database, table: string): boolean {
  const sql = db.prepare<[string], { sql: string }>('SELECT sql FROM sqlite_master WHERE name = ?').get(table)?.sql;
  return /WITHOUT\s+ROWID\s*;?\s*$/i.test(sql ?? '');
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;
