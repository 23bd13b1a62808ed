/** SQLite: the keys operations of the port (`store.keys`), synchronous, on the connection's shared state. */
import { toKey } from '../rows.ts';
import { keyColumns } from '../tenant-rows.ts';
import { guard } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function keyOps(c: Shared): SyncOpsOf<'keys'> {
  const { st } = c;
  return {
    createApiKey: (k) => {
      guard(`api key ${k.id} already exists`, () =>
        st.insertKey.run({
          id: k.id,
          tenant: k.tenant,
          name: k.name,
          hash: k.hash,
          prefix: k.prefix,
          rate_per_minute: k.ratePerMinute,
          created_at: k.createdAt,
          revoked_at: k.revokedAt,
          ...keyColumns(k),
        }),
      );
    },
    findApiKey: (hash) => {
      const row = st.findKey.get(hash);
      return row ? toKey(row) : undefined;
    },
    listApiKeys: (tenant) => st.listKeys.all(tenant ?? null, tenant ?? null).map(toKey),
    revokeApiKey: (id, at) => st.revokeKey.run(at, id).changes === 1,
  };
}
