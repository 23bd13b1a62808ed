/** SQLite schema version 26 (the tenants registry, API key scopes and quotas, fair dispatch): see its comments. */
import { readyByTenantIndexSql } from '../../fair-dispatch.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 26,
  sql: `
      -- What an operator sets for a tenant (store/tenant-rows.ts): a tenant without a row has weight 1 and the defaults.
      CREATE TABLE tenants (
        id TEXT PRIMARY KEY,
        name TEXT,
        weight INTEGER NOT NULL DEFAULT 1,
        quotas TEXT NOT NULL DEFAULT '{}',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      );

      -- Fair dispatch (store/fair-dispatch.ts, ADR-0042): each tenant's weighted service and the start of its last claim.
      CREATE TABLE tenant_dispatch (tenant TEXT PRIMARY KEY, pass REAL NOT NULL, start REAL NOT NULL);
      CREATE INDEX tenant_dispatch_start ON tenant_dispatch (start);

      -- A key's scope: 'tenant' (the keys there were) acts for its tenant, 'admin' manages tenants only; and its own quotas (JSON).
      ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'tenant';
      ALTER TABLE api_keys ADD COLUMN quotas TEXT;

      -- Every run has a tenant (a run without one is the default tenant's), and the ready runs are indexed by it.
      UPDATE runs SET tenant = 'default' WHERE tenant IS NULL;
      ${readyByTenantIndexSql('sqlite')};
    `,
};
