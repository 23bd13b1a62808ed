/** PostgreSQL: the idempotency operations of the port (`store.idempotency`). */
import { toIdempotency, type IdempotencyRow } from '../rows.ts';
import type { PgOpsOf } from './context.ts';

export const pgIdempotencyOps: PgOpsOf<'idempotency'> = {
  getIdempotency: async ({ sql }, tenant, key) => {
    const r = await sql.one<IdempotencyRow>('SELECT * FROM idempotency_keys WHERE tenant = $1 AND key = $2', [
      tenant,
      key,
    ]);
    return r ? toIdempotency(r) : undefined;
  },

  putIdempotency: async ({ sql }, r) => {
    const row = await sql.one<IdempotencyRow>(
      `INSERT INTO idempotency_keys AS k (tenant, key, fingerprint, status, body, created_at) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (tenant, key) DO UPDATE SET status = excluded.status, body = excluded.body
       WHERE k.status = 0 AND excluded.status <> 0 AND k.fingerprint = excluded.fingerprint
       RETURNING *`,
      [r.tenant, r.key, r.fingerprint, r.status, r.body, r.createdAt],
    );
    // Another request's record stood and was kept: it is the answer.
    return toIdempotency(
      row ??
        (await sql.one<IdempotencyRow>('SELECT * FROM idempotency_keys WHERE tenant = $1 AND key = $2', [
          r.tenant,
          r.key,
        ]))!,
    );
  },

  pruneIdempotency: async ({ sql }, before) => sql.run('DELETE FROM idempotency_keys WHERE created_at < $1', [before]),
};
