/**
 * The schedules part of the storage contract (ADR-0016): every backend of the port must pass it.
 * Schedule rows (create, get, list by tenant with a cursor, patch, delete with their fires), due
 * schedules from `next_fire_at` (paused ones never), and fires unique per (schedule, tick): a
 * second fire of one tick writes nothing, also from another store instance, also inside a
 * transaction (which stays usable), and one rolled back leaves the tick free.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError, type ScheduleFireRecord, type ScheduleRecord, type Store } from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';

const T0 = 1_700_000_000_000;

export function schedulesContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`schedules contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });
    afterEach(async () => {
      await opened.cleanup();
    });

    const schedule = (o: Partial<ScheduleRecord> = {}): ScheduleRecord => ({
      id: randomUUID(),
      tenant: 't1',
      name: 'daily',
      cron: { expression: '0 9 * * 1', timezone: 'Europe/Paris' },
      intervalSeconds: null,
      message: [{ type: 'text', text: 'hello' }],
      target: { newSession: { title: 'x', metadata: { a: 1 } } },
      agent: 'a@1',
      overlap: 'enqueue',
      catchUp: 'once',
      pausedAt: null,
      pausedReason: null,
      nextFireAt: T0 + 1000,
      lastTick: null,
      lastRunId: null,
      createdAt: T0,
      updatedAt: T0,
      ...o,
    });
    const fire = (scheduleId: string, tick: number, o: Partial<ScheduleFireRecord> = {}): ScheduleFireRecord => ({
      scheduleId,
      tick,
      firedAt: tick + 5,
      outcome: 'fired',
      reason: null,
      runId: randomUUID(),
      sessionId: randomUUID(),
      ...o,
    });

    it('creates, reads back every field, refuses a second with the same id', async () => {
      const s = schedule();
      expect(await store.schedules.create(s)).toEqual(s);
      expect(await store.schedules.get(s.id)).toEqual(s);
      const i = schedule({
        cron: null,
        intervalSeconds: 90,
        target: { sessionId: 'sess' },
        agent: null,
        name: null,
        message: 'text',
      });
      expect(await store.schedules.create(i)).toEqual(i);
      await expect(store.schedules.create(s)).rejects.toMatchObject({ code: 'conflict' });
      expect(await store.schedules.get('nope')).toBeUndefined();
    });

    it('lists by tenant in id order, after a cursor', async () => {
      const ids = [];
      for (let k = 0; k < 3; k++) ids.push((await store.schedules.create(schedule())).id);
      await store.schedules.create(schedule({ tenant: 't2' }));
      ids.sort();
      expect((await store.schedules.list({ tenant: 't1', limit: 10 })).map((s) => s.id)).toEqual(ids);
      expect((await store.schedules.list({ tenant: 't1', limit: 1, after: ids[0]! })).map((s) => s.id)).toEqual([
        ids[1],
      ]);
      expect(await store.schedules.list({ limit: 10 })).toHaveLength(4);
    });

    it('patches, and says when there is no such schedule', async () => {
      const s = await store.schedules.create(schedule());
      const p = await store.schedules.update(s.id, {
        pausedAt: T0 + 5,
        pausedReason: 'why',
        nextFireAt: null,
        lastTick: T0,
        lastRunId: 'r1',
        updatedAt: T0 + 5,
      });
      expect(p).toMatchObject({
        pausedAt: T0 + 5,
        pausedReason: 'why',
        nextFireAt: null,
        lastTick: T0,
        lastRunId: 'r1',
        updatedAt: T0 + 5,
        name: 'daily',
      });
      await expect(store.schedules.update('nope', { updatedAt: 1 })).rejects.toMatchObject({ code: 'not_found' });
    });

    it('due schedules: next fire at or before now, earliest first, never paused ones, at most limit', async () => {
      const late = await store.schedules.create(schedule({ nextFireAt: T0 + 300 }));
      const early = await store.schedules.create(schedule({ nextFireAt: T0 + 100 }));
      await store.schedules.create(schedule({ nextFireAt: T0 + 100, pausedAt: T0 }));
      await store.schedules.create(schedule({ nextFireAt: null }));
      await store.schedules.create(schedule({ nextFireAt: T0 + 301 }));
      expect((await store.schedules.due(T0 + 300, 10)).map((s) => s.id)).toEqual([early.id, late.id]);
      expect((await store.schedules.due(T0 + 300, 1)).map((s) => s.id)).toEqual([early.id]);
      expect(await store.schedules.due(T0 + 99, 10)).toEqual([]);
    });

    it('one fire per (schedule, tick): a second writes nothing, from this instance or another', async () => {
      const s = await store.schedules.create(schedule());
      const first = fire(s.id, T0);
      expect(await store.schedules.addFire(first)).toBe(true);
      expect(await store.schedules.addFire(fire(s.id, T0, { outcome: 'skipped', runId: null }))).toBe(false);
      const other = opened.another ? await opened.another() : store;
      expect(await other.schedules.addFire(fire(s.id, T0))).toBe(false);
      expect(
        await store.schedules.addFire(fire(s.id, T0 + 1000, { outcome: 'skipped', reason: 'busy', runId: null })),
      ).toBe(true);
      const fires = await other.schedules.listFires(s.id, { limit: 10 });
      expect(fires.map((f) => f.tick)).toEqual([T0 + 1000, T0]);
      expect(fires[1]).toEqual(first);
      expect((await store.schedules.listFires(s.id, { limit: 10, before: T0 + 1000 })).map((f) => f.tick)).toEqual([
        T0,
      ]);
    });

    it('inside a transaction: a taken tick answers false and the transaction goes on; a rolled back fire leaves the tick free', async () => {
      const s = await store.schedules.create(schedule());
      await store.schedules.addFire(fire(s.id, T0));
      const r = await store.transaction(async (tx) => {
        const taken = await tx.schedules.addFire(fire(s.id, T0));
        await tx.schedules.update(s.id, { lastTick: T0 });
        return taken;
      });
      expect(r).toBe(false);
      expect((await store.schedules.get(s.id))!.lastTick).toBe(T0);
      await expect(
        store.transaction(async (tx) => {
          expect(await tx.schedules.addFire(fire(s.id, T0 + 1000))).toBe(true);
          throw new StoreError('test', 'roll back');
        }),
      ).rejects.toThrow('roll back');
      expect(await store.schedules.addFire(fire(s.id, T0 + 1000))).toBe(true);
    });

    it('concurrent fires of one tick from two instances: exactly one is recorded', async () => {
      const s = await store.schedules.create(schedule());
      const other = opened.another ? await opened.another() : store;
      const attempt = (on: typeof store) => on.transaction(async (tx) => tx.schedules.addFire(fire(s.id, T0 + 7)));
      // Two SQLite instances in one process cannot race: a transaction that awaits holds the write
      // lock while the other's BEGIN blocks the event loop it needs (the race between processes is
      // in test/runs/schedules.test.ts). There, each instance races with itself, one after the other.
      const results =
        store.kind === 'sqlite'
          ? [
              ...(await Promise.all([1, 2, 3].map(() => attempt(store)))),
              ...(await Promise.all([1, 2, 3].map(() => attempt(other)))),
            ]
          : await Promise.all(Array.from({ length: 6 }, (_, k) => attempt(k % 2 ? other : store)));
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await store.schedules.listFires(s.id, { limit: 10 })).toHaveLength(1);
    });

    it('deletes a schedule with its fires', async () => {
      const s = await store.schedules.create(schedule());
      await store.schedules.addFire(fire(s.id, T0));
      expect(await store.schedules.delete(s.id)).toBe(true);
      expect(await store.schedules.get(s.id)).toBeUndefined();
      expect(await store.schedules.listFires(s.id, { limit: 10 })).toEqual([]);
      expect(await store.schedules.delete(s.id)).toBe(false);
    });
  });
}
