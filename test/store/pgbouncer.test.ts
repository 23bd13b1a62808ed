/**
 * The PostgreSQL store behind PgBouncer in transaction pooling mode (ADR-0046), PgBouncer started
 * here (test/support/pgbouncer.ts): every store contract through it; no session state left on the
 * server connections it shares between clients; a transaction's lock timeout; the schema's
 * search_path checked at open; migrations by several processes at once, once, and a newer schema
 * refused by name; and a cluster of API and worker processes with their live feeds (LISTEN straight
 * to the server) end to end. Skipped, saying so, on a machine without the pgbouncer binary (.ci/run
 * installs Debian's package).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/index.ts';
import {
  latestPostgresSchemaVersion,
  PostgresStore,
  type PostgresStoreOptions,
} from '../../src/store/postgres/index.ts';
import { migrations } from '../../src/store/postgres/migrations.ts';
import { runCluster } from '../cluster/cluster.ts';
import { keel } from '../cli/io.ts';
import { pgbouncerBinary, startPgbouncer, type Bouncer } from '../support/pgbouncer.ts';
import { dropSchema, freshSchema, postgresUrl } from '../support/postgres.ts';
import { storeContract } from './contract.ts';
import { runsContract } from './runs-contract.ts';
import { waitsContract } from './waits-contract.ts';
import { limitsContract } from './limits-contract.ts';
import { quotasContract } from './quotas-contract.ts';
import { schedulesContract } from './schedules-contract.ts';
import { webhooksContract } from './webhooks-contract.ts';
import { tenantsContract } from './tenants-contract.ts';
import { batchesContract, datasetsContract } from './batches-contract.ts';

const binary = pgbouncerBinary();
if (!binary)
  console.warn(
    'test/store/pgbouncer.test.ts SKIPPED: no pgbouncer binary on this machine (apt-get install -y pgbouncer; .ci/run installs it)',
  );

const OPEN_STORE = fileURLToPath(new URL('./fixtures/open-store.ts', import.meta.url));
const T0 = 1_700_000_000_000;

/** The schemas of the pooler's aliases: each alias's connect_query makes its schema the connections' search_path. */
const CONTRACT = freshSchema();
const SHARED = freshSchema();
const MIGRATED = freshSchema();
const CLUSTER = freshSchema();

let bouncer: Bouncer;

/** A store through the pooler's `alias`, as a deployment behind PgBouncer configures it. */
const throughBouncer = (
  alias: string,
  schema: string,
  o: Partial<PostgresStoreOptions> = {},
): PostgresStoreOptions => ({
  url: bouncer.url(alias),
  listenUrl: postgresUrl(),
  pooler: 'transaction',
  schema,
  poolSize: 4,
  ...o,
});

/** Stores on the contract alias's schema (one at a time: a test's cleanup drops the schema). */
async function openContractStore() {
  const stores: PostgresStore[] = [];
  const open = async () => {
    const s = new PostgresStore(throughBouncer('contract', CONTRACT));
    stores.push(s);
    await s.opened();
    return s;
  };
  const store = await open();
  return {
    store,
    another: open,
    cleanup: async () => {
      for (const s of stores) await s.close();
      await dropSchema(postgresUrl(), CONTRACT);
    },
  };
}

async function direct<T>(fn: (c: pg.Client) => Promise<T>, url = postgresUrl()): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => {});
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Runs the fixture that opens a store in a process of its own: what it printed and how it exited. */
function openInProcess(options: PostgresStoreOptions): Promise<{ out: string; code: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [OPEN_STORE, JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ out: out.trim(), code }));
  });
}

