/**
 * Schedules (ADR-0016) with a manual clock: cron in a time zone across a DST change, intervals,
 * each overlap policy, missed ticks after downtime (catch-up once / skip), pause/resume/delete,
 * bad input, the `schedule/fired` event, a new session per fire, two runtimes on one SQLite file
 * racing for the same tick (one fire, one run), and the scheduler loop of a runtime with a worker.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, defineAgent, ScriptedModel, SqliteStore } from '../../src/index.ts';
import { manualClock } from '../../src/core/clock.ts';
import { nextTickAfter, ScheduleValidationError } from '../../src/runs/schedules.ts';
import type { Store } from '../../src/store/index.ts';
import type { CheckerMessage } from './fixtures/schedule-checker.ts';
import { gated } from '../support/runs-helpers.ts';

const CHECKER = fileURLToPath(new URL('./fixtures/schedule-checker.ts', import.meta.url));

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const agent = () => defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'done' }], { loop: true }) });
const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());

function setup(start = Date.parse('2026-03-21T12:00:00Z'), store: Store = new SqliteStore({ path: ':memory:' })) {
  const clock = manualClock(start);
  const rt = createRuntime({ store, agents: [agent()], clock });
  cleanups.push(() => store.close());
  cleanups.push(() => rt.close({ graceMs: 0 }));
  return { rt, clock, store };
}

/** Rejects with what `p` throws; fails if it resolves. */
async function thrown(p: Promise<unknown>): Promise<Error & { code?: string; field?: string }> {
  try {
    await p;
  } catch (e) {
    return e as Error & { code?: string; field?: string };
  }
  throw new Error('expected a rejection');
}

describe('schedules: ticks', () => {
  it('cron "0 9 * * 1" in Europe/Paris: 09:00 local on each Monday, across the change to summer time', async () => {
    const s = { cron: { expression: '0 9 * * 1', timezone: 'Europe/Paris' }, intervalSeconds: null, createdAt: 0 };
    const t1 = nextTickAfter(s, Date.parse('2026-03-20T00:00:00Z'))!;
    const t2 = nextTickAfter(s, t1)!;
    const t3 = nextTickAfter(s, t2)!;
    // CET (UTC+1) on 23 March; CEST (UTC+2) from 29 March.
    expect([iso(t1), iso(t2), iso(t3)]).toEqual([
      '2026-03-23T08:00:00.000Z',
      '2026-03-30T07:00:00.000Z',
      '2026-04-06T07:00:00.000Z',
    ]);
    // And back in October: 26 October is CET again.
    const o = nextTickAfter(s, Date.parse('2026-10-20T00:00:00Z'))!;
    expect([iso(o), iso(nextTickAfter(s, o))]).toEqual(['2026-10-26T08:00:00.000Z', '2026-11-02T08:00:00.000Z']);
  });

  it('the scheduler fires a cron schedule at its tick, once, and moves to the next (after the DST change)', async () => {
    const { rt, clock } = setup();
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({
      cron: { expression: '0 9 * * 1', timezone: 'Europe/Paris' },
      message: 'weekly report',
      target: { sessionId: session.id },
    });
    expect(iso(s.nextFireAt)).toBe('2026-03-23T08:00:00.000Z');
    clock.set(Date.parse('2026-03-23T07:59:59Z'));
    expect(await rt.schedules.check()).toEqual([]);
    clock.set(Date.parse('2026-03-23T08:00:00.400Z'));
    const [fire] = await rt.schedules.check();
    expect(fire).toMatchObject({
      outcome: 'fired',
      tick: Date.parse('2026-03-23T08:00:00Z'),
      sessionId: session.id,
      reason: null,
    });
    expect(await rt.schedules.check()).toEqual([]);
    const after = await rt.schedules.get(s.id);
    expect(iso(after.nextFireAt)).toBe('2026-03-30T07:00:00.000Z');
    expect(after.lastRunId).toBe(fire!.runId);
    const run = await rt.runs.get(fire!.runId!);
    expect(run.status).toBe('queued');
  });

  it('an interval schedule fires every interval from its creation', async () => {
    const { rt, clock } = setup();
    const t0 = clock.now();
    const s = await rt.schedules.create({
      interval: { seconds: 60 },
      message: 'tick',
      target: { newSession: { title: 'ping' } },
    });
    expect(s.nextFireAt).toBe(t0 + 60_000);
    clock.advance(30_000);
    expect(await rt.schedules.check()).toHaveLength(0);
    clock.advance(30_000);
    expect((await rt.schedules.check()).map((f) => f.tick)).toEqual([t0 + 60_000]);
    clock.advance(1_000);
    expect(await rt.schedules.check()).toHaveLength(0);
    clock.advance(59_500);
    expect((await rt.schedules.check()).map((f) => f.tick)).toEqual([t0 + 120_000]);
    expect((await rt.schedules.fires(s.id)).map((f) => f.tick)).toEqual([t0 + 120_000, t0 + 60_000]);
  });
});

