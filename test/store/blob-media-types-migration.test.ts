/**
 * The large payloads' migration (SQLite v25, PostgreSQL v16) on a database that has data: its
 * blobs and references stay as they were (no media type: an event field's JSON), and new large
 * payloads are stored with theirs. The database is rewound to the version before, as an older Keel
 * left it: the columns and the table the migration adds are removed.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteStore, PostgresStore, type Store } from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { tempDbPath } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const OLD = `sha256:${'a'.repeat(64)}`;
const NEW = `sha256:${'b'.repeat(64)}`;
const LONG = 'x'.repeat(100_000);

async function writeOld(store: Store): Promise<void> {
  await store.sessions.create({ id: 's', createdAt: 1 });
  await store.events.putBlobs([{ hash: OLD, data: '"a field"' }]);
  await store.events.append('s', [
    { id: 'e1', type: 'user/message', v: 1, time: 1, entry: true, data: { message: { $blob: OLD } } },
  ]);
}

async function checkMigrated(store: Store): Promise<void> {
  expect((await store.events.getBlobs([OLD])).get(OLD)).toBe('"a field"');
  expect((await store.events.blobInfo([OLD])).get(OLD)).toEqual({
    hash: OLD,
    size: 9,
    mediaType: null,
    encoding: null,
  });
  expect(await store.events.blobTenant(OLD, 'default')).toBe(true);
  expect((await store.events.read('s')).map((e) => e.data)).toEqual([{ message: { $blob: OLD } }]);
  await store.events.putBlobs([{ hash: NEW, data: LONG, mediaType: 'text/plain; charset=utf-8' }]);
  expect((await store.events.blobInfo([NEW])).get(NEW)).toMatchObject({ mediaType: 'text/plain; charset=utf-8' });
  expect(await store.events.blobHead(NEW, 10)).toBe('x'.repeat(10));
}

describe('the large payloads migration on a database with data', () => {
  it('SQLite: from schema v23', async () => {
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const first = openSqliteStore({ path: db.path });
    await writeOld(first);
    await first.close();
    const raw = new Database(db.path);
    raw.exec('ALTER TABLE blobs DROP COLUMN media_type; ALTER TABLE blobs DROP COLUMN encoding; DROP TABLE blob_heads');
    raw.pragma('user_version = 23');
    raw.close();
    const store = openSqliteStore({ path: db.path });
    cleanups.push(() => store.close());
    await checkMigrated(store);
  });

  it('PostgreSQL: from schema v14', async () => {
    const pgs = await openTestPostgres();
    cleanups.push(() => pgs.cleanup());
    await writeOld(pgs.store);
    const c = new pg.Client({ connectionString: pgs.url });
    await c.connect();
    try {
      await c.query(`SET search_path TO "${pgs.schema}"`);
      await c.query('ALTER TABLE blobs DROP COLUMN media_type, DROP COLUMN encoding; DROP TABLE blob_heads');
      await c.query('DELETE FROM keel_schema WHERE version > 14');
    } finally {
      await c.end();
    }
    const store = new PostgresStore({ url: pgs.url, schema: pgs.schema, poolSize: 2 });
    cleanups.push(() => store.close());
    await store.opened();
    await checkMigrated(store);
  });
});