describe.skipIf(!binary)('PostgreSQL behind PgBouncer (pool_mode=transaction)', () => {
  beforeAll(async () => {
    const searchPath = (schema: string) => ({ connectQuery: `SET search_path TO "${schema}"` });
    bouncer = await startPgbouncer(postgresUrl(), {
      contract: { ...searchPath(CONTRACT), poolSize: 6 },
      // One server connection for every client of this alias: whatever a client left on it, the next one would see.
      shared: { ...searchPath(SHARED), poolSize: 1 },
      migrated: { ...searchPath(MIGRATED), poolSize: 4 },
      cluster: { ...searchPath(CLUSTER), poolSize: 12 },
      // No search_path of its own: what a deployment that forgot it gets.
      plain: { poolSize: 2 },
    });
  });

  afterAll(async () => {
    await bouncer?.stop();
    for (const s of [CONTRACT, SHARED, MIGRATED, CLUSTER]) await dropSchema(postgresUrl(), s);
  });

  storeContract('postgres through pgbouncer', openContractStore);
  runsContract('postgres through pgbouncer (two nodes)', openContractStore);
  waitsContract('postgres through pgbouncer (two nodes)', openContractStore);
  limitsContract('postgres through pgbouncer (two nodes)', openContractStore);
  quotasContract('postgres through pgbouncer (two nodes)', openContractStore);
  schedulesContract('postgres through pgbouncer (two nodes)', openContractStore);
  webhooksContract('postgres through pgbouncer (two nodes)', openContractStore);
  tenantsContract('postgres through pgbouncer (two nodes)', openContractStore);
  datasetsContract('postgres through pgbouncer (two nodes)', openContractStore);
  batchesContract('postgres through pgbouncer (two nodes)', openContractStore);

  describe('no session state between pooled transactions', () => {
    it("the store's transactions leave no timeout, search_path or prepared statement on the server connection the next client gets", async () => {
      const store = new PostgresStore(
        throughBouncer('shared', SHARED, { statementTimeoutMs: 12_345, lockTimeoutMs: 2_345 }),
      );
      try {
        await store.opened();
        await store.sessions.create({ id: 's', createdAt: T0 });
        await store.events.append('s', [{ id: 'e1', type: 'test/note', v: 1, time: T0, entry: false, data: {} }]);
        await store.transaction(async (tx) => {
          await tx.events.append('s', [{ id: 'e2', type: 'test/note', v: 1, time: T0, entry: false, data: {} }]);
          await tx.sessions.get('s');
        });
        expect((await store.events.read('s')).map((e) => e.id)).toEqual(['e1', 'e2']);
        const seen = () =>
          direct(async (c) => {
            const { rows } = await c.query<{
              st: string;
              lt: string;
              it: string;
              sp: string;
              prepared: string;
              pid: number;
            }>(
              `SELECT current_setting('statement_timeout') AS st, current_setting('lock_timeout') AS lt,
                      current_setting('idle_in_transaction_session_timeout') AS it, current_setting('search_path') AS sp,
                      (SELECT count(*) FROM pg_prepared_statements) AS prepared, pg_backend_pid() AS pid`,
            );
            return rows[0]!;
          }, bouncer.url('shared'));
        const after = await seen();
        // The server connection the store used (the alias has one) has the server's defaults, not the store's.
        expect({ ...after, sp: after.sp.replace(/"/g, '') }).toMatchObject({
          st: '0',
          lt: '0',
          it: '0',
          sp: SHARED,
          prepared: '0',
        });
        // A client's SET LOCAL ends with its transaction: the next client on the same server connection sees none of it.
        await direct(async (c) => {
          await c.query('BEGIN');
          await c.query("SET LOCAL statement_timeout = 4321; SELECT set_config('search_path', 'public', true)");
          const inside = await c.query<{ st: string; sp: string; pid: number }>(
            `SELECT current_setting('statement_timeout') AS st, current_setting('search_path') AS sp, pg_backend_pid() AS pid`,
          );
          expect(inside.rows[0]).toEqual({ st: '4321ms', sp: 'public', pid: after.pid });
          await c.query('COMMIT');
        }, bouncer.url('shared'));
        expect(await seen()).toEqual(after);
      } finally {
        await store.close();
      }
    });

    it("a transaction through the pooler waits for a lock no longer than the store's lock timeout, and fails as StoreError busy", async () => {
      const store = new PostgresStore(throughBouncer('shared', SHARED, { lockTimeoutMs: 300 }));
      try {
        await store.opened();
        await store.sessions.create({ id: 'locked', createdAt: T0 });
        await direct(async (c) => {
          await c.query('BEGIN');
          await c.query(`SELECT * FROM "${SHARED}".sessions WHERE id = 'locked' FOR UPDATE`);
          const t0 = Date.now();
          const failure = await store
            .transaction((tx) =>
              tx.events.append('locked', [{ id: 'x', type: 'test/note', v: 1, time: T0, entry: false, data: {} }]),
            )
            .catch((e: unknown) => e);
          expect(failure).toBeInstanceOf(StoreError);
          expect((failure as StoreError).code).toBe('busy');
          expect((failure as StoreError).message).toMatch(/lock timeout/);
          expect(Date.now() - t0).toBeLessThan(5_000);
          await c.query('ROLLBACK');
        });
        // Nothing of it was kept, and the store goes on.
        await store.events.append('locked', [{ id: 'y', type: 'test/note', v: 1, time: T0, entry: false, data: {} }]);
        expect((await store.events.read('locked')).map((e) => e.id)).toEqual(['y']);
      } finally {
        await store.close();
        await dropSchema(postgresUrl(), SHARED);
      }
    });
  });

  describe('opening through the pooler', () => {
    it('refuses a pooler whose connections do not have the schema first on their search_path, saying how to set it', async () => {
      const failure = await new PostgresStore(throughBouncer('plain', freshSchema())).opened().catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(StoreError);
      expect((failure as StoreError).code).toBe('invalid_search_path');
      expect((failure as StoreError).message).toMatch(/ALTER ROLE \S+ SET search_path = keel_t_/);
    });

    it('refuses pooler "transaction" without a listenUrl (LISTEN does not pass the pooler)', async () => {
      expect(() => new PostgresStore({ url: bouncer.url('plain'), pooler: 'transaction' })).toThrow(/listenUrl/);
      const cli = await keel(['sessions', 'ls', '--db', bouncer.url('plain')], {
        env: { KEEL_DB_POOLER: 'transaction' },
      });
      expect(cli.code).not.toBe(0);
      expect(cli.err).toMatch(/KEEL_DB_POOLER=transaction needs \$KEEL_DB_LISTEN_URL/);
    });

    it('the command line through the pooler: KEEL_DB_POOLER=transaction and KEEL_DB_LISTEN_URL', async () => {
      const { store, cleanup } = await openContractStore();
      try {
        await store.sessions.create({ id: 'from-the-store', createdAt: T0 });
        const env = { KEEL_DB_SCHEMA: CONTRACT, KEEL_DB_POOLER: 'transaction', KEEL_DB_LISTEN_URL: postgresUrl() };
        const cli = await keel(['sessions', 'ls', '--json', '--db', bouncer.url('contract')], { env });
        expect(cli.err).toBe('');
        expect(cli.code).toBe(0);
        expect(cli.out).toContain('from-the-store');
      } finally {
        await cleanup();
      }
    });

    it('several processes opening a new schema through the pooler at once migrate it once; an older Keel refuses a newer schema, naming both versions', async () => {
      await dropSchema(postgresUrl(), MIGRATED);
      const options = throughBouncer('migrated', MIGRATED);
      const results = await Promise.all(Array.from({ length: 4 }, () => openInProcess(options)));
      expect(results).toEqual(Array.from({ length: 4 }, () => ({ out: 'opened', code: 0 })));
      const versions = await direct(async (c) => {
        const { rows } = await c.query<{ version: number }>(
          `SELECT version FROM "${MIGRATED}".keel_schema ORDER BY version`,
        );
        return rows.map((r) => r.version);
      });
      // Each migration once: one row each (the version is the key), every one of them.
      expect(versions).toEqual(migrations.map((m) => m.version));
      // As if a newer Keel had migrated the schema since.
      const newer = latestPostgresSchemaVersion + 1;
      await direct((c) =>
        c.query(`INSERT INTO "${MIGRATED}".keel_schema (version, applied_at) VALUES ($1, 0)`, [newer]),
      );
      const refused = await openInProcess(options);
      expect(refused.code).toBe(1);
      const { code, message } = JSON.parse(refused.out) as { code: string; message: string };
      expect(code).toBe('schema_version');
      expect(message).toContain(`schema version ${newer}`);
      expect(message).toContain(`knows up to ${latestPostgresSchemaVersion}`);
      expect(message).toMatch(/upgrade Keel/);
    });
  });

  it('API and worker processes through the pooler, live feeds by LISTEN straight to the server: every run completes, every SSE client gets every event once, in order', async () => {
    const report = await runCluster({
      url: bouncer.url('cluster'),
      schema: CLUSTER,
      apis: 2,
      workers: 1,
      runs: 12,
      parallel: 6,
      store: { pooler: 'transaction', listenUrl: postgresUrl(), poolSize: 4 },
    });
    expect(report.violations).toEqual([]);
    expect(report.completed).toBe(report.runs);
    // Token deltas streamed on the worker reached the clients through the API processes (broadcast by NOTIFY through the pooler).
    expect(report.deltas).toBeGreaterThan(report.runs);
  }, 180_000);
});
