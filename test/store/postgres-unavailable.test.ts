/**
 * A PostgreSQL server that cannot be reached is the port's `unavailable` (ADR-0045), which the API
 * answers as 503 `store_unavailable` with Retry-After. (test/restart/database-restart.test.ts stops
 * a real server under load; this is the quick check of the mapping.)
 */
import { describe, expect, it } from 'vitest';
import { toProblem } from '../../src/server/problems.ts';
import { toA2aError } from '../../src/server/protocols/a2a/a2a-errors.ts';
import type { Logger } from '../../src/monitoring/index.ts';
import { PostgresStore } from '../../src/store/postgres/index.ts';
import { isStoreUnavailable, StoreUnavailableError } from '../../src/store/index.ts';
import { freePort as closedPort } from '../support/postgres-server.ts';

describe('postgres: a database that cannot be reached', () => {
  it('fails every operation and transaction with StoreUnavailableError, which the API answers 503 store_unavailable with Retry-After', async () => {
    const store = new PostgresStore({ url: `postgres://postgres@127.0.0.1:${await closedPort()}/test` });
    try {
      const op = await store.sessions.list({ limit: 1 }).catch((e: unknown) => e);
      expect(op).toBeInstanceOf(StoreUnavailableError);
      expect((op as StoreUnavailableError).code).toBe('unavailable');
      expect((op as Error).message).toMatch(/ECONNREFUSED/);
      const tx = await store.transaction((t) => t.sessions.list({ limit: 1 })).catch((e: unknown) => e);
      expect(isStoreUnavailable(tx)).toBe(true);
      expect(toProblem(op)).toMatchObject({ type: 'store_unavailable', extensions: { retry_after: 2 } });
      // A2A's clients are told it as it is, not as an internal error (and it is not logged as one).
      const logged: unknown[] = [];
      const logger = { isLevelEnabled: () => true, error: (...a: unknown[]) => logged.push(a) } as unknown as Logger;
      const a2a = toA2aError(op, logger);
      expect(a2a.message).toMatch(/database/);
      expect(logged).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
