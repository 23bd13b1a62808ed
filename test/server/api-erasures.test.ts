/**
 * /v1/erasures (ADR-0041), on both backends: an operator (a server without API keys) erases a
 * session, a tenant, or by date, reads the audit and verifies; a tenant's key erases only its own
 * sessions and is refused the rest (`forbidden`); bad input is a `validation` problem.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { BACKENDS, expectProblem, startTestServer, type TestServer } from '../support/server-helpers.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

for (const backend of BACKENDS) {
  describe(`/v1/erasures (${backend})`, () => {
    let operator: TestServer;
    let keyed: TestServer;
    beforeAll(async () => {
      operator = await startTestServer({ backend });
      keyed = await startTestServer({
        backend,
        keys: [{ tenant: 'acme' }, { tenant: 'globex' }, { tenant: 'ops', scope: 'admin' }],
      });
    }, 30_000);
    afterAll(async () => {
      await operator?.close();
      await keyed?.close();
    });

    it('an operator erases a session, then verify finds its marker nowhere; the audit keeps a hash', async () => {
      const api = operator.api();
      const secret = `mk-${randomBytes(6).toString('hex')}`;
      const s = await api.session({ title: 'to erase' });
      const { run } = await api.send(s.id, `hello ${secret}`, { agent: 'terse' });
      await api.waitForRun(run.id, 'completed');

      const before = await api.post('/v1/erasures/verify', { ids: [s.id], strings: [secret] });
      expect(before.status).toBe(200);
      expect(before.body.clean).toBe(false);
      expect(before.body.remnants.map((f: { needle: string }) => f.needle)).toContain(secret);

      const r = await api.post('/v1/erasures', { scope: 'session', session_id: s.id });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        scope: 'session',
        by: 'operator',
        target_hash: sha256(`session:${s.id}`),
        session_ids: [s.id],
        counts: { sessions: 1 },
      });
      const after = await api.post('/v1/erasures/verify', { ids: [s.id], strings: [secret] });
      expect(after.body).toMatchObject({ clean: true, remnants: [] });
      expect(after.body.kept.length).toBeGreaterThan(0);
      expect((await api.get(`/v1/sessions/${s.id}`)).status).toBe(410);

      const audit = await api.get('/v1/erasures?limit=10');
      expect(audit.status).toBe(200);
      expect(audit.body.erasures[0]).toEqual({
        id: r.body.id,
        scope: 'session',
        target_hash: sha256(`session:${s.id}`),
        by: 'operator',
        at: r.body.at,
        counts: r.body.counts,
      });
    });

    it('an operator erases a tenant (confirmed) and by date (confirmed)', async () => {
      const api = operator.api();
      const tenant = `t-${randomBytes(4).toString('hex')}`;
      const s = await operator.runtime.sessions.create({ tenant });
      expectProblem(await api.post('/v1/erasures', { scope: 'tenant', tenant }), 'validation', 400);
      const r = await api.post('/v1/erasures', { scope: 'tenant', tenant, confirm: tenant });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ scope: 'tenant', target_hash: sha256(`tenant:${tenant}`), session_ids: [s.id] });

      const old = await api.session({});
      await new Promise((res) => setTimeout(res, 20));
      const cutoff = new Date().toISOString();
      await new Promise((res) => setTimeout(res, 20));
      const recent = await api.session({});
      expectProblem(await api.post('/v1/erasures', { scope: 'before', before: cutoff }), 'validation', 400);
      expectProblem(
        await api.post('/v1/erasures', { scope: 'before', before: 'yesterday', confirm: 'yesterday' }),
        'validation',
        400,
      );
      const byDate = await api.post('/v1/erasures', { scope: 'before', before: cutoff, confirm: cutoff });
      expect(byDate.status).toBe(200);
      expect(byDate.body.session_ids).toContain(old.id);
      expect(byDate.body.session_ids).not.toContain(recent.id);
      expect((await api.get(`/v1/sessions/${recent.id}`)).status).toBe(200);
    });

    it('a tenant key erases its own session only; the rest is forbidden; bad input is refused', async () => {
      const [acme, globex] = [keyed.api(keyed.secrets[0]), keyed.api(keyed.secrets[1])];
      const s = await acme.session({});
      expectProblem(await globex.post('/v1/erasures', { scope: 'session', session_id: s.id }), 'not_found', 404);
      expectProblem(
        await acme.post('/v1/erasures', { scope: 'tenant', tenant: 'acme', confirm: 'acme' }),
        'forbidden',
        403,
      );
      const when = new Date().toISOString();
      expectProblem(
        await acme.post('/v1/erasures', { scope: 'before', before: when, confirm: when }),
        'forbidden',
        403,
      );
      expectProblem(await acme.post('/v1/erasures/verify', { ids: [s.id] }), 'forbidden', 403);
      expectProblem(await acme.get('/v1/erasures'), 'forbidden', 403);
      expectProblem(await acme.post('/v1/erasures', { scope: 'session' }), 'validation', 400);
      expectProblem(await acme.post('/v1/erasures', { scope: 'everything' }), 'validation', 400);
      expect((await acme.get(`/v1/sessions/${s.id}`)).status).toBe(200);

      const r = await acme.post('/v1/erasures', { scope: 'session', session_id: s.id });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ by: keyed.keyIds[0], session_ids: [s.id] });
      expect((await acme.get(`/v1/sessions/${s.id}`)).status).toBe(410);
    });

    it('an admin key erases a tenant and verifies it, as an operator does; it reads nothing else', async () => {
      const [acme, admin] = [keyed.api(keyed.secrets[0]), keyed.api(keyed.secrets[2])];
      const s = await acme.session({ title: 'marker-admin-erasure' });
      // An admin key is not a tenant key: it cannot read the session it may erase.
      expectProblem(await admin.get(`/v1/sessions/${s.id}`), 'forbidden_scope', 403);
      const before = await admin.post('/v1/erasures/verify', { strings: ['marker-admin-erasure'] });
      expect(before.status).toBe(200);
      expect(before.body.clean).toBe(false);
      const r = await admin.post('/v1/erasures', { scope: 'tenant', tenant: 'acme', confirm: 'acme' });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ scope: 'tenant', by: keyed.keyIds[2], session_ids: [s.id] });
      const after = await admin.post('/v1/erasures/verify', { ids: [s.id], strings: ['marker-admin-erasure'] });
      expect(after.body).toMatchObject({ clean: true, remnants: [] });
      const [last] = (await admin.get('/v1/erasures?limit=1')).body.erasures;
      expect(last).toMatchObject({ scope: 'tenant', by: keyed.keyIds[2] });
    });

    it('the older erase routes are audited too', async () => {
      const api = operator.api();
      const s = await api.session({});
      expect((await api.post(`/v1/sessions/${s.id}/erase`)).status).toBe(200);
      const [last] = (await api.get('/v1/erasures?limit=1')).body.erasures;
      expect(last).toMatchObject({ scope: 'session', by: 'operator', target_hash: sha256(`session:${s.id}`) });
      const other = await api.session({});
      const all = await api.post('/v1/sessions/erase', { confirm: 'default' });
      expect(all.body.erased).toBeGreaterThanOrEqual(1);
      const [tenantWide] = (await api.get('/v1/erasures?limit=1')).body.erasures;
      expect(tenantWide).toMatchObject({
        scope: 'tenant',
        target_hash: sha256('tenant:default'),
        counts: { sessions: all.body.erased },
      });
      expect((await api.get(`/v1/sessions/${other.id}`)).status).toBe(410);
    });

    it('verify refuses no needle and a needle too short', async () => {
      const api = operator.api();
      expectProblem(await api.post('/v1/erasures/verify', {}), 'validation', 400);
      expectProblem(await api.post('/v1/erasures/verify', { strings: ['ab'] }), 'validation', 400);
    });
  });
}
