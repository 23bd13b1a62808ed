/**
 * /v1/schedules through a real server: create (cron with a time zone, or an interval), list (paged,
 * tenant-scoped), get, pause, resume, delete, the history of fires with their runs, bad input as
 * 400 `validation` problems naming the field (the cron parser's message included), and the routes
 * in /openapi.json.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/core/clock.ts';
import { expectProblem, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';

let t: TestServer;
let acme: Api;
let globex: Api;
const clock = manualClock(Date.parse('2026-03-21T12:00:00Z'));

beforeAll(async () => {
  t = await startTestServer({ keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
  // The runtime's time, moved by hand: the server's scheduler and the test's checks read it.
  Object.defineProperty(t.runtime, 'clock', { value: clock });
  acme = t.api(t.secrets[0]);
  globex = t.api(t.secrets[1]);
});

afterAll(async () => {
  await t?.close();
});

describe('/v1/schedules', () => {
  it('creates a cron schedule in a time zone, reads it back, lists it only for its tenant', async () => {
    const session = await acme.session();
    const r = await acme.post('/v1/schedules', {
      name: 'weekly',
      cron: { expression: '0 9 * * 1', timezone: 'Europe/Paris' },
      message: 'the weekly report',
      target: { session_id: session.id },
      overlap: 'enqueue',
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      name: 'weekly',
      cron: { expression: '0 9 * * 1', timezone: 'Europe/Paris' },
      interval: null,
      message: 'the weekly report',
      target: { session_id: session.id },
      overlap: 'enqueue',
      catch_up: 'once',
      paused: false,
      next_fire_at: '2026-03-23T08:00:00.000Z',
      last_run_id: null,
    });
    const got = await acme.get(`/v1/schedules/${r.body.id}`);
    expect(got.body).toEqual(r.body);
    expectProblem(await globex.get(`/v1/schedules/${r.body.id}`), 'not_found', 404);
    expect((await globex.get('/v1/schedules')).body.data).toEqual([]);
    expect((await acme.get('/v1/schedules')).body.data.map((s: { id: string }) => s.id)).toContain(r.body.id);
  });

  it('pages the list with next_cursor', async () => {
    for (let i = 0; i < 3; i++)
      await globex.post('/v1/schedules', { interval: { seconds: 3600 }, message: 'x', target: { new_session: {} } });
    const p1 = await globex.get('/v1/schedules?limit=2');
    expect(p1.body.data).toHaveLength(2);
    const p2 = await globex.get(`/v1/schedules?limit=2&cursor=${p1.body.next_cursor}`);
    expect(p2.body.data).toHaveLength(1);
    expect(p2.body.next_cursor).toBeNull();
  });

  it('fires: pause, resume, the history of fires with their runs, delete', async () => {
    const created = (
      await acme.post('/v1/schedules', {
        interval: { seconds: 60 },
        message: 'ping',
        target: { new_session: { title: 'pings' } },
      })
    ).body;
    const paused = await acme.post(`/v1/schedules/${created.id}/pause`);
    expect(paused.body).toMatchObject({ paused: true, next_fire_at: null });
    clock.advance(120_000);
    await t.runtime.schedules.check();
    expect((await acme.get(`/v1/schedules/${created.id}/fires`)).body.data).toEqual([]);
    const resumed = await acme.post(`/v1/schedules/${created.id}/resume`);
    expect(resumed.body.paused).toBe(false);
    clock.advance(60_000);
    await t.runtime.schedules.check();
    const fires = (await acme.get(`/v1/schedules/${created.id}/fires`)).body;
    expect(fires.data).toHaveLength(1);
    expect(fires.data[0]).toMatchObject({ outcome: 'fired', reason: null });
    expect(Date.parse(fires.data[0].tick)).toBeLessThanOrEqual(Date.parse(fires.data[0].fired_at));
    const run = await acme.waitForRun(fires.data[0].run_id, 'completed');
    expect(run.session_id).toBe(fires.data[0].session_id);
    expect((await acme.get(`/v1/sessions/${run.session_id}`)).body.title).toBe('pings');
    const events = await acme.allEvents(run.session_id);
    expect(events.find((e) => e.type === 'schedule/fired')?.data).toEqual({
      scheduleId: created.id,
      tick: Date.parse(fires.data[0].tick),
      runId: run.id,
    });
    expect((await acme.get(`/v1/schedules/${created.id}`)).body.last_run_id).toBe(run.id);

    expectProblem(await globex.delete(`/v1/schedules/${created.id}`), 'not_found', 404);
    expect((await acme.delete(`/v1/schedules/${created.id}`)).status).toBe(204);
    expectProblem(await acme.get(`/v1/schedules/${created.id}`), 'not_found', 404);
    expectProblem(await acme.get(`/v1/schedules/${created.id}/fires`), 'not_found', 404);
  });

  it('bad input: 400 validation naming the field; an unknown agent 422', async () => {
    const session = await acme.session();
    const base = { message: 'x', target: { session_id: session.id } };
    const cron = expectProblem(
      await acme.post('/v1/schedules', { ...base, cron: { expression: '61 * * * *', timezone: 'UTC' } }),
      'validation',
      400,
    );
    expect(cron.field).toBe('cron.expression');
    expect(cron.detail).toMatch(/Invalid value for minute: 61/);
    const tz = expectProblem(
      await acme.post('/v1/schedules', { ...base, cron: { expression: '0 9 * * *', timezone: 'Nowhere/Else' } }),
      'validation',
      400,
    );
    expect(tz.field).toBe('cron.timezone');
    expect(
      expectProblem(await acme.post('/v1/schedules', { ...base, interval: { seconds: 0 } }), 'validation', 400).field,
    ).toBe('interval.seconds');
    expect(expectProblem(await acme.post('/v1/schedules', { ...base }), 'validation', 400).detail).toMatch(
      /exactly one of cron and interval/,
    );
    expect(
      expectProblem(
        await acme.post('/v1/schedules', { ...base, interval: { seconds: 5 }, target: { session_id: 'nope' } }),
        'validation',
        400,
      ).field,
    ).toBe('target.session_id');
    // Another tenant's session is no session.
    expect(
      expectProblem(await globex.post('/v1/schedules', { ...base, interval: { seconds: 5 } }), 'validation', 400).field,
    ).toBe('target.session_id');
    expectProblem(
      await acme.post('/v1/schedules', { ...base, interval: { seconds: 5 }, overlap: 'maybe' }),
      'validation',
      400,
    );
    expectProblem(
      await acme.post('/v1/schedules', { ...base, interval: { seconds: 5 }, surprise: true }),
      'validation',
      400,
    );
    expectProblem(
      await acme.post('/v1/schedules', { ...base, interval: { seconds: 5 }, agent: 'nobody' }),
      'unknown_agent',
      422,
    );
  });

  it('is in /openapi.json', async () => {
    const doc = (await acme.get('/openapi.json')).body;
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/schedules',
        '/v1/schedules/{id}',
        '/v1/schedules/{id}/pause',
        '/v1/schedules/{id}/resume',
        '/v1/schedules/{id}/fires',
      ]),
    );
    expect(Object.keys(doc.paths['/v1/schedules/{id}'])).toEqual(expect.arrayContaining(['get', 'delete']));
    expect(doc.components.schemas.Schedule).toBeDefined();
  });
});
