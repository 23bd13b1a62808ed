/**
 * /v1/webhooks over HTTP: subscriptions scoped to the API key's tenant, deliveries listed with
 * their attempts, redelivery, bad input as problem+json `validation`, the routes in /openapi.json.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhookSignature } from '../../src/index.ts';
import { Receiver } from '../webhooks/receiver.ts';
import { startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';

let t: TestServer;
let acme: Api;
let globex: Api;
let hook: Receiver;

beforeAll(async () => {
  hook = await new Receiver().start();
  t = await startTestServer({ keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
  acme = t.api(t.secrets[0]);
  globex = t.api(t.secrets[1]);
});

afterAll(async () => {
  await t.close();
  await hook.stop();
});

const until = async (check: () => Promise<boolean>, ms = 5000) => {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('/v1/webhooks', () => {
  it('subscribes, delivers signed events of the tenant, lists deliveries with attempts, redelivers', async () => {
    const created = await acme.post('/v1/webhooks', {
      url: hook.url,
      events: ['run.waiting_approval', 'run.completed'],
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      url: hook.url,
      events: ['run.waiting_approval', 'run.completed'],
      active: true,
    });
    expect(created.body.secret).toMatch(/^whsec_/);
    const id = created.body.id as string;
    // The secret is shown once.
    const got = await acme.get(`/v1/webhooks/${id}`);
    expect(got.status).toBe(200);
    expect(got.body.secret).toBeUndefined();
    expect((await acme.get('/v1/webhooks')).body).toMatchObject({ data: [{ id }], next_cursor: null });
    expect((await globex.get('/v1/webhooks')).body).toMatchObject({ data: [], next_cursor: null });

    // globex's run is not acme's business.
    const other = await globex.session();
    await globex.post(`/v1/sessions/${other.id}/messages`, { content: 'hello' });
    const s = await acme.session();
    const sent = await acme.post(`/v1/sessions/${s.id}/messages`, { content: 'danger:x' });
    expect(sent.status).toBeLessThan(300);
    await until(async () => hook.received.length >= 1);
    const r = hook.received[0]!;
    expect(r.headers['keel-event']).toBe('run.waiting_approval');
    expect(verifyWebhookSignature(created.body.secret, r.headers['keel-signature'] as string, r.body)).toBe(true);
    expect(JSON.parse(r.body)).toMatchObject({
      type: 'run.waiting_approval',
      data: { tenant: 'acme', run: { session_id: s.id, status: 'waiting_approval' } },
    });

    const list = await acme.get(`/v1/webhooks/${id}/deliveries`);
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(1);
    const d = list.body.data[0];
    expect(d).toMatchObject({
      id: r.headers['keel-delivery'],
      webhook_id: id,
      event_type: 'run.waiting_approval',
      status: 'delivered',
      last_status_code: 200,
      attempts: [{ n: 1, status_code: 200, error: null }],
    });
    expect(d.payload).toEqual(JSON.parse(r.body));
    // By its id alone (the Keel-Delivery header), for its tenant only.
    const byId = await acme.get(`/v1/webhook-deliveries/${d.id}`);
    expect(byId.status).toBe(200);
    expect(byId.body).toMatchObject({ id: d.id, webhook_id: id, status: 'delivered', session_id: s.id });
    const notTheirs = await globex.get(`/v1/webhook-deliveries/${d.id}`);
    expect(notTheirs.status).toBe(404);
    expect(notTheirs.body.type).toMatch(/not_found$/);

    const again = await acme.post(`/v1/webhooks/${id}/deliveries/${d.id}/redeliver`);
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ id: d.id, status: 'pending' });
    await until(async () => hook.received.length >= 2);
    expect(hook.received[1]!.headers['keel-delivery']).toBe(d.id);
    await until(async () => (await acme.get(`/v1/webhooks/${id}/deliveries`)).body.data[0].attempts.length === 2);

    // Paging.
    const page = await acme.get(`/v1/webhooks/${id}/deliveries?limit=1`);
    expect(page.body.next_cursor).toBeNull();
  });

  it('scopes every route to the tenant: another tenant’s webhook is not found', async () => {
    const { body: w } = await acme.post('/v1/webhooks', { url: hook.url, events: ['run.failed'] });
    for (const res of [
      await globex.get(`/v1/webhooks/${w.id}`),
      await globex.request('PATCH', `/v1/webhooks/${w.id}`, { json: { active: false } }),
      await globex.delete(`/v1/webhooks/${w.id}`),
      await globex.get(`/v1/webhooks/${w.id}/deliveries`),
      await globex.post(`/v1/webhooks/${w.id}/deliveries/nope/redeliver`),
    ]) {
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/problem\+json/);
      expect(res.body.type).toMatch(/not_found$/);
    }
    expect((await acme.get(`/v1/webhooks/${w.id}`)).body.active).toBe(true);
    expect((await acme.post(`/v1/webhooks/${w.id}/deliveries/nope/redeliver`)).status).toBe(404);
    expect((await t.api().get('/v1/webhooks')).status).toBe(401);
  });

  it('updates and deletes', async () => {
    const { body: w } = await acme.post('/v1/webhooks', {
      url: hook.url,
      events: ['run.failed'],
      secret: 'a-secret-of-my-own-choosing',
    });
    expect(w.secret).toBe('a-secret-of-my-own-choosing');
    const patched = await acme.request('PATCH', `/v1/webhooks/${w.id}`, {
      json: { url: 'https://example.test/x', events: ['run.cancelled', 'schedule.fired'], active: false },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      id: w.id,
      url: 'https://example.test/x',
      events: ['run.cancelled', 'schedule.fired'],
      active: false,
    });
    expect((await acme.delete(`/v1/webhooks/${w.id}`)).status).toBe(204);
    expect((await acme.get(`/v1/webhooks/${w.id}`)).status).toBe(404);
    expect((await acme.delete(`/v1/webhooks/${w.id}`)).status).toBe(404);
  });

  it('refuses bad input with problem+json validation', async () => {
    const bad = [
      { url: 'ftp://example.test/x', events: ['run.failed'] },
      { url: 'not a url', events: ['run.failed'] },
      { url: hook.url, events: [] },
      { url: hook.url, events: ['run.exploded'] },
      { url: hook.url },
      { url: hook.url, events: ['run.failed'], colour: 'blue' },
      { url: hook.url, events: ['run.failed'], secret: 'short' },
    ];
    for (const b of bad) {
      const res = await acme.post('/v1/webhooks', b);
      expect(res.status, JSON.stringify(b)).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(res.body.type).toMatch(/validation$/);
    }
    const { body: w } = await acme.post('/v1/webhooks', { url: hook.url, events: ['run.failed'] });
    const patch = await acme.request('PATCH', `/v1/webhooks/${w.id}`, { json: { url: 'javascript:alert(1)' } });
    expect(patch.status).toBe(400);
    expect(patch.body.type).toMatch(/validation$/);
  });

  it('subscribes to every run status (run.<status>) and lists them in /openapi.json', async () => {
    const events = [
      'run.queued',
      'run.running',
      'run.waiting_approval',
      'run.waiting_for_user',
      'run.paused',
      'run.completed',
      'run.failed',
      'run.cancelled',
      'run.timed_out',
      'run.sleeping',
      'run.waiting_for_signal',
      'run.waiting_for_quota',
      'schedule.fired',
    ];
    const created = await acme.post('/v1/webhooks', { url: hook.url, events });
    expect(created.status).toBe(201);
    expect(created.body.events).toEqual(events);
    const spec = (await acme.get('/openapi.json')).body;
    const schema = JSON.stringify(spec.components.schemas.Webhook);
    for (const e of events) expect(schema).toContain(`"${e}"`);
    await acme.delete(`/v1/webhooks/${created.body.id}`);
  });

  it('rotates a secret: the new one is shown once, the old one signs too until the overlap ends', async () => {
    const { body: w } = await acme.post('/v1/webhooks', { url: hook.url, events: ['run.failed'] });
    const before = Date.now();
    const rotated = await acme.post(`/v1/webhooks/${w.id}/rotate-secret`, { overlap_seconds: 600 });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ id: w.id, url: hook.url });
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(w.secret);
    const expires = Date.parse(rotated.body.previous_secret_expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 600_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 600_000);
    const got = await acme.get(`/v1/webhooks/${w.id}`);
    expect(got.body.secret).toBeUndefined();
    expect(got.body.previous_secret_expires_at).toBe(rotated.body.previous_secret_expires_at);
    // No body: the default overlap, a day.
    const byDefault = await acme.request('POST', `/v1/webhooks/${w.id}/rotate-secret`);
    expect(byDefault.status).toBe(200);
    expect(Date.parse(byDefault.body.previous_secret_expires_at) - Date.now()).toBeGreaterThan(86_400_000 - 60_000);
    for (const bad of [
      { overlap_seconds: -1 },
      { overlap_seconds: 7 * 86_400 + 1 },
      { overlap_seconds: 1.5 },
      { overlap_seconds: '60' },
      { overlap: 60 },
    ]) {
      const res = await acme.post(`/v1/webhooks/${w.id}/rotate-secret`, bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(res.body.type).toMatch(/validation$/);
    }
    const other = await globex.post(`/v1/webhooks/${w.id}/rotate-secret`, {});
    expect(other.status).toBe(404);
    expect(other.body.type).toMatch(/not_found$/);
  });

  it('refuses a private destination with problem+json validation where private networks are not allowed', async () => {
    const strict = await startTestServer({ keys: [{ tenant: 'acme' }], webhooks: { allowPrivateNetworks: false } });
    try {
      const api = strict.api(strict.secrets[0]);
      for (const url of [
        'http://10.1.2.3/hook',
        'http://[64:ff9b::7f00:1]/hook',
        'http://[2002:7f00:1::1]/hook',
        'http://localhost./hook',
      ]) {
        const res = await api.post('/v1/webhooks', { url, events: ['run.failed'] });
        expect(res.status, url).toBe(400);
        expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
        expect(res.body.type).toMatch(/validation$/);
        expect(res.body.detail).toMatch(/private|this machine/);
      }
      const { body: w } = await api.post('/v1/webhooks', { url: 'https://93.184.215.14/hook', events: ['run.failed'] });
      const patch = await api.request('PATCH', `/v1/webhooks/${w.id}`, {
        json: { url: 'http://[::ffff:192.168.1.1]/hook' },
      });
      expect(patch.status).toBe(400);
      expect(patch.body.type).toMatch(/validation$/);
    } finally {
      await strict.close();
    }
  });

  it('is described in /openapi.json', async () => {
    const spec = (await acme.get('/openapi.json')).body;
    expect(Object.keys(spec.paths)).toEqual(
      expect.arrayContaining([
        '/v1/webhooks',
        '/v1/webhooks/{id}',
        '/v1/webhooks/{id}/deliveries',
        '/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver',
        '/v1/webhooks/{id}/rotate-secret',
        '/v1/webhook-deliveries/{id}',
      ]),
    );
    expect(Object.keys(spec.paths['/v1/webhooks/{id}'])).toEqual(expect.arrayContaining(['get', 'patch', 'delete']));
  });
});
