import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { SchemaVersionError } from '../../src/store/index.ts';
import { latestPostgresSchemaVersion, openPostgresStore, PostgresStore } from '../../src/store/postgres/index.ts';
import { migrations } from '../../src/store/postgres/migrations.ts';
import { dropSchema, freshSchema, openTestPostgres, postgresUrl } from '../support/postgres.ts';
import { storeContract } from './contract.ts';
import { runsContract } from './runs-contract.ts';
import { tenantsContract } from './tenants-contract.ts';
import { webhooksContract } from './webhooks-contract.ts';
import { schedulesContract } from './schedules-contract.ts';
import { waitsContract } from './waits-contract.ts';
import { limitsContract } from './limits-contract.ts';
import { batchesContract, datasetsContract } from './batches-contract.ts';
import { quotasContract } from './quotas-contract.ts';

limitsContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

quotasContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

waitsContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

schedulesContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

webhooksContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

datasetsContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

batchesContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

storeContract('postgres', async () => {
  const { store, cleanup } = await openTestPostgres();
  return { store, cleanup };
});

runsContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});

describe('postgres schema migrations', () => {
  it('several nodes opening one new schema at once migrate it once; reopening changes nothing; a schema from a newer Keel is refused', async () => {
    const url = postgresUrl();
    const schema = freshSchema();
    const stores = Array.from({ length: 4 }, () => new PostgresStore({ url, schema, poolSize: 2 }));
    try {
      await Promise.all(stores.map((s) => s.opened()));
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        const { rows } = await c.query<{ version: number }>(
          `SELECT version FROM "${schema}".keel_schema ORDER BY version`,
        );
        // Each migration once, in order (the versions of the list: a version taken on another branch may be missing until it merges).
        expect(rows.map((r) => r.version)).toEqual(migrations.map((m) => m.version));
        expect(rows.at(-1)!.version).toBe(latestPostgresSchemaVersion);
        await stores[0]!.sessions.create({ id: 's', createdAt: 1 });
        const again = await openPostgresStore({ url, schema });
        expect((await again.sessions.get('s'))?.id).toBe('s');
        await again.close();
        await c.query(`INSERT INTO "${schema}".keel_schema (version, applied_at) VALUES ($1, 0)`, [
          latestPostgresSchemaVersion + 1,
        ]);
        await expect(openPostgresStore({ url, schema })).rejects.toBeInstanceOf(SchemaVersionError);
      } finally {
        await c.end();
      }
    } finally {
      for (const s of stores) await s.close();
      await dropSchema(url, schema);
    }
  });

  it('opens a schema from before v10: ended deliveries get their end time, pending ones of a disabled subscription end failed', async () => {
    const T0 = 1_700_000_000_000;
    const { store: a, url, schema, another, cleanup } = await openTestPostgres();
    try {
      const hook = (id: string) => ({
        id,
        tenant: 't',
        url: 'https://example.test/',
        events: ['run.completed' as const],
        secret: 's',
        previousSecret: null,
        previousSecretExpiresAt: null,
        active: true,
        createdAt: T0,
        updatedAt: T0 + 5,
      });
      await a.webhooks.create(hook('on'));
      await a.webhooks.create(hook('off'));
      const d = (id: string, webhookId: string) => ({
        id,
        webhookId,
        tenant: 't',
        eventType: 'run.completed' as const,
        eventId: id,
        sessionId: null,
        body: '{}',
        createdAt: T0,
        nextAttemptAt: T0,
        retryUntil: T0 + 1000,
      });
      await a.webhooks.addDeliveries([d('ok', 'on'), d('bad', 'on'), d('waiting', 'off')]);
      for (const c of await a.webhooks.claimDeliveries(T0, 1000, 3)) {
        if (c.id === 'waiting') continue;
        const failed = c.id === 'bad';
        const attempt = {
          deliveryId: c.id,
          n: 1,
          startedAt: T0 + 10,
          durationMs: 7,
          statusCode: failed ? 500 : 200,
          error: failed ? 'HTTP 500' : null,
        };
        await a.webhooks.recordAttempt({
          deliveryId: c.id,
          claim: c.claim,
          attempt,
          status: failed ? 'failed' : 'delivered',
          nextAttemptAt: null,
        });
      }
      // As schema 8/9 left it: no end times, and a disabled subscription's delivery left pending.
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`SET search_path TO "${schema}";
          UPDATE webhooks SET active = false WHERE id = 'off';
          UPDATE webhook_deliveries SET status = 'pending', leased_until = NULL, next_attempt_at = ${T0} WHERE id = 'waiting';
          ALTER TABLE webhook_deliveries DROP COLUMN ended_at; ALTER TABLE webhook_deliveries DROP COLUMN session_id;
          ALTER TABLE webhooks DROP COLUMN previous_secret; ALTER TABLE webhooks DROP COLUMN previous_secret_expires_at;
          DROP TABLE tenants, tenant_dispatch; ALTER TABLE api_keys DROP COLUMN scope, DROP COLUMN quotas;
          DROP INDEX runs_tenant_waiting; ALTER TABLE runs DROP COLUMN tenant;
          DROP INDEX runs_rerun_of; ALTER TABLE runs DROP COLUMN rerun_of;
          DROP TABLE dataset_items, datasets, batch_items, batches, quota_charges; DELETE FROM keel_schema WHERE version >= 10;`);
      } finally {
        await c.end();
      }
      const b = await another();
      expect(await b.webhooks.getDelivery('ok')).toMatchObject({
        status: 'delivered',
        endedAt: T0 + 17,
        sessionId: null,
      });
      expect(await b.webhooks.getDelivery('bad')).toMatchObject({ status: 'failed', endedAt: T0 + 17 });
      expect(await b.webhooks.getDelivery('waiting')).toMatchObject({
        status: 'failed',
        endedAt: T0 + 5,
        lastError: 'subscription disabled',
      });
      expect(await b.webhooks.hasDueDeliveries(T0 + 10_000)).toBe(false);
      expect(await b.webhooks.get('on')).toMatchObject({ previousSecret: null, previousSecretExpiresAt: null });
    } finally {
      await cleanup();
    }
  });

  it("migrating a schema from before runs had their tenant (v11) fills in each run's tenant, its session's, no run is a rerun (v12), and there is no dataset or batch (v13)", async () => {
    const { store, url, schema, cleanup } = await openTestPostgres();
    try {
      for (const [session, tenant] of [
        ['s1', 'acme'],
        ['s2', 'globex'],
      ] as const) {
        await store.sessions.create({ id: session, tenant, createdAt: 1 });
        await store.runs.create({
          id: `run-${session}`,
          sessionId: session,
          agent: { name: 'a', version: '1' },
          agentSpec: {},
          createdAt: 1,
        });
      }
      await store.close();
      // As the schema was before v11 (and so before v12 and v13).
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(
          `SET search_path TO "${schema}"; DROP TABLE tenants, tenant_dispatch; ALTER TABLE api_keys DROP COLUMN scope, DROP COLUMN quotas;
          DROP INDEX runs_tenant_waiting; ALTER TABLE runs DROP COLUMN tenant;
           DROP INDEX runs_rerun_of; ALTER TABLE runs DROP COLUMN rerun_of;
           DROP TABLE dataset_items, datasets, batch_items, batches, quota_charges; DELETE FROM keel_schema WHERE version >= 11`,
        );
      } finally {
        await c.end();
      }
      const again = await openPostgresStore({ url, schema });
      try {
        expect((await again.runs.list({ tenant: 'acme', limit: 10 })).map((r) => r.id)).toEqual(['run-s1']);
        expect((await again.runs.list({ tenant: 'globex', limit: 10 })).map((r) => r.id)).toEqual(['run-s2']);
        expect((await again.runs.list({ limit: 10 })).map((r) => r.rerunOf)).toEqual([null, null]);
        expect(await again.runs.list({ rerunOf: 'run-s1', limit: 10 })).toEqual([]);
        // v13: datasets and batches, none yet.
        expect(await again.datasets.list({ limit: 10 })).toEqual([]);
        expect(await again.batches.claim('w', 1000, Date.now())).toBeUndefined();
      } finally {
        await again.close();
      }
    } finally {
      await cleanup();
    }
  });

  it('refuses a schema name that is not a plain identifier, and an unreachable server with a clear error', async () => {
    expect(() => new PostgresStore({ url: postgresUrl(), schema: 'a"; drop table x; --' })).toThrow(/schema name/);
    await expect(
      openPostgresStore({ url: 'postgres://postgres@127.0.0.1:1/none', connectionTimeoutMs: 2000 }),
    ).rejects.toThrow();
  });
});

tenantsContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});