describe('schedules: a fire', () => {
  it('appends schedule/fired (schedule id, tick, run id) to the session, with the message and the run, in one transaction', async () => {
    const { rt, clock } = setup();
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({
      interval: { seconds: 10 },
      message: 'hello from the schedule',
      target: { sessionId: session.id },
    });
    clock.advance(10_000);
    const [fire] = await rt.schedules.check();
    const events = await rt.sessions.events(session.id);
    const fired = events.filter((e) => e.type === 'schedule/fired');
    expect(fired).toHaveLength(1);
    expect(fired[0]!.data).toEqual({ scheduleId: s.id, tick: fire!.tick, runId: fire!.runId });
    const message = events.find((e) => e.type === 'user/message');
    expect(message?.runId).toBe(fire!.runId);
    expect(JSON.stringify(message?.data)).toContain('hello from the schedule');
  });

  it('a new session per fire: each fire makes a session of the tenant, with the schedule in its metadata', async () => {
    const { rt, clock } = setup();
    const s = await rt.schedules.create({
      tenant: 'acme',
      name: 'digest',
      interval: { seconds: 10 },
      message: 'digest',
      target: { newSession: { metadata: { kind: 'digest' } } },
      overlap: 'skip',
    });
    clock.advance(10_000);
    const [a] = await rt.schedules.check();
    clock.advance(10_000);
    const [b] = await rt.schedules.check();
    // Overlap does not apply: the first run is still queued, the second fire makes its own session.
    expect(a!.outcome).toBe('fired');
    expect(b!.outcome).toBe('fired');
    expect(a!.sessionId).not.toBe(b!.sessionId);
    const session = await rt.sessions.get(b!.sessionId!);
    expect(session.tenant).toBe('acme');
    expect(session.metadata).toMatchObject({ kind: 'digest', scheduleId: s.id, scheduleTick: b!.tick });
    expect(session.title).toContain('digest @ ');
  });

  it('overlap skip: a tick while the previous fire’s run is active is recorded as skipped, with the run', async () => {
    const { rt, clock } = setup();
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({
      interval: { seconds: 60 },
      message: 'go',
      target: { sessionId: session.id },
      overlap: 'skip',
    });
    clock.advance(60_000);
    const [first] = await rt.schedules.check();
    clock.advance(60_000);
    const [second] = await rt.schedules.check();
    expect(second).toMatchObject({
      outcome: 'skipped',
      runId: null,
      reason: `run ${first!.runId} of the session is still active`,
    });
    expect(await rt.runs.list({ sessionId: session.id })).toHaveLength(1);
    expect((await rt.schedules.fires(s.id)).map((f) => f.outcome)).toEqual(['skipped', 'fired']);
    // Once the run ended, the next tick fires again.
    await rt.runs.cancel(first!.runId!);
    clock.advance(60_000);
    expect((await rt.schedules.check())[0]!.outcome).toBe('fired');
  });

  it('overlap enqueue: the message queues behind the active run', async () => {
    const { rt, clock } = setup();
    const session = await rt.sessions.create();
    await rt.schedules.create({
      interval: { seconds: 60 },
      message: 'go',
      target: { sessionId: session.id },
      overlap: 'enqueue',
    });
    clock.advance(60_000);
    const [first] = await rt.schedules.check();
    clock.advance(60_000);
    const [second] = await rt.schedules.check();
    expect(second).toMatchObject({ outcome: 'fired', reason: `queued behind run ${first!.runId}` });
    const queued = await rt.runs.get(second!.runId!);
    expect(queued.queuedBehind).toBe(true);
    expect((await rt.runs.get(first!.runId!)).status).toBe('queued');
  });

  it('overlap interrupt: the active run is cancelled and the new one starts', async () => {
    const { rt, clock } = setup();
    const session = await rt.sessions.create();
    await rt.schedules.create({
      interval: { seconds: 60 },
      message: 'go',
      target: { sessionId: session.id },
      overlap: 'interrupt',
    });
    clock.advance(60_000);
    const [first] = await rt.schedules.check();
    clock.advance(60_000);
    const [second] = await rt.schedules.check();
    expect(second).toMatchObject({ outcome: 'fired', reason: 'interrupted the active run' });
    expect((await rt.runs.get(first!.runId!)).status).toBe('cancelled');
    const next = await rt.runs.get(second!.runId!);
    expect(next.queuedBehind).toBe(false);
    expect((await rt.runs.active(session.id))?.id).toBe(next.id);
  });

  it('overlap interrupt with a run executing on a worker: its tool gets the abort, the run ends cancelled, the new run runs', async () => {
    const g = gated();
    const store = new SqliteStore({ path: ':memory:' });
    const clock = manualClock(Date.parse('2026-03-21T12:00:00Z'));
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'w1', name: 'work', input: {} }] },
      { text: 'second run done' },
    ]);
    const rt = createRuntime({
      store,
      agents: [defineAgent({ name: 'a', model, tools: [g.tool] })],
      clock,
      schedules: { checkEveryMs: 60_000 },
    });
    cleanups.push(() => store.close());
    cleanups.push(() => rt.close({ graceMs: 0 }));
    rt.startWorker({ pollMs: 20 });
    const session = await rt.sessions.create();
    await rt.schedules.create({
      interval: { seconds: 60 },
      message: 'go',
      target: { sessionId: session.id },
      overlap: 'interrupt',
    });
    clock.advance(60_000);
    const [first] = await rt.schedules.check();
    const signal = await g.started.promise;
    clock.advance(60_000);
    const [second] = await rt.schedules.check();
    expect(signal.aborted).toBe(true);
    expect(second).toMatchObject({ outcome: 'fired', reason: 'interrupted the active run' });
    expect((await rt.runs.get(first!.runId!)).status).toBe('cancelled');
    expect((await rt.runs.wait(second!.runId!, { until: 'terminal', timeoutMs: 5_000 })).status).toBe('completed');
  });

  it('a tick whose target session was archived is recorded as failed once, and the schedule pauses itself, saying why', async () => {
    const { rt, clock } = setup();
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({
      interval: { seconds: 60 },
      message: 'go',
      target: { sessionId: session.id },
    });
    await rt.sessions.archive(session.id);
    clock.advance(60_000);
    const [fire] = await rt.schedules.check();
    expect(fire).toMatchObject({ outcome: 'failed', runId: null });
    expect(fire!.reason).toMatch(/archived/);
    const paused = await rt.schedules.get(s.id);
    expect(paused).toMatchObject({
      pausedAt: clock.now(),
      nextFireAt: null,
      pausedReason: expect.stringMatching(/archived/),
    });
    // Not one failed fire per tick: nothing more fires.
    for (let i = 0; i < 5; i++) {
      clock.advance(60_000);
      expect(await rt.schedules.check()).toEqual([]);
    }
    expect(await rt.schedules.fires(s.id)).toHaveLength(1);
    // Resumed by a person (after the session is unarchived, say), it runs again and the reason goes.
    expect(await rt.schedules.resume(s.id)).toMatchObject({ pausedAt: null, pausedReason: null });
  });

  it('erasing its target session pauses the schedule at once, saying why; a paused schedule fires nothing', async () => {
    const { rt, clock } = setup();
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({
      interval: { seconds: 60 },
      message: 'go',
      target: { sessionId: session.id },
    });
    await rt.sessions.erase(session.id);
    expect(await rt.schedules.get(s.id)).toMatchObject({
      pausedAt: expect.any(Number),
      nextFireAt: null,
      pausedReason: expect.stringMatching(/erased/),
    });
    clock.advance(120_000);
    expect(await rt.schedules.check()).toEqual([]);
    expect(await rt.schedules.fires(s.id)).toEqual([]);
  });

  it("erasing a tenant's sessions stops its schedules (those that make new sessions too), not another tenant's", async () => {
    const { rt, clock } = setup();
    const mine = await rt.schedules.create({
      tenant: 't1',
      interval: { seconds: 60 },
      message: 'go',
      target: { newSession: { title: 'daily' } },
    });
    const other = await rt.schedules.create({
      tenant: 't2',
      interval: { seconds: 60 },
      message: 'go',
      target: { newSession: {} },
    });
    clock.advance(60_000);
    expect((await rt.schedules.check()).map((f) => f.scheduleId).sort()).toEqual([mine.id, other.id].sort());
    await rt.sessions.eraseTenant('t1');
    expect(await rt.schedules.get(mine.id)).toMatchObject({
      nextFireAt: null,
      pausedReason: expect.stringMatching(/tenant/),
    });
    expect((await rt.schedules.get(other.id)).pausedAt).toBeNull();
    clock.advance(60_000);
    expect((await rt.schedules.check()).map((f) => f.scheduleId)).toEqual([other.id]);
    // The session its fire made before is erased with the tenant's others.
    const t1 = await rt.sessions.list({ tenant: 't1', limit: 100, includeArchived: true });
    expect(t1.length > 0 && t1.every((x) => x.erasedAt !== null)).toBe(true);
  });
});

