/**
 * The webhooks part of the storage contract (src/store/port/webhooks.ts): subscriptions, the outbox of
 * deliveries written in a caller's transaction, claims under a lease (never the same delivery to
 * two claimers), attempts recorded only under their claim, redelivery. Every backend passes it.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreError, type NewWebhookDelivery, type Store, type WebhookRecord } from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';

const T0 = 1_700_000_000_000;
const LEASE = 40_000;

const hook = (tenant: string, o: Partial<WebhookRecord> = {}): WebhookRecord => ({
  id: randomUUID(),
  tenant,
  url: 'https://example.test/hook',
  events: ['run.completed'],
  secret: 'whsec_x',
  previousSecret: null,
  previousSecretExpiresAt: null,
  active: true,
  createdAt: T0,
  updatedAt: T0,
  ...o,
});

const delivery = (w: WebhookRecord, o: Partial<NewWebhookDelivery> = {}): NewWebhookDelivery => ({
  id: randomUUID(),
  webhookId: w.id,
  tenant: w.tenant,
  eventType: 'run.completed',
  eventId: randomUUID(),
  sessionId: null,
  body: '{"a":1}',
  createdAt: T0,
  nextAttemptAt: T0,
  retryUntil: T0 + 86_400_000,
  ...o,
});

export function webhooksContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`webhooks contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });
    afterEach(async () => {
      await opened.cleanup();
    });

    it('keeps subscriptions per tenant: create, get, list (by tenant, paged), update, delete', async () => {
      const a1 = hook('a', { id: '01' });
      const a2 = hook('a', { id: '02', events: ['run.failed', 'schedule.fired'], active: false });
      const b1 = hook('b', { id: '03' });
      for (const w of [a1, a2, b1]) await store.webhooks.create(w);
      await expect(store.webhooks.create(a1)).rejects.toMatchObject({ code: 'conflict' });
      expect(await store.webhooks.get('02')).toEqual(a2);
      expect(await store.webhooks.get('nope')).toBeUndefined();
      expect((await store.webhooks.list('a', { limit: 10 })).map((w) => w.id)).toEqual(['01', '02']);
      expect((await store.webhooks.list('a', { limit: 1, after: '01' })).map((w) => w.id)).toEqual(['02']);
      expect(await store.webhooks.update('02', { active: true, url: 'http://other.test/', updatedAt: T0 + 1 })).toEqual(
        {
          ...a2,
          active: true,
          url: 'http://other.test/',
          updatedAt: T0 + 1,
        },
      );
      expect(await store.webhooks.update('nope', { active: true, updatedAt: T0 })).toBeUndefined();
      expect(await store.webhooks.delete('03')).toBe(true);
      expect(await store.webhooks.delete('03')).toBe(false);
      expect(await store.webhooks.list('b', { limit: 10 })).toEqual([]);
    });

    it("finds the active subscriptions of a session's tenant", async () => {
      await store.sessions.create({ id: 's', tenant: 'a', createdAt: T0 });
      const on = hook('a');
      await store.webhooks.create(on);
      await store.webhooks.create(hook('a', { active: false }));
      await store.webhooks.create(hook('b'));
      expect(await store.webhooks.forSession('s')).toEqual([on]);
      expect(await store.webhooks.forSession('none')).toEqual([]);
    });

    it("keeps a run's own subscriptions apart: found with its runs, claimed with their format and headers, erased with its session", async () => {
      await store.sessions.create({ id: 's', tenant: 'a', createdAt: T0 });
      const newRun = (id: string) =>
        store.runs.create({ id, sessionId: 's', agent: { name: 'x', version: '1' }, agentSpec: {}, createdAt: T0 });
      // One active run a session: each ends before the next.
      for (const id of ['r1', 'r2']) {
        await newRun(id);
        await store.runs.update(id, { status: 'completed', endedAt: T0 });
      }
      const tenantWide = hook('a', { id: '01' });
      const own = hook('a', {
        id: '02',
        runId: 'r1',
        format: 'a2a',
        headers: { 'x-a2a-notification-token': 't' },
        ref: 'cfg-1',
      });
      const other = hook('a', { id: '03', runId: 'r2' });
      for (const w of [tenantWide, own, other]) await store.webhooks.create(w);
      expect(await store.webhooks.get('02')).toEqual(own);
      expect(await store.webhooks.get('01')).toEqual(tenantWide);
      // Not among the tenant's subscriptions; the run's own.
      expect((await store.webhooks.list('a', { limit: 10 })).map((w) => w.id)).toEqual(['01']);
      expect(await store.webhooks.forRun('r1')).toEqual([own]);
      expect(await store.webhooks.forRun('none')).toEqual([]);
      // The outbox's read: the tenant's, and those of the runs it names.
      expect(await store.webhooks.forSession('s')).toEqual([tenantWide]);
      expect((await store.webhooks.forSession('s', ['r1'])).map((w) => w.id).sort()).toEqual(['01', '02']);

      await store.webhooks.addDeliveries([delivery(own, { id: 'd-own', sessionId: 's' })]);
      const [c] = await store.webhooks.claimDeliveries(T0, LEASE, 10);
      expect(c).toMatchObject({ id: 'd-own', format: 'a2a', headers: { 'x-a2a-notification-token': 't' } });
      await store.webhooks.addDeliveries([delivery(tenantWide, { id: 'd-wide' })]);
      const [k] = await store.webhooks.claimDeliveries(T0, LEASE, 10);
      expect(k).toMatchObject({ id: 'd-wide', format: 'keel', headers: {} });

      await store.sessions.erase('s', T0 + 1);
      expect(await store.webhooks.forRun('r1')).toEqual([]);
      expect(await store.webhooks.get('03')).toBeUndefined();
      expect(await store.webhooks.get('01')).toEqual(tenantWide);
    });

    it("writes deliveries in the caller's transaction: a rollback leaves none", async () => {
      const w = hook('a');
      await store.webhooks.create(w);
      const kept = delivery(w);
      await expect(
        store.transaction(async (tx) => {
          await tx.webhooks.addDeliveries([delivery(w)]);
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      await store.transaction((tx) => tx.webhooks.addDeliveries([kept]));
      const list = await store.webhooks.listDeliveries(w.id, { limit: 10 });
      expect(list).toEqual([
        {
          ...kept,
          status: 'pending',
          attempts: 0,
          deliveredAt: null,
          endedAt: null,
          lastError: null,
          lastStatusCode: null,
        },
      ]);
      expect(await store.webhooks.getDelivery(kept.id)).toEqual(list[0]);
    });

    it('claims due deliveries under a lease, records attempts only under the claim, settles them', async () => {
      const w = hook('a');
      const off = hook('a', { active: false });
      await store.webhooks.create(w);
      await store.webhooks.create(off);
      const due = delivery(w, { id: 'd1' });
      const later = delivery(w, { id: 'd2', nextAttemptAt: T0 + 5000 });
      await store.webhooks.addDeliveries([due, later, delivery(off, { id: 'd3' })]);
      expect(await store.webhooks.hasDueDeliveries(T0 - 1)).toBe(false);
      expect(await store.webhooks.hasDueDeliveries(T0)).toBe(true);

      const [c] = await store.webhooks.claimDeliveries(T0, LEASE, 10);
      expect(c).toMatchObject({ id: 'd1', url: w.url, secret: w.secret, claim: 1, nextAttemptAt: T0 + LEASE });
      // Leased: nobody else takes it, and the inactive subscription's delivery is not taken.
      expect(await store.webhooks.claimDeliveries(T0 + 1000, LEASE, 10)).toEqual([]);
      await expect(store.webhooks.redeliver('d1', T0 + 1000, T0 + 2000)).rejects.toBeInstanceOf(StoreError);

      const attempt = { deliveryId: 'd1', n: 1, startedAt: T0, durationMs: 12, statusCode: 500, error: 'HTTP 500' };
      expect(
        await store.webhooks.recordAttempt({
          deliveryId: 'd1',
          claim: 1,
          attempt,
          status: 'pending',
          nextAttemptAt: T0 + 10_000,
        }),
      ).toBe(true);
      // The same claim twice, or a stale one, records nothing.
      expect(
        await store.webhooks.recordAttempt({
          deliveryId: 'd1',
          claim: 1,
          attempt: { ...attempt, n: 2 },
          status: 'delivered',
          nextAttemptAt: null,
        }),
      ).toBe(false);
      expect(await store.webhooks.getDelivery('d1')).toMatchObject({
        status: 'pending',
        attempts: 1,
        nextAttemptAt: T0 + 10_000,
        lastError: 'HTTP 500',
        lastStatusCode: 500,
      });

      // At T0 + 10 s both are due, oldest due first.
      const again = await store.webhooks.claimDeliveries(T0 + 10_000, LEASE, 10);
      expect(again.map((d) => [d.id, d.claim])).toEqual([
        ['d2', 1],
        ['d1', 2],
      ]);
      const ok = { deliveryId: 'd1', n: 2, startedAt: T0 + 10_000, durationMs: 5, statusCode: 204, error: null };
      expect(
        await store.webhooks.recordAttempt({
          deliveryId: 'd1',
          claim: 2,
          attempt: ok,
          status: 'delivered',
          nextAttemptAt: null,
        }),
      ).toBe(true);
      const gone = {
        deliveryId: 'd2',
        n: 1,
        startedAt: T0 + 10_000,
        durationMs: 3,
        statusCode: null,
        error: 'ECONNREFUSED',
      };
      expect(
        await store.webhooks.recordAttempt({
          deliveryId: 'd2',
          claim: 1,
          attempt: gone,
          status: 'failed',
          nextAttemptAt: null,
        }),
      ).toBe(true);
      expect(await store.webhooks.getDelivery('d1')).toMatchObject({
        status: 'delivered',
        attempts: 2,
        nextAttemptAt: null,
        deliveredAt: T0 + 10_005,
      });
      expect(await store.webhooks.getDelivery('d2')).toMatchObject({
        status: 'failed',
        attempts: 1,
        nextAttemptAt: null,
        lastError: 'ECONNREFUSED',
        lastStatusCode: null,
      });
      expect(await store.webhooks.listAttempts(['d1', 'd2'])).toEqual([attempt, ok, gone]);
      // d3 (its subscription is off) was not claimed: the claims ended it failed.
      expect(await store.webhooks.getDelivery('d3')).toMatchObject({
        status: 'failed',
        lastError: 'subscription disabled',
        nextAttemptAt: null,
      });
      expect(await store.webhooks.hasDueDeliveries(T0 + 10 * LEASE)).toBe(false);

      // Redelivery: pending again, due now, a new claim; the old claim records nothing.
      expect(await store.webhooks.redeliver('d1', T0 + 20_000, T0 + 30_000)).toMatchObject({
        status: 'pending',
        nextAttemptAt: T0 + 20_000,
        retryUntil: T0 + 30_000,
        attempts: 2,
      });
      expect(await store.webhooks.redeliver('nope', T0, T0)).toBeUndefined();
      const [r] = await store.webhooks.claimDeliveries(T0 + 20_000, LEASE, 10);
      expect(r).toMatchObject({ id: 'd1', claim: 4 });
      expect(
        await store.webhooks.recordAttempt({
          deliveryId: 'd1',
          claim: 2,
          attempt: { ...ok, n: 3 },
          status: 'delivered',
          nextAttemptAt: null,
        }),
      ).toBe(false);

      // Deleting the subscription removes its deliveries and their attempts.
      await store.webhooks.delete(w.id);
      expect(await store.webhooks.getDelivery('d1')).toBeUndefined();
      expect(await store.webhooks.listAttempts(['d1'])).toEqual([]);
    });

    it('disabling a subscription ends its pending deliveries failed (in flight too); nothing stays due', async () => {
      const w = hook('a');
      const other = hook('b');
      await store.webhooks.create(w);
      await store.webhooks.create(other);
      await store.webhooks.addDeliveries([
        delivery(w, { id: 'p1' }),
        delivery(w, { id: 'p2', nextAttemptAt: T0 + 60_000 }),
        delivery(other, { id: 'q1' }),
      ]);
      const [inFlight] = await store.webhooks.claimDeliveries(T0, LEASE, 1);
      expect(inFlight!.id).toBe('p1');
      expect(await store.webhooks.update(w.id, { active: false, updatedAt: T0 + 1000 })).toMatchObject({
        active: false,
      });
      for (const id of ['p1', 'p2']) {
        expect(await store.webhooks.getDelivery(id)).toMatchObject({
          status: 'failed',
          nextAttemptAt: null,
          lastError: 'subscription disabled',
          endedAt: T0 + 1000,
        });
      }
      // The attempt that was in flight records nothing; the other tenant's delivery is untouched.
      expect(
        await store.webhooks.recordAttempt({
          deliveryId: 'p1',
          claim: inFlight!.claim,
          attempt: { deliveryId: 'p1', n: 1, startedAt: T0, durationMs: 1, statusCode: 200, error: null },
          status: 'delivered',
          nextAttemptAt: null,
        }),
      ).toBe(false);
      expect(await store.webhooks.getDelivery('q1')).toMatchObject({ status: 'pending', endedAt: null });
      await store.webhooks.update(other.id, { active: false, updatedAt: T0 + 2000 });
      expect(await store.webhooks.hasDueDeliveries(T0 + 10 * LEASE)).toBe(false);
      // Disabled, no redelivery either; active again, nothing comes back by itself (a redelivery on request does).
      await expect(store.webhooks.redeliver('p2', T0 + 2500, T0 + 5000)).rejects.toMatchObject({ code: 'conflict' });
      await store.webhooks.update(w.id, { active: true, updatedAt: T0 + 3000 });
      expect(await store.webhooks.hasDueDeliveries(T0 + 10 * LEASE)).toBe(false);
      expect(await store.webhooks.redeliver('p2', T0 + 4000, T0 + 5000)).toMatchObject({
        status: 'pending',
        endedAt: null,
        nextAttemptAt: T0 + 4000,
      });
    });

    it('a pending delivery of a disabled subscription (written in a race with the disabling) is ended failed by the next claim, not claimed', async () => {
      const w = hook('a', { active: false });
      await store.webhooks.create(w);
      await store.webhooks.addDeliveries([delivery(w, { id: 'late' })]);
      expect(await store.webhooks.hasDueDeliveries(T0)).toBe(true);
      expect(await store.webhooks.claimDeliveries(T0 + 500, LEASE, 10)).toEqual([]);
      expect(await store.webhooks.getDelivery('late')).toMatchObject({
        status: 'failed',
        lastError: 'subscription disabled',
        endedAt: T0 + 500,
      });
      expect(await store.webhooks.hasDueDeliveries(T0 + 10 * LEASE)).toBe(false);
    });

    it("erasing a session removes its deliveries (bodies) and their attempts, nobody else's", async () => {
      await store.sessions.create({ id: 's1', tenant: 'a', createdAt: T0 });
      await store.sessions.create({ id: 's2', tenant: 'a', createdAt: T0 });
      const w = hook('a');
      await store.webhooks.create(w);
      await store.webhooks.addDeliveries([
        delivery(w, { id: 'e1', sessionId: 's1' }),
        delivery(w, { id: 'e2', sessionId: 's1', nextAttemptAt: T0 + 1 }),
        delivery(w, { id: 'k1', sessionId: 's2' }),
        delivery(w, { id: 'k2' }),
      ]);
      expect(await store.webhooks.getDelivery('e1')).toMatchObject({ sessionId: 's1' });
      expect(await store.webhooks.getDelivery('k2')).toMatchObject({ sessionId: null });
      const claimed = await store.webhooks.claimDeliveries(T0 + 1, LEASE, 10);
      for (const c of claimed) {
        const attempt = { deliveryId: c.id, n: 1, startedAt: T0 + 1, durationMs: 1, statusCode: 200, error: null };
        expect(
          await store.webhooks.recordAttempt({
            deliveryId: c.id,
            claim: c.claim,
            attempt,
            status: 'delivered',
            nextAttemptAt: null,
          }),
        ).toBe(true);
      }
      expect(await store.webhooks.listAttempts(['e1', 'e2', 'k1', 'k2'])).toHaveLength(4);
      await store.sessions.erase('s1', T0 + 2);
      expect(await store.webhooks.getDelivery('e1')).toBeUndefined();
      expect(await store.webhooks.getDelivery('e2')).toBeUndefined();
      expect((await store.webhooks.listDeliveries(w.id, { limit: 10 })).map((d) => d.id).sort()).toEqual(['k1', 'k2']);
      expect((await store.webhooks.listAttempts(['e1', 'e2', 'k1', 'k2'])).map((a) => a.deliveryId).sort()).toEqual([
        'k1',
        'k2',
      ]);
    });

    it('prunes delivered and failed deliveries that ended before their bounds (oldest first, up to a limit) with their attempts; pending ones stay', async () => {
      const w = hook('a');
      await store.webhooks.create(w);
      const DAY = 86_400_000;
      const ids = ['dOld', 'dNew', 'fOld', 'fNew', 'fOlder', 'pending'];
      await store.webhooks.addDeliveries(ids.map((id) => delivery(w, { id, retryUntil: T0 + 100 * DAY })));
      const claimed = await store.webhooks.claimDeliveries(T0, LEASE, 10);
      const end: Record<string, [status: 'delivered' | 'failed' | 'pending', at: number]> = {
        dOld: ['delivered', T0 + DAY],
        dNew: ['delivered', T0 + 9 * DAY],
        fOld: ['failed', T0 + 2 * DAY],
        fNew: ['failed', T0 + 9 * DAY],
        fOlder: ['failed', T0 + DAY],
        pending: ['pending', T0],
      };
      for (const c of claimed) {
        const [status, at] = end[c.id]!;
        const attempt = {
          deliveryId: c.id,
          n: 1,
          startedAt: at,
          durationMs: 0,
          statusCode: status === 'delivered' ? 200 : 500,
          error: status === 'delivered' ? null : 'HTTP 500',
        };
        expect(
          await store.webhooks.recordAttempt({
            deliveryId: c.id,
            claim: c.claim,
            attempt,
            status,
            nextAttemptAt: status === 'pending' ? T0 + 100 * DAY : null,
          }),
        ).toBe(true);
      }
      expect(await store.webhooks.getDelivery('dOld')).toMatchObject({ endedAt: T0 + DAY });
      const bounds = { deliveredBefore: T0 + 5 * DAY, failedBefore: T0 + 5 * DAY };
      expect(await store.webhooks.hasExpiredDeliveries({ deliveredBefore: T0 + DAY, failedBefore: T0 + DAY })).toBe(
        false,
      );
      expect(await store.webhooks.hasExpiredDeliveries(bounds)).toBe(true);
      // Up to the limit, the longest ended first (of each status).
      expect(await store.webhooks.pruneDeliveries({ ...bounds, limit: 2 })).toBe(2);
      expect(await store.webhooks.getDelivery('fOlder')).toBeUndefined();
      expect(await store.webhooks.pruneDeliveries({ ...bounds, limit: 10 })).toBe(1);
      expect(await store.webhooks.pruneDeliveries({ ...bounds, limit: 10 })).toBe(0);
      expect(await store.webhooks.hasExpiredDeliveries(bounds)).toBe(false);
      expect((await store.webhooks.listDeliveries(w.id, { limit: 10 })).map((d) => d.id).sort()).toEqual([
        'dNew',
        'fNew',
        'pending',
      ]);
      expect((await store.webhooks.listAttempts(ids)).map((a) => a.deliveryId).sort()).toEqual([
        'dNew',
        'fNew',
        'pending',
      ]);
      // Each status has its own bound.
      expect(
        await store.webhooks.pruneDeliveries({ deliveredBefore: T0 + 10 * DAY, failedBefore: T0, limit: 10 }),
      ).toBe(1);
      expect((await store.webhooks.listDeliveries(w.id, { limit: 10 })).map((d) => d.id).sort()).toEqual([
        'fNew',
        'pending',
      ]);
    });

    it('rotates a secret: the old one is kept until its expiry and claimed with the deliveries', async () => {
      const w = hook('a', { secret: 'whsec_one' });
      await store.webhooks.create(w);
      expect(
        await store.webhooks.rotateSecret('nope', { secret: 'x', previousSecretExpiresAt: T0, updatedAt: T0 }),
      ).toBeUndefined();
      const r = await store.webhooks.rotateSecret(w.id, {
        secret: 'whsec_two',
        previousSecretExpiresAt: T0 + 60_000,
        updatedAt: T0 + 1,
      });
      expect(r).toEqual({
        ...w,
        secret: 'whsec_two',
        previousSecret: 'whsec_one',
        previousSecretExpiresAt: T0 + 60_000,
        updatedAt: T0 + 1,
      });
      expect(await store.webhooks.get(w.id)).toEqual(r);
      await store.webhooks.addDeliveries([delivery(w, { id: 'r1' })]);
      expect((await store.webhooks.claimDeliveries(T0, LEASE, 10))[0]).toMatchObject({
        secret: 'whsec_two',
        previousSecret: 'whsec_one',
        previousSecretExpiresAt: T0 + 60_000,
      });
      // Again: the secret being replaced is the previous one now; no overlap leaves none.
      expect(
        await store.webhooks.rotateSecret(w.id, {
          secret: 'whsec_three',
          previousSecretExpiresAt: T0 + 2,
          updatedAt: T0 + 2,
        }),
      ).toMatchObject({ secret: 'whsec_three', previousSecret: null, previousSecretExpiresAt: null });
      expect(
        await store.webhooks.rotateSecret(w.id, {
          secret: 'whsec_four',
          previousSecretExpiresAt: T0 + 9,
          updatedAt: T0 + 3,
        }),
      ).toMatchObject({ secret: 'whsec_four', previousSecret: 'whsec_three', previousSecretExpiresAt: T0 + 9 });
    });

    it('claims at most perDestination deliveries of a URL, counting those the claimer has in flight, and passes over busy URLs to others', async () => {
      const a = hook('a', { url: 'https://a.example.test/hook' });
      const b = hook('b', { url: 'https://b.example.test/hook' });
      await store.webhooks.create(a);
      await store.webhooks.create(b);
      await store.webhooks.addDeliveries([
        ...[1, 2, 3, 4, 5].map((i) => delivery(a, { id: `a${i}`, nextAttemptAt: T0 + i })),
        ...[1, 2].map((i) => delivery(b, { id: `b${i}`, nextAttemptAt: T0 + 10 + i })),
      ]);
      const ids = (ds: Array<{ id: string }>) => ds.map((d) => d.id);
      // The cheap read passes over busy URLs too.
      expect(await store.webhooks.hasDueDeliveries(T0 + 100, { except: [a.url, b.url] })).toBe(false);
      expect(await store.webhooks.hasDueDeliveries(T0 + 100, { except: [a.url] })).toBe(true);
      expect(await store.webhooks.hasDueDeliveries(T0 + 100, { except: [] })).toBe(true);
      // a's URL has two in flight here: none of its deliveries, b's are taken although due later.
      expect(
        ids(await store.webhooks.claimDeliveries(T0 + 100, LEASE, 10, { perDestination: 2, busy: { [a.url]: 2 } })),
      ).toEqual(['b1', 'b2']);
      // One in flight: one more; none: two (the oldest due first).
      expect(
        ids(
          await store.webhooks.claimDeliveries(T0 + 100, LEASE, 10, {
            perDestination: 2,
            busy: { [a.url]: 1, [b.url]: 2 },
          }),
        ),
      ).toEqual(['a1']);
      expect(ids(await store.webhooks.claimDeliveries(T0 + 100, LEASE, 10, { perDestination: 2, busy: {} }))).toEqual([
        'a2',
        'a3',
      ]);
      // Without a cap, as many as the limit.
      expect(ids(await store.webhooks.claimDeliveries(T0 + 100, LEASE, 10))).toEqual(['a4', 'a5']);
    });

    it('pages deliveries newest first', async () => {
      const w = hook('a');
      await store.webhooks.create(w);
      await store.webhooks.addDeliveries(['01', '02', '03'].map((id) => delivery(w, { id })));
      expect((await store.webhooks.listDeliveries(w.id, { limit: 2 })).map((d) => d.id)).toEqual(['03', '02']);
      expect((await store.webhooks.listDeliveries(w.id, { limit: 2, after: '02' })).map((d) => d.id)).toEqual(['01']);
    });

    it('two store instances claiming at once never take the same delivery', async () => {
      const other = opened.another ? await opened.another() : store;
      const w = hook('a');
      await store.webhooks.create(w);
      const ids = Array.from({ length: 40 }, (_, i) => `d${String(i).padStart(2, '0')}`);
      await store.webhooks.addDeliveries(ids.map((id) => delivery(w, { id })));
      const claims = await Promise.all(
        Array.from({ length: 8 }, (_, i) => (i % 2 ? other : store).webhooks.claimDeliveries(T0, LEASE, 7)),
      );
      const taken = claims.flat().map((d) => d.id);
      expect(new Set(taken).size).toBe(taken.length);
      expect(taken.sort()).toEqual(ids);
    });
  });
}
