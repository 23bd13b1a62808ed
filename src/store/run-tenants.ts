/**
 * The tenant of a run, on its row: the tenant of its session (which never changes), written when
 * the run is created and filled in for older runs by the migration that added it (SQLite schema
 * v20, PostgreSQL v11). With it a tenant's runs are read from an index of that tenant's rows: the
 * inbox of a tenant does not read past another tenant's waiting runs, however many there are.
 */
import { WAITING_FOR_PEOPLE } from './port/index.ts';

/** `status IN ('waiting_approval', 'waiting_for_user')`, written as both stores write it in a query (SQLite uses a partial index only for a term that is the same). */
export const WAITING_FOR_PEOPLE_SQL = `status IN (${WAITING_FOR_PEOPLE.map((s) => `'${s}'`).join(', ')})`;

/**
 * The migration, the same in both dialects: the column (null only for a run whose session does not
 * exist, which the foreign key refuses), the existing runs' tenants, and an index of the runs
 * waiting for a person by tenant (kept only as runs enter or leave those statuses).
 */
export const RUN_TENANTS_MIGRATION_SQL = `
  ALTER TABLE runs ADD COLUMN tenant TEXT;
  UPDATE runs SET tenant = (SELECT s.tenant FROM sessions s WHERE s.id = runs.session_id);
  CREATE INDEX runs_tenant_waiting ON runs (tenant, id) WHERE ${WAITING_FOR_PEOPLE_SQL};
`;
