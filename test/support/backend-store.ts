import { SqliteStore, type Store } from '../../src/index.ts';
import { openTestPostgres } from './postgres.ts';

/** A fresh store of the backend (SQLite in memory, or PostgreSQL in a schema of its own), and how to remove it. */
export async function openBackendStore(
  backend: 'sqlite' | 'postgres',
): Promise<{ store: Store; close(): Promise<void> }> {
  if (backend === 'sqlite') {
    const store = new SqliteStore({ path: ':memory:' });
    return { store, close: () => store.close() };
  }
  const pg = await openTestPostgres();
  return { store: pg.store, close: pg.cleanup };
}
