/** PostgreSQL: the tenants registry of the port (`store.tenants`). */
import { checkTenantUpdate, toTenant, type TenantRow } from '../tenant-rows.ts';
import type { PgOpsOf } from './context.ts';

export const pgTenantsOps: PgOpsOf<'tenants'> = {
  putTenant: async ({ sql }, update, now) => {
    const t = checkTenantUpdate(update);
    // An absent field keeps the row's value (or the column's default for a new tenant).
    const row = await sql.one<TenantRow>(
      `INSERT INTO tenants (id, name, weight, quotas, created_at, updated_at)
       VALUES ($1, $2, COALESCE($3::integer, 1), COALESCE($4::text, '{}'), $5, $5)
       ON CONFLICT (id) DO UPDATE SET
         name = CASE WHEN $6::boolean THEN tenants.name ELSE excluded.name END,
         weight = COALESCE($3::integer, tenants.weight),
         quotas = COALESCE($4::text, tenants.quotas),
         updated_at = $5
       RETURNING *`,
      [t.id, t.name ?? null, t.weight ?? null, t.quotas ? JSON.stringify(t.quotas) : null, now, t.name === undefined],
    );
    return toTenant(row!);
  },

  getTenant: async ({ sql }, id) => {
    const row = await sql.one<TenantRow>('SELECT * FROM tenants WHERE id = $1', [id]);
    return row ? toTenant(row) : undefined;
  },

  listTenants: async ({ sql }) => (await sql.rows<TenantRow>('SELECT * FROM tenants ORDER BY id')).map(toTenant),

  deleteTenant: async ({ sql }, id) => (await sql.run('DELETE FROM tenants WHERE id = $1', [id])) === 1,
};
