/**
 * Retention through a real server, on both backends: a tenant's policy (GET/PUT/DELETE
 * /v1/retention/policy), what a sweep would do (/v1/retention/status, /v1/retention/run with
 * dry_run), a sweep, the 409 `session_in_archive` of an archived session, its restore (POST
 * /v1/sessions/{id}/restore, tenant-scoped), and bad input as precise problems.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/core/clock.ts';
import { BACKENDS, expectProblem, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';
import { directoryArchive, type TestArchive } from '../retention/archive-stores.ts';

const DAY = 86_400_000;

for (const backend of BACKENDS) {
  describe(`/v1/retention (${backend})`, () => {
    let t: TestServer;
    let archive: TestArchive;
    let acme: Api;
    let globex: Api;
    const clock = manualClock();

    beforeAll(async () => {
      archive = directoryArchive();
      t = await startTestServer({
        backend,
        keys: [{ tenant: 'acme' }, { tenant: 'globex' }],
        retention: { archive: archive.store, settings: { sessions: { archiveAfterDays: 365 } } },
      });
      Object.defineProperty(t.runtime, 'clock', { value: clock });
      acme = t.api(t.secrets[0]);
      globex = t.api(t.secrets[1]);
    });
    afterAll(async () => {
      await t?.close();
      await archive?.close();
    });

    it('a tenant sets its own policy, and reads what applies', async () => {
      const put = await acme.request('PUT', '/v1/retention/policy', {
        json: { archive_after_days: 30, delete_after_days: 60 },
      });
      expect(put.status).toBe(200);
      expect(put.body).toMatchObject({
        tenant: 'acme',
        agent: null,
        policy: { archive_after_days: 30, delete_after_days: 60 },
        effective: { archive_after_days: 30, delete_after_days: 60 },
      });
      expect((await acme.get('/v1/retention/policy')).body).toMatchObject({ policy: { archive_after_days: 30 } });
      // Another tenant sees its own: keel.config's.
      expect((await globex.get('/v1/retention/policy')).body).toMatchObject({
        tenant: 'globex',
        policy: null,
        effective: { archive_after_days: 365, delete_after_days: null },
      });
      const agent = await globex.request('PUT', '/v1/retention/policy', {
        json: { agent: 'helper', archive_after_days: null },
      });
      expect(agent.body).toMatchObject({ agent: 'helper', effective: { archive_after_days: null } });
      expect((await globex.request('DELETE', '/v1/retention/policy?agent=helper')).status).toBe(204);
      expectProblem(await globex.request('DELETE', '/v1/retention/policy?agent=helper'), 'not_found', 404);
    });

    it('refuses a policy it cannot keep, naming the field', async () => {
      const keep = await acme.request('PUT', '/v1/retention/policy', { json: { keep_runs: 3 } });
      expect(expectProblem(keep, 'invalid_retention_policy', 422).field).toBe('policy.keepRuns');
      const negative = await acme.request('PUT', '/v1/retention/policy', { json: { archive_after_days: -3 } });
      expect(expectProblem(negative, 'invalid_retention_policy', 422).field).toBe('policy.archiveAfterDays');
      expectProblem(await acme.request('PUT', '/v1/retention/policy', { json: { forever: true } }), 'validation', 400);
      expectProblem(await acme.get('/v1/retention/policy?agnet=x'), 'validation', 400);
      expectProblem(await acme.post('/v1/retention/run', { dryrun: true }), 'validation', 400);
    });

    it('says what a sweep would do, does it, and restores by id', { timeout: 60_000 }, async () => {
      const mine = await acme.session();
      const run = await acme.send(mine.id, 'hello');
      await acme.waitForRun(run.run.id, 'completed');
      const theirs = await globex.session();

      clock.advance(40 * DAY);
      const status = await acme.get('/v1/retention/status');
      expect(status.status).toBe(200);
      expect(status.body).toMatchObject({
        policy: { archive_after_days: 30, delete_after_days: 60 },
        archive_store: true,
        plan: { dry_run: true, tenant: 'acme', sessions: { archived: 1, archived_ids: [mine.id] } },
      });
      const dry = await acme.post('/v1/retention/run', { dry_run: true });
      expect(dry.body.sessions.archived_ids).toEqual([mine.id]);
      expect((await acme.get(`/v1/sessions/${mine.id}`)).status).toBe(200);

      const done = await acme.post('/v1/retention/run', {});
      expect(done.status).toBe(200);
      expect(done.body).toMatchObject({
        dry_run: false,
        sessions: { archived: 1, archived_ids: [mine.id] },
        tables: {},
      });
      // The other tenant's session is not this tenant's sweep's (and its policy is 365 days).
      expect((await globex.get(`/v1/sessions/${theirs.id}`)).status).toBe(200);

      // Listed, saying it is in the archive store.
      const listed = (await acme.get('/v1/sessions?limit=100')).body.data.find((x: { id: string }) => x.id === mine.id);
      expect(listed.in_archive_at).toEqual(expect.any(String));
      const p = expectProblem(await acme.get(`/v1/sessions/${mine.id}`), 'session_in_archive', 409);
      expect(p.detail).toContain(`/v1/sessions/${mine.id}/restore`);
      expectProblem(
        await acme.post(`/v1/sessions/${mine.id}/messages`, { content: 'again?' }),
        'session_in_archive',
        409,
      );
      expectProblem(await acme.get(`/v1/sessions/${mine.id}/events`), 'session_in_archive', 409);

      expectProblem(await globex.post(`/v1/sessions/${mine.id}/restore`), 'not_found', 404);
      const restored = await acme.post(`/v1/sessions/${mine.id}/restore`);
      expect(restored.status).toBe(200);
      expect(restored.body.session_id).toBe(mine.id);
      expect(restored.body.events).toBeGreaterThan(0);
      expect((await acme.get(`/v1/sessions/${mine.id}`)).body).toMatchObject({ id: mine.id, in_archive_at: null });
      expect((await acme.allEvents(mine.id)).length).toBe(restored.body.events);
      expectProblem(await acme.post(`/v1/sessions/${mine.id}/restore`), 'not_in_archive', 409);
      expectProblem(await acme.post('/v1/sessions/nope/restore'), 'not_found', 404);

      // A session in the archive store can be erased: its tombstone here, its archive gone there.
      // Restored, it is active from then: idle again 30 days later.
      expect((await acme.post('/v1/retention/run', {})).body.sessions.archived).toBe(0);
      clock.advance(31 * DAY);
      const again = await acme.post('/v1/retention/run', {});
      expect(again.body.sessions.archived_ids).toEqual([mine.id]);
      expect(await archive.store.list()).toHaveLength(1);
      const erased = await acme.post(`/v1/sessions/${mine.id}/erase`);
      expect(erased.status).toBe(200);
      expect(await archive.store.list()).toEqual([]);
      expectProblem(await acme.get(`/v1/sessions/${mine.id}`), 'gone', 410);
    });
  });
}
