/**
 * Tenant quotas' part of the storage contract (src/store/port/quotas.ts, ADR-0043): a ledger of
 * model calls charged to scopes over UTC days and months, reserved then settled, a call reserved
 * again replacing its own rows, and reservations from two instances at once never overshooting a
 * budget. Every backend passes it.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { QuotaReservation, Store } from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';

const DAY0 = Date.UTC(2026, 11, 5);
const MONTH0 = Date.UTC(2026, 11, 1);

export function quotasContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`quotas store contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;
    let other: Store;
    let scope: string;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
      other = opened.another ? await opened.another() : store;
      scope = `tenant:${randomUUID()}`;
    });
    afterEach(async () => {
      await opened.cleanup();
    });

    const call = (callId: string, o: Partial<QuotaReservation> = {}): QuotaReservation => ({
      callId,
      runId: callId.split(':')[0]!,
      scopes: [{ scope, budget: { tokensPerDay: 1000, costPerDay: 1, costPerMonth: 2 } }],
      tokens: 300,
      cost: 0.25,
      day: DAY0,
      month: MONTH0,
      now: DAY0 + 1000,
      ...o,
    });

    it('reserves within every budget and refuses the call that does not fit, saying which limit and what is charged', async () => {
      expect(await store.quotas.reserve(call('a:0:1'))).toEqual({ granted: true });
      expect(await store.quotas.reserve(call('b:0:1'))).toEqual({ granted: true });
      expect(await store.quotas.reserve(call('c:0:1'))).toEqual({ granted: true });
      expect(await store.quotas.reserve(call('d:0:1'))).toEqual({
        granted: false,
        scope,
        limit: 'tokensPerDay',
        max: 1000,
        usage: { used: 0, reserved: 900 },
      });
      expect(await store.quotas.usage(scope, DAY0, MONTH0)).toEqual({
        tokensDay: { used: 0, reserved: 900 },
        costDay: { used: 0, reserved: 0.75 },
        costMonth: { used: 0, reserved: 0.75 },
      });
      // Settled below the estimate: the budget frees what the estimate held too much.
      await store.quotas.settle('a:0:1', 100, 0.1);
      expect(await store.quotas.reserve(call('d:0:1'))).toEqual({ granted: true });
      expect((await store.quotas.usage(scope, DAY0, MONTH0)).tokensDay).toEqual({ used: 100, reserved: 900 });
    });

    it('a call reserved again replaces its own rows (a retry, a recovery), and release leaves a settled call alone', async () => {
      for (let i = 0; i < 5; i++)
        expect(await store.quotas.reserve(call('a:0:1', { tokens: 900 }))).toEqual({ granted: true });
      expect((await store.quotas.usage(scope, DAY0, MONTH0)).tokensDay).toEqual({ used: 0, reserved: 900 });
      await store.quotas.settle('a:0:1', 120, 0.2);
      await store.quotas.release('a:0:1');
      expect(await store.quotas.usage(scope, DAY0, MONTH0)).toMatchObject({ tokensDay: { used: 120, reserved: 0 } });
      await store.quotas.reserve(call('b:0:1'));
      await store.quotas.release('b:0:1');
      expect((await store.quotas.usage(scope, DAY0, MONTH0)).tokensDay).toEqual({ used: 120, reserved: 0 });
      // Settling or releasing a call the ledger does not have does nothing.
      await store.quotas.settle('nope:0:1', 5, 5);
      await store.quotas.release('nope:0:1');
      expect((await store.quotas.usage(scope, DAY0, MONTH0)).tokensDay).toEqual({ used: 120, reserved: 0 });
    });

    it('counts a day in its day and cost in its month; an estimate above a whole limit fits in an empty period', async () => {
      const next = { day: DAY0 + 86_400_000, now: DAY0 + 86_401_000 };
      expect(await store.quotas.reserve(call('a:0:1', { tokens: 5000, cost: 0.5 }))).toEqual({ granted: true });
      await store.quotas.settle('a:0:1', 1000, 0.9);
      expect(await store.quotas.reserve(call('b:0:1', { tokens: 1 }))).toMatchObject({
        granted: false,
        limit: 'tokensPerDay',
      });
      // The next day: tokens and the day's cost start again, the month's cost goes on.
      expect(await store.quotas.reserve(call('b:0:1', { ...next, cost: 0.9 }))).toEqual({ granted: true });
      await store.quotas.settle('b:0:1', 10, 0.9);
      const dayRoom = [{ scope, budget: { tokensPerDay: 1000, costPerDay: 5, costPerMonth: 2 } }];
      expect(await store.quotas.reserve(call('c:0:1', { ...next, cost: 0.5, scopes: dayRoom }))).toMatchObject({
        granted: false,
        limit: 'costPerMonth',
        max: 2,
        usage: { used: 1.8, reserved: 0 },
      });
      expect(await store.quotas.usage(scope, next.day, MONTH0)).toMatchObject({
        tokensDay: { used: 10, reserved: 0 },
        costMonth: { used: 1.8, reserved: 0 },
      });
    });

    it('charges every scope or none: a key over its own budget leaves its tenant uncharged', async () => {
      const key = `key:${randomUUID()}`;
      const both = (callId: string) =>
        call(callId, {
          scopes: [
            { scope, budget: { tokensPerDay: 1000 } },
            { scope: key, budget: { tokensPerDay: 400 } },
          ],
        });
      expect(await store.quotas.reserve(both('a:0:1'))).toEqual({ granted: true });
      expect(await store.quotas.reserve(both('b:0:1'))).toMatchObject({
        granted: false,
        scope: key,
        limit: 'tokensPerDay',
      });
      expect((await store.quotas.usage(scope, DAY0, MONTH0)).tokensDay).toEqual({ used: 0, reserved: 300 });
      expect((await store.quotas.usage(key, DAY0, MONTH0)).tokensDay).toEqual({ used: 0, reserved: 300 });
    });

    it('reservations from two instances at once never overshoot a budget', async () => {
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          (i % 2 === 0 ? store : other).quotas.reserve(call(`r${i}:0:1`, { tokens: 100, cost: 0 })),
        ),
      );
      expect(results.filter((r) => r.granted)).toHaveLength(10);
      expect((await store.quotas.usage(scope, DAY0, MONTH0)).tokensDay).toEqual({ used: 0, reserved: 1000 });
    });
  });
}
