/** SQLite schema version 26 (the tenants registry, API key scopes and quotas, fair dispatch): see its comments. */
import { readyByTenantIndexSql } from '../../fair-dispatch.ts';
import type { SqliteMigration } from './migration.ts';

/** A key's scope: 'tenant' (the keys there were) acts for its tenant, 'admin' manages tenants; and its own quotas (JSON). Added where missing. */
const KEY_COLUMNS: ReadonlyArray<[string, string]> = [
  ['scope', "TEXT NOT NULL DEFAULT 'tenant'"],
  ['quotas', 'TEXT'],
];

export const migration: SqliteMigration = {
  version: 26,
  sql: `
      -- What an operator sets for a tenant (store/tenant-rows.ts): a tenant without a row has weight 1 and the defaults.
      CREATE TABLE IF NOT EXISTS tenants (
        id TEXT PRIMARY KEY,
        name TEXT,
        weight INTEGER NOT NULL DEFAULT 1,
        quotas TEXT NOT NULL DEFAULT '{}',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      );

      -- Fair dispatch (store/fair-dispatch.ts, ADR-0042): each tenant's weighted service and the start of its last claim.
      CREATE TABLE IF NOT EXISTS tenant_dispatch (tenant TEXT PRIMARY KEY, pass REAL NOT NULL, start REAL NOT NULL);
      CREATE INDEX IF NOT EXISTS tenant_dispatch_start ON tenant_dispatch (start);

      -- Every run has a tenant (a run without one is the default tenant's), and the ready runs are indexed by it.
      UPDATE runs SET tenant = 'default' WHERE tenant IS NULL;
      ${readyByTenantIndexSql('sqlite')};
    `,
  // Before `sql`: the ready runs' index there reads nothing of the keys, but the columns go first
  // so that a database rewound to an older version number (its columns kept) migrates too.
  run: (db) => {
    const has = (column: string) =>
      (db.pragma('table_info(api_keys)') as Array<{ name: string }>).some((c) => c.name === column);
    for (const [column, type] of KEY_COLUMNS)
      if (!has(column)) db.exec(`ALTER TABLE api_keys ADD COLUMN ${column} ${type}`);
  },
};