describe('schedules: downtime', () => {
  it('catch-up once: after hours down, only the latest missed tick fires, once; then the schedule goes on from now', async () => {
    const { rt, clock } = setup(Date.parse('2026-03-21T12:10:00Z'));
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({
      cron: { expression: '0 * * * *', timezone: 'UTC' },
      message: 'hourly',
      target: { sessionId: session.id },
      catchUp: 'once',
      overlap: 'enqueue',
    });
    clock.set(Date.parse('2026-03-21T17:30:00Z'));
    const fires = await rt.schedules.check();
    expect(fires.map((f) => iso(f.tick))).toEqual(['2026-03-21T17:00:00.000Z']);
    expect(fires[0]!.reason).toMatch(/caught up 1800 s late/);
    expect(await rt.schedules.check()).toEqual([]);
    expect(await rt.runs.list({ sessionId: session.id })).toHaveLength(1);
    expect(iso((await rt.schedules.get(s.id)).nextFireAt)).toBe('2026-03-21T18:00:00.000Z');
  });

  it('catch-up skip: after hours down, no missed tick fires; the next one does', async () => {
    const { rt, clock } = setup(Date.parse('2026-03-21T12:10:00Z'));
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({
      cron: { expression: '0 * * * *', timezone: 'UTC' },
      message: 'hourly',
      target: { sessionId: session.id },
      catchUp: 'skip',
    });
    clock.set(Date.parse('2026-03-21T17:30:00Z'));
    expect(await rt.schedules.check()).toEqual([]);
    expect(await rt.runs.list({ sessionId: session.id })).toHaveLength(0);
    expect(await rt.schedules.fires(s.id)).toEqual([]);
    expect(iso((await rt.schedules.get(s.id)).nextFireAt)).toBe('2026-03-21T18:00:00.000Z');
    clock.set(Date.parse('2026-03-21T18:00:01Z'));
    expect((await rt.schedules.check()).map((f) => iso(f.tick))).toEqual(['2026-03-21T18:00:00.000Z']);
  });

  it('a tick fired a little late (within the grace) fires whatever the catch-up policy', async () => {
    const { rt, clock } = setup(Date.parse('2026-03-21T12:10:00Z'));
    await rt.schedules.create({
      cron: { expression: '0 * * * *', timezone: 'UTC' },
      message: 'hourly',
      target: { newSession: {} },
      catchUp: 'skip',
    });
    clock.set(Date.parse('2026-03-21T13:00:05Z'));
    expect(await rt.schedules.check()).toHaveLength(1);
  });
});

