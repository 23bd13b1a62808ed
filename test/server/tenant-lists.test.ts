/**
 * No tenant in another's way: every list filters by tenant in the store's query, not after reading
 * a window of every tenant's rows. Tenant A has 10,000 rows in front of tenant B's (waiting runs,
 * sessions, schedules); B's lists show all of B's items and none of A's, page after page, on
 * SQLite and on PostgreSQL.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/core/index.ts';
import type { JsonObject, Store } from '../../src/store/index.ts';
import { BACKENDS, startTestServer, type Api, type Json, type TestServer } from '../support/server-helpers.ts';

const CROWD = 10_000;

const waitingFor = (i: number): JsonObject => ({
  kind: 'approval',
  calls: [{ toolCallId: `call-${i}`, toolName: 'danger', input: { target: String(i) }, kind: 'approval' }],
  decisions: {},
  expiresAt: null,
});

/**
 * `n` sessions of `tenant`, each with one run waiting for an approval (or, with `waiting: false`,
 * none): as many rows as the API would make, in a fraction of the time. On SQLite through the
 * store (createSession, createRun, updateRun), in transactions of a thousand; on PostgreSQL, where
 * that is 30,000 round trips, in three statements written as the store writes its rows.
 */
async function crowd(srv: TestServer, tenant: string, n: number, o: { waiting: boolean }): Promise<string[]> {
  const ids = Array.from({ length: n }, () => ({ session: newId(), run: newId() }));
  const now = Date.now();
  if (srv.postgres) {
    const client = new pg.Client({ connectionString: srv.postgres.url });
    await client.connect();
    try {
      await client.query(`SET search_path TO "${srv.postgres.schema}"`);
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO sessions (id, tenant, created_at, title) SELECT id, $2, $3, $2 || ' ' || n FROM unnest($1::text[]) WITH ORDINALITY AS u (id, n)`,
        [ids.map((i) => i.session), tenant, now],
      );
      if (o.waiting) {
        await client.query(
          `INSERT INTO runs (id, session_id, tenant, agent_name, agent_version, agent_spec, status, turn, created_at, waiting)
           SELECT r, s, $3, 'helper', '1', '{"name":"helper"}', 'waiting_approval', 1, $4, w FROM unnest($1::text[], $2::text[], $5::text[]) AS u (r, s, w)`,
          [
            ids.map((i) => i.run),
            ids.map((i) => i.session),
            tenant,
            now,
            ids.map((_, i) => JSON.stringify(waitingFor(i))),
          ],
        );
      }
      await client.query('COMMIT');
    } finally {
      await client.end();
    }
    return ids.map((i) => i.session);
  }
  const store: Store = srv.store;
  for (let done = 0; done < n; done += 1000) {
    await store.transaction(async (tx) => {
      for (let i = done; i < Math.min(n, done + 1000); i++) {
        await tx.sessions.create({ id: ids[i]!.session, tenant, createdAt: now, title: `${tenant} ${i}` });
        if (!o.waiting) continue;
        await tx.runs.create({
          id: ids[i]!.run,
          sessionId: ids[i]!.session,
          agent: { name: 'helper', version: '1' },
          agentSpec: { name: 'helper' },
          createdAt: now,
          turn: 1,
        });
        await tx.runs.update(
          ids[i]!.run,
          { status: 'waiting_approval', waiting: waitingFor(i) },
          { statuses: ['queued'] },
        );
      }
    });
  }
  return ids.map((i) => i.session);
}

/** Every page of a list, following `next_cursor`; the ids of the items. */
async function walk(api: Api, path: string, id: (item: Json) => string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; ; pages++) {
    const sep = path.includes('?') ? '&' : '?';
    const r: Json = await api.get(
      `${path}${sep}limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
    );
    expect(r.status, r.text).toBe(200);
    ids.push(...(r.body.data as Json[]).map(id));
    cursor = r.body.next_cursor;
    if (cursor === null) return ids;
    if (pages > 100) throw new Error(`${path}: more than 100 pages`);
  }
}

describe.each(BACKENDS)('lists filter by tenant in the query (%s)', (backend) => {
  let srv: TestServer;
  let a: Api;
  let b: Api;
  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'a' }, { tenant: 'b' }] });
    a = srv.api(srv.secrets[0]);
    b = srv.api(srv.secrets[1]);
  }, 120_000);
  afterAll(async () => {
    await srv?.close();
  });

  it("the inbox: B's waiting runs, with 10,000 of A's in front, all of them and none of A's, page by page", async () => {
    const first = await b.send((await b.session({ title: 'b first' })).id, 'danger:first');
    await b.waitForRun(first.run.id, 'waiting_approval');
    const theirs = new Set(await crowd(srv, 'a', CROWD, { waiting: true }));
    const second = await b.send((await b.session({ title: 'b second' })).id, 'ask');
    const third = await b.send((await b.session({ title: 'b third' })).id, 'danger:third');
    await b.waitForRun(second.run.id, 'waiting_for_user');
    await b.waitForRun(third.run.id, 'waiting_approval');
    const mine = [first.run.id, second.run.id, third.run.id];

    const inbox = await b.get('/v1/inbox');
    expect(inbox.status, inbox.text).toBe(200);
    expect(inbox.body.data.map((i: Json) => i.run.id)).toEqual(mine);
    expect(inbox.body.data.map((i: Json) => i.session.title)).toEqual(['b first', 'b second', 'b third']);
    expect(inbox.body.next_cursor).toBeNull();
    // One item a page: the cursor walks B's items, never one of A's.
    expect(await walk(b, '/v1/inbox', (i) => i.run.id, 1)).toEqual(mine);

    // A's inbox pages through A's own, oldest first.
    const own = await a.get('/v1/inbox?limit=100');
    expect(own.body.data).toHaveLength(100);
    expect(own.body.data.every((i: Json) => theirs.has(i.session.id))).toBe(true);
    expect(own.body.next_cursor).toEqual(expect.any(String));
    const next = await a.get(`/v1/inbox?limit=100&cursor=${encodeURIComponent(own.body.next_cursor)}`);
    expect(next.body.data.map((i: Json) => i.run.id)[0] > own.body.data.at(-1).run.id).toBe(true);
  }, 180_000);

  it("sessions, session summaries and schedules: B's, with 10,000 sessions of A in front, all of them and none of A's", async () => {
    const before = await b.session({ title: 'b before' });
    await crowd(srv, 'a', CROWD, { waiting: false });
    const after = await b.session({ title: 'b after' });
    const schedules = [];
    for (const name of ['one', 'two']) {
      const r = await b.post('/v1/schedules', {
        name,
        interval: { seconds: 3600 },
        message: 'hi',
        target: { session_id: after.id },
      });
      expect(r.status, r.text).toBe(201);
      schedules.push(r.body.id);
    }
    const bSessions = (await walk(b, '/v1/sessions', (s) => s.id, 1000)).filter((id) =>
      [before.id, after.id].includes(id),
    );
    expect(bSessions).toEqual([before.id, after.id]);
    // Every session B sees is B's: the ones of this test, and those of the inbox test.
    for (const id of await walk(b, '/v1/sessions', (s) => s.id, 2))
      expect((await b.get(`/v1/sessions/${id}`)).status).toBe(200);
    expect(await walk(b, '/v1/session-summaries?q=b%20after', (s) => s.session.id, 1)).toEqual([after.id]);
    expect(await walk(b, '/v1/schedules', (s) => s.id, 1)).toEqual(schedules);
  }, 180_000);
});
