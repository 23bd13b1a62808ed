/**
 * An erasure and a schedule's tick recorded at the same time, on PostgreSQL. A tick skipped because
 * the session had a run still active records its fire row without touching the session's row; the
 * tick's transaction holds the schedule's row (FOR UPDATE SKIP LOCKED when it took it). An erasure
 * that deleted the session's fire rows before it paused that schedule waited for the tick's
 * commit and left its fire row behind (found by the chaos test). It now pauses the schedule first,
 * so it waits for that commit before it deletes the fire rows.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ScheduleRecord } from '../../src/store/index.ts';
import { openTestPostgres } from '../support/postgres.ts';

const T0 = 1_700_000_000_000;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('PostgreSQL: an erasure racing a schedule tick of its session', () => {
  it('leaves no fire row of the erased session when the tick commits while the erasure runs', async () => {
    const { store, cleanup } = await openTestPostgres({ poolSize: 6 });
    cleanups.push(cleanup);
    await store.sessions.create({ id: 'target', createdAt: T0 });
    const schedule: ScheduleRecord = {
      id: 'sched',
      tenant: 'default',
      name: 'every minute',
      cron: null,
      intervalSeconds: 60,
      message: [{ type: 'text', text: 'hello' }],
      target: { sessionId: 'target' },
      agent: null,
      overlap: 'skip',
      catchUp: 'once',
      pausedAt: null,
      pausedReason: null,
      nextFireAt: T0 + 1000,
      lastTick: null,
      lastRunId: null,
      createdAt: T0,
      updatedAt: T0,
    };
    await store.schedules.create(schedule);

    let commitTick!: () => void;
    const held = new Promise<void>((r) => (commitTick = r));
    let tickTaken!: () => void;
    const taken = new Promise<void>((r) => (tickTaken = r));
    // The tick's transaction, as a fire that found a run still active records it (fire-schedule.ts).
    const tick = store.transaction(async (tx) => {
      const [due] = await tx.schedules.due(T0 + 2000, 1);
      expect(due?.id).toBe('sched');
      await tx.schedules.addFire({
        scheduleId: 'sched',
        tick: T0 + 1000,
        firedAt: T0 + 2000,
        outcome: 'skipped',
        reason: 'a run of the session is still active',
        runId: null,
        sessionId: 'target',
      });
      await tx.schedules.update('sched', { nextFireAt: T0 + 61_000, lastTick: T0 + 1000, updatedAt: T0 + 2000 });
      tickTaken();
      await held;
    });
    await taken;
    const erased = store.sessions.erase('target', T0 + 3000);
    // The erasure gets as far as it can while the tick's transaction is open.
    await new Promise((r) => setTimeout(r, 300));
    commitTick();
    await tick;
    await erased;

    expect(await store.schedules.listFires('sched', { limit: 10 })).toEqual([]);
    const paused = await store.schedules.get('sched');
    expect(paused?.pausedAt).toBe(T0 + 3000);
    expect(paused?.nextFireAt).toBeNull();
  });
});