describe('schedules: pause, resume, delete', () => {
  it('no tick fires while paused; resume goes on from now without catching up; delete removes it and its fires', async () => {
    const { rt, clock } = setup();
    const s = await rt.schedules.create({ interval: { seconds: 60 }, message: 'go', target: { newSession: {} } });
    const paused = await rt.schedules.pause(s.id);
    expect(paused.pausedAt).toBe(clock.now());
    expect(paused.nextFireAt).toBeNull();
    expect((await rt.schedules.pause(s.id)).pausedAt).toBe(paused.pausedAt);
    clock.advance(600_000);
    expect(await rt.schedules.check()).toEqual([]);
    const resumed = await rt.schedules.resume(s.id);
    expect(resumed.pausedAt).toBeNull();
    expect(resumed.nextFireAt).toBeGreaterThan(clock.now());
    expect(resumed.nextFireAt! - clock.now()).toBeLessThanOrEqual(60_000);
    expect(await rt.schedules.check()).toEqual([]);
    clock.advance(60_000);
    expect(await rt.schedules.check()).toHaveLength(1);
    expect(await rt.schedules.list()).toHaveLength(1);
    await rt.schedules.delete(s.id);
    expect((await thrown(rt.schedules.get(s.id))).code).toBe('not_found');
    expect((await thrown(rt.schedules.fires(s.id))).code).toBe('not_found');
    expect((await thrown(rt.schedules.delete(s.id))).code).toBe('not_found');
    expect(await rt.schedules.list()).toEqual([]);
  });

  it('lists by tenant, paged by id', async () => {
    const { rt } = setup();
    for (let i = 0; i < 3; i++)
      await rt.schedules.create({ tenant: 't1', interval: { seconds: 60 }, message: 'go', target: { newSession: {} } });
    await rt.schedules.create({ tenant: 't2', interval: { seconds: 60 }, message: 'go', target: { newSession: {} } });
    const page1 = await rt.schedules.list({ tenant: 't1', limit: 2 });
    const page2 = await rt.schedules.list({ tenant: 't1', limit: 2, after: page1.at(-1)!.id });
    expect(page1).toHaveLength(2);
    expect(page2).toHaveLength(1);
    expect([...page1, ...page2].every((s) => s.tenant === 't1')).toBe(true);
  });
});

