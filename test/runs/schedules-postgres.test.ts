/**
 * Schedules on PostgreSQL with two nodes (two store instances on one schema, as two machines):
 * checks racing for the same ticks fire each tick once, with one run (ADR-0016: due schedules
 * claimed FOR UPDATE SKIP LOCKED, fires unique per (schedule, tick), committed with their runs).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, defineAgent, ScriptedModel, type Runtime } from '../../src/index.ts';
import { manualClock } from '../../src/core/clock.ts';
import { openTestPostgres } from '../support/postgres.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const agent = () => defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'done' }], { loop: true }) });

describe('schedules on postgres: two nodes', () => {
  it('racing checks fire each tick once, with one run, whatever the overlap', async () => {
    const db = await openTestPostgres();
    cleanups.push(db.cleanup);
    const clock = manualClock(Date.parse('2026-03-21T12:00:00Z'));
    const nodes: Runtime[] = [db.store, await db.another(), await db.another()].map((store) =>
      createRuntime({ store, agents: [agent()], clock }),
    );
    for (const rt of nodes) cleanups.push(() => rt.close({ graceMs: 0 }));
    const [a] = nodes as [Runtime];
    const session = await a.sessions.create();
    const schedules = [
      await a.schedules.create({ interval: { seconds: 10 }, message: 'n', target: { newSession: {} } }),
      await a.schedules.create({
        interval: { seconds: 10 },
        message: 'e',
        target: { sessionId: session.id },
        overlap: 'enqueue',
      }),
      await a.schedules.create({
        cron: { expression: '*/10 * * * * *', timezone: 'UTC' },
        message: 'c',
        target: { newSession: {} },
      }),
    ];
    for (let round = 0; round < 6; round++) {
      clock.advance(10_000);
      const results = await Promise.all(nodes.map((rt) => rt.schedules.check()));
      expect(results.flat().filter((f) => f.outcome === 'fired')).toHaveLength(3);
    }
    for (const s of schedules) {
      const fires = await a.schedules.fires(s.id);
      expect(fires).toHaveLength(6);
      expect(new Set(fires.map((f) => f.tick)).size).toBe(6);
      expect(new Set(fires.map((f) => f.runId)).size).toBe(6);
    }
    expect(await a.runs.list({ sessionId: session.id })).toHaveLength(6);
    const fired = (await a.sessions.events(session.id)).filter((e) => e.type === 'schedule/fired');
    expect(fired).toHaveLength(6);
  });

  it('overlap skip across nodes: one skipped fire per tick, never two runs', async () => {
    const db = await openTestPostgres();
    cleanups.push(db.cleanup);
    const clock = manualClock(Date.parse('2026-03-21T12:00:00Z'));
    const nodes: Runtime[] = [db.store, await db.another()].map((store) =>
      createRuntime({ store, agents: [agent()], clock }),
    );
    for (const rt of nodes) cleanups.push(() => rt.close({ graceMs: 0 }));
    const [a] = nodes as [Runtime];
    const session = await a.sessions.create();
    const s = await a.schedules.create({
      interval: { seconds: 10 },
      message: 's',
      target: { sessionId: session.id },
      overlap: 'skip',
    });
    for (let round = 0; round < 4; round++) {
      clock.advance(10_000);
      await Promise.all(nodes.map((rt) => rt.schedules.check()));
    }
    expect((await a.schedules.fires(s.id)).map((f) => f.outcome)).toEqual(['skipped', 'skipped', 'skipped', 'fired']);
    expect(await a.runs.list({ sessionId: session.id })).toHaveLength(1);
  });
});
