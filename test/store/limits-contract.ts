/**
 * Provider flow control's part of the storage contract (src/store/port/limits.ts,
 * docs/flow-control.md): concurrency slots leased with an expiry, a sliding window of requests
 * and tokens (reserved, then settled), a pause for everyone, and waiters keeping their place
 * (priority, then arrival) across instances. Every backend passes it.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LimitAcquire, Store } from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';
import { decideLimit } from '../../src/flow-control/decide-limit.ts';

const T0 = 1_700_000_000_000;

export function limitsContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`limits store contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;
    let other: Store;
    let key: string;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
      other = opened.another ? await opened.another() : store;
      key = `test:${randomUUID()}`;
    });
    afterEach(async () => {
      await opened.cleanup();
    });

    const req = (o: Partial<LimitAcquire> = {}): LimitAcquire => ({
      key,
      id: randomUUID(),
      waiter: randomUUID(),
      rank: 0,
      since: T0,
      now: T0,
      tokens: 10,
      windowMs: 60_000,
      slotLeaseMs: 30_000,
      waiterLeaseMs: 1000,
      ...o,
    });

    it('holds a concurrency limit across instances, at once too, and frees a released slot', async () => {
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          (i % 2 ? other : store).limits.acquire(req({ concurrency: 5, waiter: `w${i}` }), decideLimit),
        ),
      );
      expect(results.filter((r) => r.granted)).toHaveLength(5);
      const refused = results.find((r) => !r.granted);
      expect(refused).toMatchObject({ granted: false });
      const a = req({ concurrency: 1 });
      const k2 = `test:${randomUUID()}`;
      expect(await store.limits.acquire({ ...a, key: k2 }, decideLimit)).toEqual({ granted: true });
      expect(await other.limits.acquire(req({ key: k2, concurrency: 1 }), decideLimit)).toMatchObject({
        granted: false,
        reason: 'concurrency',
      });
      await store.limits.release(k2, a.id);
      expect(await other.limits.acquire(req({ key: k2, concurrency: 1, now: T0 + 1 }), decideLimit)).toEqual({
        granted: true,
      });
    });

    it("frees a crashed holder's slot when its lease is over; a renewed lease holds", async () => {
      const a = req({ concurrency: 1, slotLeaseMs: 1000 });
      expect(await store.limits.acquire(a, decideLimit)).toEqual({ granted: true });
      expect(await other.limits.acquire(req({ concurrency: 1, now: T0 + 999 }), decideLimit)).toMatchObject({
        granted: false,
        reason: 'concurrency',
      });
      expect(await store.limits.renew(key, a.id, T0 + 2000)).toBe(true);
      expect(await other.limits.acquire(req({ concurrency: 1, now: T0 + 1500 }), decideLimit)).toMatchObject({
        granted: false,
        reason: 'concurrency',
      });
      // The holder died: nothing renews it; after its lease the slot is free.
      expect(await other.limits.acquire(req({ concurrency: 1, now: T0 + 2000 }), decideLimit)).toEqual({
        granted: true,
      });
      expect(await store.limits.renew(key, a.id, T0 + 5000)).toBe(false);
    });

    it('counts requests in a sliding window and says when the next one fits', async () => {
      for (let i = 0; i < 3; i++)
        expect(
          await (i % 2 ? other : store).limits.acquire(req({ requestsPerWindow: 3, now: T0 + i * 100 }), decideLimit),
        ).toEqual({
          granted: true,
        });
      expect(await store.limits.acquire(req({ requestsPerWindow: 3, now: T0 + 500 }), decideLimit)).toEqual({
        granted: false,
        reason: 'requests',
        retryAt: T0 + 60_000,
      });
      expect(await other.limits.acquire(req({ requestsPerWindow: 3, now: T0 + 60_000 }), decideLimit)).toEqual({
        granted: true,
      });
      expect(await other.limits.acquire(req({ requestsPerWindow: 3, now: T0 + 60_050 }), decideLimit)).toMatchObject({
        granted: false,
        retryAt: T0 + 60_100,
      });
      expect((await store.limits.state(key, T0 + 60_050)).requests).toBe(3);
    });

    it('reserves tokens, settles them with the actual usage, and clamps a reservation larger than the limit', async () => {
      const a = req({ tokensPerWindow: 100, tokens: 60 });
      expect(await store.limits.acquire(a, decideLimit)).toEqual({ granted: true });
      expect(await other.limits.acquire(req({ tokensPerWindow: 100, tokens: 60 }), decideLimit)).toMatchObject({
        granted: false,
        reason: 'tokens',
        retryAt: T0 + 60_000,
      });
      await store.limits.settle(key, a.id, 20);
      expect(await other.limits.acquire(req({ tokensPerWindow: 100, tokens: 60 }), decideLimit)).toEqual({
        granted: true,
      });
      expect((await store.limits.state(key, T0)).tokens).toBe(80);
      const k2 = `test:${randomUUID()}`;
      expect(await store.limits.acquire(req({ key: k2, tokensPerWindow: 100, tokens: 5000 }), decideLimit)).toEqual({
        granted: true,
      });
      expect((await store.limits.state(k2, T0)).tokens).toBe(100);
    });

    it('a pause holds for every instance and is never shortened', async () => {
      await store.limits.pause(key, T0 + 5000);
      await other.limits.pause(key, T0 + 2000);
      expect(await other.limits.acquire(req({ concurrency: 10, now: T0 + 1000 }), decideLimit)).toEqual({
        granted: false,
        reason: 'paused',
        retryAt: T0 + 5000,
      });
      expect((await other.limits.state(key, T0)).pausedUntil).toBe(T0 + 5000);
      expect(await store.limits.acquire(req({ concurrency: 10, now: T0 + 5000 }), decideLimit)).toEqual({
        granted: true,
      });
    });

    it('a waiter keeps its place across instances: priority first, then arrival; an expired or withdrawn place is no longer held', async () => {
      const holder = req({ concurrency: 1 });
      expect(await store.limits.acquire(holder, decideLimit)).toEqual({ granted: true });
      // A batch waiter (since T0+10), then an interactive one (since T0+20), both refused for now.
      expect(
        await store.limits.acquire(
          req({ concurrency: 1, waiter: 'batch', rank: 100, since: T0 + 10, now: T0 + 10 }),
          decideLimit,
        ),
      ).toMatchObject({ reason: 'concurrency' });
      expect(
        await other.limits.acquire(
          req({ concurrency: 1, waiter: 'inter', rank: 0, since: T0 + 20, now: T0 + 20 }),
          decideLimit,
        ),
      ).toMatchObject({ reason: 'concurrency' });
      await store.limits.release(key, holder.id);
      // The slot is free, but the batch waiter is behind the interactive one.
      expect(
        await store.limits.acquire(
          req({ concurrency: 1, waiter: 'batch', rank: 100, since: T0 + 10, now: T0 + 30 }),
          decideLimit,
        ),
      ).toMatchObject({ granted: false, reason: 'queued' });
      // A newcomer of the same rank is behind too.
      expect(
        await store.limits.acquire(
          req({ concurrency: 1, waiter: 'late', rank: 0, since: T0 + 30, now: T0 + 30 }),
          decideLimit,
        ),
      ).toMatchObject({ granted: false, reason: 'queued' });
      const inter = req({ concurrency: 1, waiter: 'inter', rank: 0, since: T0 + 20, now: T0 + 40 });
      expect(await other.limits.acquire(inter, decideLimit)).toEqual({ granted: true });
      await other.limits.release(key, inter.id);
      // The late one withdraws; the batch one is next.
      await store.limits.leaveQueue(key, 'late');
      expect(
        await store.limits.acquire(
          req({ concurrency: 1, waiter: 'batch', rank: 100, since: T0 + 10, now: T0 + 50 }),
          decideLimit,
        ),
      ).toEqual({ granted: true });
      // A waiter that stopped renewing its place (its process died) is passed after its lease.
      const k2 = `test:${randomUUID()}`;
      const h2 = req({ key: k2, concurrency: 1 });
      await store.limits.acquire(h2, decideLimit);
      await store.limits.acquire(
        req({ key: k2, concurrency: 1, waiter: 'dead', since: T0, now: T0 + 10 }),
        decideLimit,
      );
      await store.limits.release(k2, h2.id);
      expect(
        await other.limits.acquire(
          req({ key: k2, concurrency: 1, waiter: 'alive', since: T0 + 100, now: T0 + 500 }),
          decideLimit,
        ),
      ).toMatchObject({ reason: 'queued' });
      expect(
        await other.limits.acquire(
          req({ key: k2, concurrency: 1, waiter: 'alive', since: T0 + 100, now: T0 + 1010 }),
          decideLimit,
        ),
      ).toEqual({ granted: true });
    });
  });
}