describe('schedules: bad input', () => {
  it('refuses each with a clear error naming the field', async () => {
    const { rt } = setup();
    const session = await rt.sessions.create();
    const target = { sessionId: session.id };
    const bad = async (input: Record<string, unknown>) =>
      thrown(rt.schedules.create({ message: 'x', target, ...input } as never));
    const cron = await bad({ cron: { expression: '61 * * * *', timezone: 'UTC' } });
    expect(cron).toBeInstanceOf(ScheduleValidationError);
    expect(cron.field).toBe('cron.expression');
    expect(cron.message).toMatch(/Invalid value for minute: 61/);
    expect((await bad({ cron: { expression: '* * *', timezone: 'UTC' } })).message).toMatch(/five, six, or seven/);
    const tz = await bad({ cron: { expression: '0 9 * * 1', timezone: 'Mars/Olympus' } });
    expect([tz.field, tz.message]).toEqual([
      'cron.timezone',
      'cron.timezone: unknown time zone "Mars/Olympus" (an IANA name, e.g. Europe/Paris)',
    ]);
    expect((await bad({ interval: { seconds: 0 } })).field).toBe('interval.seconds');
    expect((await bad({ interval: { seconds: 1.5 } })).field).toBe('interval.seconds');
    expect((await bad({ interval: { seconds: 10 }, cron: { expression: '* * * * *' } })).message).toMatch(
      /exactly one of cron and interval/,
    );
    expect((await bad({})).message).toMatch(/exactly one of cron and interval/);
    expect((await bad({ interval: { seconds: 10 }, agent: 'nobody' })).code).toBe('unknown_agent');
    expect((await bad({ interval: { seconds: 10 }, target: { sessionId: 'nope' } })).field).toBe('target.session_id');
    expect((await bad({ interval: { seconds: 10 }, target: {} })).field).toBe('target');
    expect((await bad({ interval: { seconds: 10 }, overlap: 'sometimes' })).field).toBe('overlap');
    expect((await bad({ interval: { seconds: 10 }, catchUp: 'all' })).field).toBe('catch_up');
    expect((await bad({ interval: { seconds: 10 }, message: '' })).field).toBe('message');
    // Content parts that no user message may hold: refused now, not at every fire.
    const parts = await bad({ interval: { seconds: 10 }, message: [{ type: 'text', text: 1 }] });
    expect([parts.field, parts.code]).toEqual(['message', 'validation']);
    expect(parts.message).toMatch(/^message: /);
    // Another tenant's session is no session.
    expect((await bad({ tenant: 'other', interval: { seconds: 10 } })).field).toBe('target.session_id');
  });
});

