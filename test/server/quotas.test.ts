/**
 * Tenant quotas over HTTP (ADR-0043), on SQLite and PostgreSQL: a message over the tenant's runs per
 * minute is refused with 429 `quota_exceeded` and Retry-After, other tenants unaffected; the run
 * records the API key that made it; GET /v1/usage shows the caller's quotas against their use.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, expectProblem, startTestServer, type TestServer } from '../support/server-helpers.ts';

describe.each(BACKENDS)('quotas over HTTP on %s', (backend) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      backend,
      keys: [{ tenant: 'acme' }, { tenant: 'globex' }],
      quotas: { default: { runsPerMinute: 2, tokensPerDay: 100_000, onLimit: 'fail' } },
    });
  });
  afterAll(() => t?.close());

  it('refuses a run over the runs per minute with 429 quota_exceeded and Retry-After', async () => {
    const acme = t.api(t.secrets[0]);
    const sessions = [];
    for (let i = 0; i < 3; i++) sessions.push((await acme.post('/v1/sessions', {})).body.id as string);
    const first = await acme.post(`/v1/sessions/${sessions[0]}/messages`, { content: 'hello' });
    expect(first.status).toBe(202);
    // The run records the key that made it (its own quotas apply with its tenant's).
    expect((await t.store.runs.get(first.body.run.id))?.options).toMatchObject({ apiKey: t.keyIds[0] });
    expect((await acme.post(`/v1/sessions/${sessions[1]}/messages`, { content: 'hello' })).status).toBe(202);
    const third = await acme.post(`/v1/sessions/${sessions[2]}/messages`, { content: 'hello' });
    const p = expectProblem(third, 'quota_exceeded', 429);
    expect(p).toMatchObject({ scope: 'tenant:acme', limit: 'runsPerMinute', max: 2 });
    const retryAfter = Number(third.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(p.retry_after).toBe(retryAfter);
    // Nothing was made of the refused message.
    const listed = await acme.get(`/v1/sessions/${sessions[2]}/runs`);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([]);
    // Another tenant has its own minute.
    const globex = t.api(t.secrets[1]);
    const g = (await globex.post('/v1/sessions', {})).body.id as string;
    expect((await globex.post(`/v1/sessions/${g}/messages`, { content: 'hello' })).status).toBe(202);
  });

  it('GET /v1/usage shows the tenant’s quotas against their use', async () => {
    const acme = t.api(t.secrets[0]);
    // The runs made above end (each an echo: a model call charged to acme's tokens per day).
    const deadline = Date.now() + 10_000;
    let quota;
    for (;;) {
      quota = (await acme.get('/v1/usage')).body.quota;
      if ((quota.tenant.tokens_per_day.used > 0 && quota.tenant.tokens_per_day.reserved === 0) || Date.now() > deadline)
        break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(quota.key).toBeNull();
    expect(quota.tenant).toMatchObject({
      scope: 'tenant:acme',
      on_limit: 'fail',
      runs_per_minute: { limit: 2, used: 2 },
      tokens_per_day: { limit: 100_000, reserved: 0 },
    });
    expect(quota.tenant.tokens_per_day.used).toBeGreaterThan(0);
    expect(Date.parse(quota.tenant.tokens_per_day.resets_at)).toBeGreaterThan(Date.now());
    // As CSV the report is the usage table alone.
    const csv = await acme.get('/v1/usage?format=csv');
    expect(csv.status).toBe(200);
    expect(csv.text).not.toContain('quota');
  });
});
