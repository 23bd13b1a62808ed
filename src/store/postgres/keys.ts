/** PostgreSQL: the keys operations of the port (`store.keys`). */
import { StoreError } from '../port/index.ts';
import { toKey, type KeyRow } from '../rows.ts';
import { keyColumns } from '../tenant-rows.ts';
import { sqlState, UNIQUE_VIOLATION } from './sql.ts';
import type { PgOpsOf } from './context.ts';

export const pgKeysOps: PgOpsOf<'keys'> = {
  createApiKey: async ({ guarded }, k) => {
    const { scope, quotas } = keyColumns(k);
    try {
      await guarded((q) =>
        q.run(
          'INSERT INTO api_keys (id, tenant, name, hash, prefix, rate_per_minute, created_at, revoked_at, scope, quotas) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)',
          [k.id, k.tenant, k.name, k.hash, k.prefix, k.ratePerMinute, k.createdAt, k.revokedAt, scope, quotas],
        ),
      );
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError('conflict', `api key ${k.id} already exists`, { cause: e });
      throw e;
    }
  },

  findApiKey: async ({ sql }, hash) => {
    const row = await sql.one<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash]);
    return row ? toKey(row) : undefined;
  },

  listApiKeys: async ({ sql }, tenant) =>
    (
      await sql.rows<KeyRow>('SELECT * FROM api_keys WHERE ($1::text IS NULL OR tenant = $1) ORDER BY created_at, id', [
        tenant ?? null,
      ])
    ).map(toKey),

  revokeApiKey: async ({ sql }, id, at) =>
    (await sql.run('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2', [at, id])) === 1,
};