describe('schedules: several workers', () => {
  it('two processes on one SQLite file racing for the same ticks: one fire and one run per tick', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-schedules-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keel.db');
    const a = setup(Date.parse('2026-03-21T12:00:00Z'), new SqliteStore({ path, busyTimeoutMs: 60_000 }));
    const child = spawn(process.execPath, [CHECKER, path], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    cleanups.push(() => {
      child.kill();
    });
    const next = () =>
      new Promise<CheckerMessage>((resolve, reject) => {
        child.once('message', (m: CheckerMessage) => (m.type === 'error' ? reject(new Error(m.error)) : resolve(m)));
        child.once('exit', (code) => reject(new Error(`the checker exited with ${code}`)));
      });
    expect((await next()).type).toBe('ready');
    const session = await a.rt.sessions.create();
    const newSessions = await a.rt.schedules.create({
      interval: { seconds: 10 },
      message: 'n',
      target: { newSession: {} },
    });
    const one = await a.rt.schedules.create({
      interval: { seconds: 10 },
      message: 'o',
      target: { sessionId: session.id },
      overlap: 'enqueue',
    });
    for (let round = 0; round < 5; round++) {
      a.clock.advance(10_000);
      const theirs = next();
      child.send({ type: 'check', now: a.clock.now() });
      const [mine, other] = await Promise.all([a.rt.schedules.check(), theirs]);
      expect(mine.length + (other.type === 'checked' ? other.fires : 0)).toBe(2);
    }
    child.send({ type: 'exit' });
    for (const s of [newSessions, one]) {
      const fires = await a.rt.schedules.fires(s.id);
      expect(fires).toHaveLength(5);
      expect(new Set(fires.map((f) => f.tick)).size).toBe(5);
      expect(new Set(fires.map((f) => f.runId)).size).toBe(5);
    }
    expect(await a.rt.runs.list({ sessionId: session.id })).toHaveLength(5);
  });

  it('a fire whose tick another worker recorded first is refused by UNIQUE (schedule, tick): its session, run and event roll back', async () => {
    const { rt, clock, store } = setup();
    const s = await rt.schedules.create({ interval: { seconds: 60 }, message: 'go', target: { newSession: {} } });
    const other = await rt.sessions.create();
    // As if another worker had fired this tick, and this one had read the schedule before it committed.
    expect(
      await store.schedules.addFire({
        scheduleId: s.id,
        tick: s.nextFireAt!,
        firedAt: s.nextFireAt!,
        outcome: 'fired',
        reason: null,
        runId: 'theirs',
        sessionId: other.id,
      }),
    ).toBe(true);
    clock.advance(60_000);
    expect(await rt.schedules.check()).toEqual([]);
    expect(await rt.sessions.list({ limit: 10 })).toHaveLength(1);
    expect(await rt.runs.list()).toHaveLength(0);
    expect((await rt.schedules.fires(s.id)).map((f) => f.runId)).toEqual(['theirs']);
    expect((await rt.schedules.get(s.id)).nextFireAt).toBe(clock.now() + 60_000);
  });

  it('a runtime with a worker fires on its own (its scheduler loop) and the run completes', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const clock = manualClock(Date.parse('2026-03-21T12:00:00Z'));
    const rt = createRuntime({ store, agents: [agent()], clock, schedules: { checkEveryMs: 20 } });
    cleanups.push(() => store.close());
    cleanups.push(() => rt.close({ graceMs: 0 }));
    rt.startWorker({ pollMs: 20 });
    const session = await rt.sessions.create();
    const s = await rt.schedules.create({ interval: { seconds: 5 }, message: 'go', target: { sessionId: session.id } });
    clock.advance(5_000);
    let fires = await rt.schedules.fires(s.id);
    for (let i = 0; i < 100 && fires.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      fires = await rt.schedules.fires(s.id);
    }
    expect(fires).toHaveLength(1);
    const run = await rt.runs.wait(fires[0]!.runId!, { until: 'terminal', timeoutMs: 5_000 });
    expect(run.status).toBe('completed');
  });
});

describe('the scheduler and the webhook dispatcher after their store closed', () => {
  it('stop by themselves, without a warning a second, when the store is closed before the runtime', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const rt = createRuntime({
      store,
      agents: [defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'ok' }]) })],
      schedules: { checkEveryMs: 10 },
      webhooks: { pollMs: 10 },
    });
    rt.startWorker({ pollMs: 10 });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      await store.close();
      await new Promise((r) => setTimeout(r, 150));
      expect(warnings.filter((m) => /keel scheduler/.test(m))).toEqual([]);
      // Both loops have ended: stopping them now returns at once.
      await rt.schedules.stop();
      await rt.webhooks.stopDispatcher();
    } finally {
      process.off('warning', onWarning);
      await rt.close({ graceMs: 0 }).catch(() => {});
    }
  });
});
