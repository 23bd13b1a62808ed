/**
 * The tenants registry over HTTP and the admin scope (issue 42): an admin key manages tenants,
 * their weights and quotas and their keys (`/v1/tenants`) and nothing else; a tenant key cannot
 * manage tenants; bad input is a precise problem. With authentication off, the loopback operator
 * manages tenants. On SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, expectProblem, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';

describe.each(BACKENDS)('tenants registry and the admin scope (%s)', (backend) => {
  let srv: TestServer;
  let admin: Api;
  let tenant: Api;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'ops', scope: 'admin' }, { tenant: 'acme' }] });
    admin = srv.api(srv.secrets[0]);
    tenant = srv.api(srv.secrets[1]);
  });
  afterAll(() => srv.close());

  it('creates, updates, reads, lists and removes a tenant', async () => {
    expect((await admin.get('/v1/tenants')).body).toEqual({ data: [] });
    const put = await admin.request('PUT', '/v1/tenants/acme', {
      json: { name: 'Acme', weight: 3, quotas: { concurrent_runs: 5, cost_per_day: 2.5, on_limit: 'fail' } },
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      id: 'acme',
      name: 'Acme',
      weight: 3,
      quotas: { concurrent_runs: 5, cost_per_day: 2.5, on_limit: 'fail' },
    });
    // What the body leaves out keeps its value.
    const again = await admin.request('PUT', '/v1/tenants/acme', { json: { weight: 2 } });
    expect(again.body).toMatchObject({ name: 'Acme', weight: 2, quotas: { concurrent_runs: 5 } });
    expect((await admin.get('/v1/tenants/acme')).body).toEqual(again.body);
    expect((await admin.get('/v1/tenants')).body.data.map((t: { id: string }) => t.id)).toEqual(['acme']);
    expect(await srv.runtime.tenants.get('acme')).toMatchObject({
      weight: 2,
      quotas: { concurrentRuns: 5, costPerDay: 2.5 },
    });

    expect((await admin.delete('/v1/tenants/acme')).status).toBe(204);
    expectProblem(await admin.get('/v1/tenants/acme'), 'not_found', 404);
    expectProblem(await admin.delete('/v1/tenants/acme'), 'not_found', 404);
  });

  it('refuses bad input with a validation problem', async () => {
    for (const json of [
      { weight: 0 },
      { weight: 1.5 },
      { weight: 10_001 },
      { quotas: { concurrent_runs: -1 } },
      { quotas: { bogus: 1 } },
      { quotas: { on_limit: 'drop' } },
      { surprise: true },
    ])
      expectProblem(await admin.request('PUT', '/v1/tenants/acme', { json }), 'validation', 400);
    expectProblem(await admin.request('PUT', '/v1/tenants/a%20b', { json: {} }), 'validation', 400);
    expectProblem(
      await admin.request('PUT', '/v1/tenants/acme', { body: '{', headers: { 'content-type': 'application/json' } }),
      'bad_json',
      400,
    );
    expect((await admin.get('/v1/tenants')).body).toEqual({ data: [] });
  });

  it("makes, lists and revokes a tenant's keys; a key it made acts for its tenant", async () => {
    const made = await admin.post('/v1/tenants/globex/keys', {
      name: 'ci',
      rate_per_minute: 100,
      quotas: { runs_per_minute: 10 },
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      tenant: 'globex',
      name: 'ci',
      scope: 'tenant',
      rate_per_minute: 100,
      quotas: { runs_per_minute: 10 },
      revoked_at: null,
    });
    expect(made.body.secret).toMatch(/^keel_/);
    const globex = srv.api(made.body.secret);
    const session = await globex.post('/v1/sessions', {});
    expect(session.status).toBe(201);
    expect((await srv.store.sessions.get(session.body.id))!.tenant).toBe('globex');

    const listed = await admin.get('/v1/tenants/globex/keys');
    expect(listed.body.data).toEqual([expect.objectContaining({ id: made.body.id, prefix: made.body.prefix })]);
    expect(JSON.stringify(listed.body)).not.toContain(made.body.secret);
    expectProblem(await admin.delete(`/v1/tenants/acme/keys/${made.body.id}`), 'not_found', 404);
    expect((await admin.delete(`/v1/tenants/globex/keys/${made.body.id}`)).status).toBe(204);
    expect((await admin.get('/v1/tenants/globex/keys')).body.data[0].revoked_at).not.toBeNull();
    expectProblem(await admin.post('/v1/tenants/bad%20name/keys', {}), 'validation', 400);
  });

  it('an admin key reaches nothing but the tenants routes', async () => {
    expectProblem(await admin.post('/v1/sessions', {}), 'forbidden_scope', 403);
    expectProblem(await admin.get('/v1/sessions'), 'forbidden_scope', 403);
    expectProblem(await admin.get('/v1/usage'), 'forbidden_scope', 403);
    expectProblem(await admin.get('/v1/tenantsx'), 'forbidden_scope', 403);
    // The OpenAI-compatible routes answer in OpenAI's error shape, with the same code.
    const openai = await admin.post('/openai/v1/responses', { model: 'helper', input: 'hi' });
    expect(openai.status).toBe(403);
    expect(openai.body.error).toMatchObject({ code: 'forbidden_scope' });
  });

  it('a tenant key cannot manage tenants', async () => {
    expectProblem(await tenant.get('/v1/tenants'), 'forbidden_scope', 403);
    expectProblem(await tenant.request('PUT', '/v1/tenants/acme', { json: { weight: 100 } }), 'forbidden_scope', 403);
    expectProblem(await tenant.post('/v1/tenants/acme/keys', {}), 'forbidden_scope', 403);
    expect(await srv.runtime.tenants.get('acme')).toBeUndefined();
    expect((await tenant.get('/v1/sessions')).status).toBe(200);
  });
});

describe('tenants registry with authentication off', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer();
  });
  afterAll(() => srv.close());

  it('the loopback operator manages tenants', async () => {
    const api = srv.api();
    expect((await api.request('PUT', '/v1/tenants/acme', { json: { weight: 4 } })).body).toMatchObject({ weight: 4 });
    expect((await api.get('/v1/tenants')).body.data).toHaveLength(1);
  });
});
