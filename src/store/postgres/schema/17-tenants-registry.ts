/** PostgreSQL schema version 17 (the tenants registry, API key scopes and quotas, fair dispatch): see its comments. */
import { readyByTenantIndexSql } from '../../fair-dispatch.ts';
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  version: 17,
  sql: `
      -- What an operator sets for a tenant (store/tenant-rows.ts): a tenant without a row has weight 1 and the defaults.
      CREATE TABLE IF NOT EXISTS tenants (
        id text PRIMARY KEY,
        name text,
        weight integer NOT NULL DEFAULT 1,
        quotas text NOT NULL DEFAULT '{}',
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
      );

      -- Fair dispatch (store/fair-dispatch.ts, ADR-0042): each tenant's weighted service and the start of its last claim.
      CREATE TABLE IF NOT EXISTS tenant_dispatch (tenant text PRIMARY KEY, pass double precision NOT NULL, start double precision NOT NULL);
      CREATE INDEX IF NOT EXISTS tenant_dispatch_start ON tenant_dispatch (start);

      -- A key's scope: 'tenant' (the keys there were) acts for its tenant, 'admin' manages tenants only; and its own quotas (JSON).
      ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS scope text NOT NULL DEFAULT 'tenant';
      ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS quotas text;

      -- Every run has a tenant (a run without one is the default tenant's), and the ready runs are indexed by it.
      UPDATE runs SET tenant = 'default' WHERE tenant IS NULL;
      ${readyByTenantIndexSql('postgres')};
    `,
};
