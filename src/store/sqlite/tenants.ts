/** SQLite: the tenants registry of the port (`store.tenants`), synchronous, on the connection's shared state. */
import { checkTenantUpdate, toTenant, type TenantRow } from '../tenant-rows.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function tenantOps(c: Shared): SyncOpsOf<'tenants'> {
  const { prepared } = c;
  const get = (id: string) => prepared('SELECT * FROM tenants WHERE id = ?').get(id) as TenantRow | undefined;
  return {
    putTenant: (update, now) => {
      const t = checkTenantUpdate(update);
      // An absent field keeps the row's value (or the column's default for a new tenant).
      const row = prepared(
        `INSERT INTO tenants (id, name, weight, quotas, created_at, updated_at)
         VALUES (@id, @name, COALESCE(@weight, 1), COALESCE(@quotas, '{}'), @now, @now)
         ON CONFLICT (id) DO UPDATE SET
           name = CASE WHEN @keepName THEN tenants.name ELSE excluded.name END,
           weight = COALESCE(@weight, tenants.weight),
           quotas = COALESCE(@quotas, tenants.quotas),
           updated_at = @now
         RETURNING *`,
      ).get({
        id: t.id,
        name: t.name ?? null,
        keepName: t.name === undefined ? 1 : 0,
        weight: t.weight ?? null,
        quotas: t.quotas ? JSON.stringify(t.quotas) : null,
        now,
      }) as TenantRow;
      return toTenant(row);
    },
    getTenant: (id) => {
      const row = get(id);
      return row ? toTenant(row) : undefined;
    },
    listTenants: () => (prepared('SELECT * FROM tenants ORDER BY id').all() as TenantRow[]).map(toTenant),
    deleteTenant: (id) => prepared('DELETE FROM tenants WHERE id = ?').run(id).changes === 1,
  };
}
