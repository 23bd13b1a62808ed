/**
 * PostgreSQL stores for tests: each in a schema of its own (a fresh, empty Keel), dropped at
 * cleanup. The server is the one the test run found (test/global-setup.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { PostgresStore, type PostgresStoreOptions } from '../../src/store/postgres/index.ts';

export const postgresUrl = (): string => inject('keelPostgresUrl');

export const freshSchema = (): string => `keel_t_${randomBytes(6).toString('hex')}`;

export async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** A store on a new schema; `another()` opens one more on the same schema (another node). */
export async function openTestPostgres(options: Partial<PostgresStoreOptions> = {}): Promise<{
  store: PostgresStore;
  url: string;
  schema: string;
  another(): Promise<PostgresStore>;
  cleanup(): Promise<void>;
}> {
  const url = postgresUrl();
  const schema = options.schema ?? freshSchema();
  const stores: PostgresStore[] = [];
  const open = async () => {
    const s = new PostgresStore({ poolSize: 4, ...options, url, schema });
    stores.push(s);
    await s.opened();
    return s;
  };
  const store = await open();
  return {
    store,
    url,
    schema,
    another: open,
    cleanup: async () => {
      for (const s of stores) await s.close();
      await dropSchema(url, schema);
    },
  };
}
