/**
 * The tenants migration (SQLite 26, PostgreSQL 17) on a database with data: the keys there were
 * keep working with the tenant scope and no quotas of their own, and the runs queued before it are
 * claimed, fairly, after it. The database is brought back to how the version before left it (the
 * migration's tables, columns and index removed), then opened again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { CLAIM_POLICY } from '../../src/runs/lifecycle/run-status.ts';
import type { ApiKeyRecord, Store } from '../../src/store/index.ts';
import { openPostgresStore } from '../../src/store/postgres/index.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import { dropSchema, freshSchema, postgresUrl } from '../support/postgres.ts';

const T0 = 1_700_000_000_000;
const KEY: ApiKeyRecord = {
  id: 'k1',
  tenant: 'acme',
  name: 'old',
  hash: 'h1',
  prefix: 'keel_old',
  ratePerMinute: null,
  createdAt: T0,
  revokedAt: null,
  scope: 'tenant',
  quotas: null,
};

/** A key, then 5 queued runs of acme and (after them) 1 of globex. */
async function fill(store: Store): Promise<void> {
  await store.keys.create(KEY);
  for (let i = 0; i < 6; i++) {
    const tenant = i < 5 ? 'acme' : 'globex';
    await store.sessions.create({ id: `s${i}`, tenant, createdAt: T0 });
    await store.runs.create({
      id: `r${i}`,
      sessionId: `s${i}`,
      agent: { name: 'a', version: '1' },
      agentSpec: {},
      createdAt: T0 + i,
    });
  }
}

async function expectMigrated(store: Store): Promise<void> {
  expect(await store.keys.find('h1')).toEqual(KEY);
  expect(await store.tenants.list()).toEqual([]);
  const claimed: string[] = [];
  for (let i = 0; i < 3; i++) claimed.push((await store.claims.claim('w', 1000, T0 + 10, CLAIM_POLICY))!.run.id);
  // acme's oldest, then globex's (behind acme's backlog), then acme's next.
  expect(claimed).toEqual(['r0', 'r5', 'r1']);
}

describe('tenants migration on a database with data', () => {
  it('sqlite: from schema 25 (the version before)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-tenants-migration-'));
    const path = join(dir, 'keel.db');
    try {
      const before = new SqliteStore({ path });
      await fill(before);
      await before.close();
      const db = new Database(path);
      db.exec(`DROP INDEX runs_ready_by_tenant; DROP TABLE tenants; DROP TABLE tenant_dispatch;
               ALTER TABLE api_keys DROP COLUMN scope; ALTER TABLE api_keys DROP COLUMN quotas; PRAGMA user_version = 25;`);
      db.close();
      const after = new SqliteStore({ path });
      try {
        await expectMigrated(after);
      } finally {
        await after.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('postgres: from schema 16 (the version before)', async () => {
    const url = postgresUrl();
    const schema = freshSchema();
    try {
      const before = await openPostgresStore({ url, schema });
      await fill(before);
      await before.close();
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`SET search_path TO "${schema}"; DROP INDEX runs_ready_by_tenant; DROP TABLE tenants, tenant_dispatch;
          ALTER TABLE api_keys DROP COLUMN scope, DROP COLUMN quotas; DELETE FROM keel_schema WHERE version >= 17`);
      } finally {
        await c.end();
      }
      const after = await openPostgresStore({ url, schema });
      try {
        await expectMigrated(after);
      } finally {
        await after.close();
      }
    } finally {
      await dropSchema(url, schema);
    }
  });
});
