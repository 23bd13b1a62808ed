/** SQLite: the idempotency operations of the port (`store.idempotency`), synchronous, on the connection's shared state. */
import { toIdempotency } from '../rows.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function idempotencyOps(c: Shared): SyncOpsOf<'idempotency'> {
  const { st } = c;
  return {
    getIdempotency: (tenant, key) => {
      const r = st.getIdem.get(tenant, key);
      return r ? toIdempotency(r) : undefined;
    },
    putIdempotency: (r) => {
      st.putIdem.run(r.tenant, r.key, r.fingerprint, r.status, r.body, r.createdAt);
      return c.self.getIdempotency(r.tenant, r.key)!;
    },
    pruneIdempotency: (before) => st.pruneIdem.run(before).changes,
  };
}
