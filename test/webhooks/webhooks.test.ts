/**
 * Webhooks (ADR-0017, docs/webhooks.md): deliveries written in the transaction of the status
 * change that causes them, signed, retried with exponential backoff for a day on a manual clock,
 * redelivered on request, and never attempted by two dispatchers at once (two runtimes on one
 * SQLite file; two stores on one PostgreSQL schema).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  manualClock,
  openSqliteStore,
  ScriptedModel,
  tool,
  verifyWebhookSignature,
  type Runtime,
  type ScriptEntry,
  type Store,
} from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { Receiver } from './receiver.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function receiver(): Promise<Receiver> {
  const r = await new Receiver().start();
  cleanups.push(() => r.stop());
  return r;
}

const danger = tool({
  name: 'danger',
  description: 'Needs approval',
  input: z.object({ target: z.string() }),
  approval: 'always',
  execute: ({ target }) => `did ${target}`,
});
const agentOf = (script: ScriptEntry[] = []) =>
  defineAgent({ name: 'a', model: new ScriptedModel(script), tools: [danger] });

const SEC = 1000;
const DAY = 24 * 3600 * SEC;

/** Polls until `check` holds (a generous deadline only to fail clearly: no timing is asserted). */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The receivers listen on 127.0.0.1: these runtimes allow private networks, unless told not to. */
function runtime(
  store: Store,
  o: { script?: ScriptEntry[]; clock?: ReturnType<typeof manualClock>; allowPrivateNetworks?: boolean } = {},
) {
  const clock = o.clock ?? manualClock();
  const rt = createRuntime({
    store,
    agents: [agentOf(o.script)],
    clock,
    webhooks: { pollMs: 20, timeoutMs: 2000, random: () => 1, allowPrivateNetworks: o.allowPrivateNetworks ?? true },
  });
  cleanups.push(() => rt.close({ graceMs: 50 }));
  return { rt, clock };
}

function memoryStore() {
  const store = openSqliteStore({ path: ':memory:' });
  cleanups.push(() => store.close());
  return store;
}

/** A delivery of `run.cancelled`, made without a worker: a queued run cancelled. */
async function cancelledRun(rt: Runtime, tenant = 'default') {
  const s = await rt.sessions.create({ tenant });
  const { run } = await rt.sessions.send(s.id, 'hi');
  await rt.runs.cancel(run.id);
  return run;
}

describe('webhooks', () => {
  it('a run that waits for approval and then completes: deliveries of the subscribed types only, signed', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const { rt, clock } = runtime(store, {
      script: [{ toolCalls: [{ id: 'd1', name: 'danger', input: { target: 'x' } }] }, { text: 'done' }],
    });
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['run.waiting_approval', 'run.completed'] });
    expect(w.secret).toMatch(/^whsec_/);
    await rt.webhooks.create('default', { url: hook.url, events: ['run.failed', 'schedule.fired'] });
    await rt.webhooks.create('other', { url: hook.url, events: ['run.waiting_approval', 'run.completed'] });
    await rt.webhooks.create('default', { url: hook.url, events: ['run.completed'], active: false });
    rt.startWorker();

    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    await rt.runs.approve(run.id, 'd1');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    await hook.until(2);
    await new Promise((r) => setTimeout(r, 100));
    expect(hook.received.map((r) => r.headers['keel-event'])).toEqual(['run.waiting_approval', 'run.completed']);
    for (const r of hook.received) {
      const body = JSON.parse(r.body);
      expect(r.headers['keel-delivery']).toBe(body.id);
      expect(body).toMatchObject({
        type: r.headers['keel-event'],
        data: { tenant: 'default', run: { id: run.id, session_id: s.id } },
      });
      expect(new Date(body.created_at).toISOString()).toBe(body.created_at);
      const header = r.headers['keel-signature'] as string;
      expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      expect(verifyWebhookSignature(w.secret, header, r.body, 300, clock.now())).toBe(true);
      expect(verifyWebhookSignature(w.secret, header, r.body.replace(run.id, 'someone-else'), 300, clock.now())).toBe(
        false,
      );
      expect(verifyWebhookSignature('whsec_wrong', header, r.body, 300, clock.now())).toBe(false);
      // An old signature is refused (replay).
      expect(verifyWebhookSignature(w.secret, header, r.body, 300, clock.now() + 3600 * SEC)).toBe(false);
    }
    expect(JSON.parse(hook.received[1]!.body).data.run).toMatchObject({
      status: 'completed',
      previous_status: 'running',
    });
    const listed = await rt.webhooks.deliveries('default', w.id, { limit: 10 });
    expect(
      listed.map((d) => [d.delivery.eventType, d.delivery.status, d.attempts.length, d.attempts[0]!.statusCode]),
    ).toEqual([
      ['run.completed', 'delivered', 1, 200],
      ['run.waiting_approval', 'delivered', 1, 200],
    ]);
  });

  it('every run status is an event type (run.<status>), and the outbox writes it when a run moves to that status', async () => {
    const { RUN_STATUSES, WEBHOOK_EVENT_TYPES } = await import('../../src/index.ts');
    expect([...WEBHOOK_EVENT_TYPES].sort()).toEqual([...RUN_STATUSES.map((s) => `run.${s}`), 'schedule.fired'].sort());
    const hook = await receiver();
    const store = memoryStore();
    const { rt } = runtime(store, {
      script: [{ toolCalls: [{ id: 'd1', name: 'danger', input: { target: 'x' } }] }, { text: 'done' }],
    });
    const w = await rt.webhooks.create('default', { url: hook.url, events: [...WEBHOOK_EVENT_TYPES] });
    rt.startWorker();
    // A real run: queued, running, waiting_approval, queued again once approved, running, completed.
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    await rt.runs.approve(run.id, 'd1');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    const types = async () =>
      (await rt.webhooks.deliveries('default', w.id, { limit: 100 })).map((d) => d.delivery.eventType).reverse();
    expect(await types()).toEqual([
      'run.queued',
      'run.running',
      'run.waiting_approval',
      'run.queued',
      'run.running',
      'run.completed',
    ]);
    // Every other status, as the runs layer records it (run/status in the session log).
    const other = await rt.sessions.create();
    for (const to of RUN_STATUSES)
      await rt.sessions.log.append(other.id, [
        { type: 'run/status', runId: 'r1', data: { from: 'running', to, attempt: 1 } },
      ]);
    const listed = await rt.webhooks.deliveries('default', w.id, { limit: 100 });
    const ofOther = listed.filter((d) => JSON.parse(d.delivery.body).data.run.session_id === other.id);
    expect(ofOther.map((d) => d.delivery.eventType).reverse()).toEqual(RUN_STATUSES.map((to) => `run.${to}`));
    expect(JSON.parse(ofOther[0]!.delivery.body)).toMatchObject({
      type: `run.${RUN_STATUSES.at(-1)}`,
      data: { run: { status: RUN_STATUSES.at(-1), previous_status: 'running' } },
    });
  });

  it('a delivery commits with its event: a transaction that rolls back leaves none', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const { rt } = runtime(store);
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    await expect(
      rt.sessions.log.transaction(async (tx) => {
        await rt.lifecycle.transition(tx, (await tx.runs.get(run.id))!, 'cancelled');
        expect(await tx.webhooks.listDeliveries(w.id, { limit: 10 })).toHaveLength(1);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await store.webhooks.listDeliveries(w.id, { limit: 10 })).toEqual([]);
    expect((await rt.runs.get(run.id)).status).toBe('queued');
    await rt.runs.cancel(run.id);
    expect((await store.webhooks.listDeliveries(w.id, { limit: 10 })).map((d) => [d.eventType, d.status])).toEqual([
      ['run.cancelled', 'pending'],
    ]);
  });

  it('maps schedule/fired to schedule.fired, also when appended outside a transaction (the log makes one)', async () => {
    const store = memoryStore();
    const { rt } = runtime(store);
    const hook = await receiver();
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['schedule.fired'] });
    const s = await rt.sessions.create();
    const tick = Date.UTC(2026, 0, 5, 9);
    await rt.sessions.log.transaction((tx) =>
      rt.sessions.log.append(s.id, [{ type: 'schedule/fired', data: { scheduleId: 'sch1', tick, runId: 'r1' } }], {
        tx,
      }),
    );
    await rt.sessions.log.append(s.id, [
      { type: 'schedule/fired', data: { scheduleId: 'sch1', tick: tick + 1000, runId: 'r2' } },
    ]);
    const listed = await rt.webhooks.deliveries('default', w.id, { limit: 10 });
    expect(listed.map((d) => JSON.parse(d.delivery.body).data)).toEqual([
      {
        tenant: 'default',
        schedule: { id: 'sch1', tick: new Date(tick + 1000).toISOString() },
        run_id: 'r2',
        session_id: s.id,
      },
      {
        tenant: 'default',
        schedule: { id: 'sch1', tick: new Date(tick).toISOString() },
        run_id: 'r1',
        session_id: s.id,
      },
    ]);
    expect(await rt.webhooks.dispatcher.drain()).toBe(2);
    expect(hook.received.map((r) => r.headers['keel-event'])).toEqual(['schedule.fired', 'schedule.fired']);
  });

  it('a receiver that fails (500, then refused connections) and recovers gets the delivery after retries with growing backoff', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const { rt, clock } = runtime(store);
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    await cancelledRun(rt);
    const d = rt.webhooks.dispatcher;
    const delivery = (await rt.webhooks.deliveries('default', w.id, { limit: 1 }))[0]!.delivery;
    const state = () => store.webhooks.getDelivery(delivery.id).then((x) => x!);

    hook.queue.push(500);
    const t0 = clock.now();
    expect(await d.tick()).toBe(1);
    expect(await state()).toMatchObject({
      status: 'pending',
      attempts: 1,
      lastStatusCode: 500,
      nextAttemptAt: t0 + 10 * SEC,
    });
    expect(await d.tick()).toBe(0); // not due yet

    await hook.stop();
    clock.advance(10 * SEC);
    expect(await d.tick()).toBe(1);
    expect(await state()).toMatchObject({
      status: 'pending',
      attempts: 2,
      lastStatusCode: null,
      lastError: 'ECONNREFUSED',
      nextAttemptAt: t0 + 30 * SEC,
    });

    await hook.start(hook.port);
    clock.advance(19 * SEC);
    expect(await d.tick()).toBe(0);
    clock.advance(1 * SEC);
    expect(await d.tick()).toBe(1);
    expect(await state()).toMatchObject({
      status: 'delivered',
      attempts: 3,
      nextAttemptAt: null,
      lastStatusCode: 200,
      lastError: null,
    });
    const [listed] = await rt.webhooks.deliveries('default', w.id, { limit: 10 });
    expect(listed!.attempts.map((a) => [a.n, a.statusCode, a.error, a.startedAt - t0])).toEqual([
      [1, 500, 'HTTP 500', 0],
      [2, null, 'ECONNREFUSED', 10 * SEC],
      [3, 200, null, 30 * SEC],
    ]);
    expect(hook.received.map((r) => [r.status, r.headers['keel-delivery']])).toEqual([
      [500, delivery.id],
      [200, delivery.id],
    ]);
  });

  it('retries for a day, with backoff doubling up to an hour, then fails; redelivers on request', async () => {
    const hook = await receiver();
    hook.status = 503;
    const store = memoryStore();
    const { rt, clock } = runtime(store);
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    await cancelledRun(rt);
    const delivery = (await rt.webhooks.deliveries('default', w.id, { limit: 1 }))[0]!.delivery;
    const t0 = clock.now();
    const gaps: number[] = [];
    for (let last = t0; ;) {
      expect(await rt.webhooks.dispatcher.tick()).toBe(1);
      const now = await store.webhooks.getDelivery(delivery.id);
      if (now!.status !== 'pending') break;
      gaps.push(now!.nextAttemptAt! - last);
      last = now!.nextAttemptAt!;
      clock.set(last);
      expect(gaps.length).toBeLessThan(100);
    }
    expect(gaps.slice(0, 5)).toEqual([10, 20, 40, 80, 160].map((s) => s * SEC));
    expect(Math.max(...gaps)).toBe(3600 * SEC);
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]).toBeGreaterThanOrEqual(gaps[i - 1]!);
    const failed = (await store.webhooks.getDelivery(delivery.id))!;
    expect(failed).toMatchObject({
      status: 'failed',
      attempts: gaps.length + 1,
      nextAttemptAt: null,
      lastStatusCode: 503,
    });
    expect(clock.now() - t0).toBeLessThanOrEqual(DAY);
    expect(clock.now() - t0).toBeGreaterThan(DAY - 3600 * SEC);
    clock.advance(DAY);
    expect(await rt.webhooks.dispatcher.tick()).toBe(0);

    // Redelivery on request: one more attempt now, which the recovered receiver takes.
    hook.status = 200;
    expect(await rt.webhooks.redeliver('default', w.id, delivery.id)).toMatchObject({
      status: 'pending',
      nextAttemptAt: clock.now(),
    });
    expect(await rt.webhooks.dispatcher.tick()).toBe(1);
    expect(await store.webhooks.getDelivery(delivery.id)).toMatchObject({
      status: 'delivered',
      attempts: gaps.length + 2,
      lastStatusCode: 200,
    });
    await expect(rt.webhooks.redeliver('other', w.id, delivery.id)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('disabling a subscription ends its pending deliveries failed, and a poll with only those makes no write transaction', async () => {
    const hook = await receiver();
    hook.status = 503;
    const store = memoryStore();
    const { rt, clock } = runtime(store);
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    await cancelledRun(rt);
    await cancelledRun(rt);
    // One has been attempted (and waits for its retry), one not yet.
    expect(await rt.webhooks.dispatcher.tick()).toBe(2);
    await cancelledRun(rt);
    await rt.webhooks.update('default', w.id, { active: false });
    const listed = await rt.webhooks.deliveries('default', w.id, { limit: 10 });
    expect(listed.map((d) => [d.delivery.status, d.delivery.lastError])).toEqual([
      ['failed', 'subscription disabled'],
      ['failed', 'subscription disabled'],
      ['failed', 'subscription disabled'],
    ]);
    clock.advance(DAY);
    expect(await store.webhooks.hasDueDeliveries(clock.now())).toBe(false);
    const commits = store.commitCount;
    expect(await rt.webhooks.dispatcher.tick()).toBe(0);
    expect(store.commitCount).toBe(commits);
    // Disabled, a delivery is not attempted again on request either (409); active again, it is.
    const one = listed[0]!.delivery.id;
    await expect(rt.webhooks.redeliver('default', w.id, one)).rejects.toMatchObject({ code: 'conflict' });
    await rt.webhooks.update('default', w.id, { active: true });
    hook.status = 200;
    await rt.webhooks.redeliver('default', w.id, one);
    expect(await rt.webhooks.dispatcher.tick()).toBe(1);
    expect(await store.webhooks.getDelivery(one)).toMatchObject({ status: 'delivered' });
  });

  it('erasing a session removes its webhook deliveries (their bodies) and attempts', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const { rt } = runtime(store);
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    const erased = await cancelledRun(rt);
    const kept = await cancelledRun(rt);
    expect(await rt.webhooks.dispatcher.drain()).toBe(2);
    const before = await rt.webhooks.deliveries('default', w.id, { limit: 10 });
    expect(before.map((d) => d.delivery.sessionId).sort()).toEqual([erased.sessionId, kept.sessionId].sort());
    await rt.sessions.erase(erased.sessionId);
    const after = await rt.webhooks.deliveries('default', w.id, { limit: 10 });
    expect(after.map((d) => d.delivery.sessionId)).toEqual([kept.sessionId]);
    const gone = before.find((d) => d.delivery.sessionId === erased.sessionId)!.delivery.id;
    expect(await store.webhooks.getDelivery(gone)).toBeUndefined();
    expect(await store.webhooks.listAttempts([gone])).toEqual([]);
  });

  it('prunes delivered deliveries 7 days after they ended and failed ones after 30 (by default), with their attempts; pending and younger ones stay', async () => {
    const good = await receiver();
    const bad = await receiver();
    bad.status = 503;
    const store = memoryStore();
    const { rt, clock } = runtime(store);
    const ok = await rt.webhooks.create('default', { url: good.url, events: ['run.cancelled'] });
    const failing = await rt.webhooks.create('default', { url: bad.url, events: ['run.cancelled'] });
    const d = rt.webhooks.dispatcher;
    const t0 = clock.now();
    /** A delivery to each subscription, attempted until the failing one fails (a day of retries). */
    const round = async () => {
      const run = await cancelledRun(rt);
      for (let i = 0; i < 100 && (await d.tick()) > 0; i++) {
        const next = (await rt.webhooks.deliveries('default', failing.id, { limit: 1 }))[0]!.delivery;
        if (next.status !== 'pending') break;
        clock.set(next.nextAttemptAt!);
      }
      return run.sessionId;
    };
    const sessions = async (w: string) =>
      (await rt.webhooks.deliveries('default', w, { limit: 100 })).map((x) => [
        x.delivery.sessionId,
        x.delivery.status,
      ]);
    const first = await round(); // delivered at t0, failed at about t0 + 1 day
    clock.set(t0 + 23 * DAY);
    const second = await round(); // delivered at t0 + 23 days, failed at about t0 + 24 days
    clock.set(t0 + 31 * DAY + 3600 * SEC);
    const third = await cancelledRun(rt); // pending: its first attempt fails, it is retried later
    const firstIds = (await rt.webhooks.deliveries('default', failing.id, { limit: 100 }))
      .filter((x) => x.delivery.sessionId === first)
      .map((x) => x.delivery.id);
    expect(await store.webhooks.listAttempts(firstIds)).not.toEqual([]);
    expect(await d.tick()).toBe(2);
    // The tick pruned: the first round's delivered one (31 days) and failed one (30 days); the
    // second round's delivered one (8 days); not its failed one (7 days), nor the third round's.
    expect(await sessions(ok.id)).toEqual([[third.sessionId, 'delivered']]);
    expect(await sessions(failing.id)).toEqual([
      [third.sessionId, 'pending'],
      [second, 'failed'],
    ]);
    expect(await store.webhooks.listAttempts(firstIds)).toEqual([]);
  });

  it('rotating the secret: during the overlap deliveries carry a signature with each secret, after it only the new one', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const { rt, clock } = runtime(store);
    const w = await rt.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    const rotated = await rt.webhooks.rotateSecret('default', w.id, { overlapMs: 3600 * SEC });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(w.secret);
    expect(rotated).toMatchObject({ previousSecretExpiresAt: clock.now() + 3600 * SEC });
    const last = () => hook.received.at(-1)!;
    const verifies = (secret: string) =>
      verifyWebhookSignature(secret, last().headers['keel-signature'] as string, last().body, 300, clock.now());

    // During the overlap: a receiver that still has the old secret accepts the delivery, and so does one with the new.
    clock.advance(3599 * SEC);
    await cancelledRun(rt);
    expect(await rt.webhooks.dispatcher.drain()).toBe(1);
    expect(last().headers['keel-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(verifies(w.secret)).toBe(true);
    expect(verifies(rotated.secret)).toBe(true);

    // After it: only the new secret signs.
    clock.advance(1 * SEC);
    await cancelledRun(rt);
    expect(await rt.webhooks.dispatcher.drain()).toBe(1);
    expect(last().headers['keel-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifies(w.secret)).toBe(false);
    expect(verifies(rotated.secret)).toBe(true);
    expect(await rt.webhooks.get('default', w.id)).toMatchObject({ secret: rotated.secret });

    // Rotating again during an overlap: the secret being replaced overlaps, the older one is dropped; 0 means no overlap.
    const again = await rt.webhooks.rotateSecret('default', w.id, { overlapMs: 0 });
    expect(again.previousSecretExpiresAt).toBeNull();
    await cancelledRun(rt);
    expect(await rt.webhooks.dispatcher.drain()).toBe(1);
    expect(verifies(rotated.secret)).toBe(false);
    expect(verifies(again.secret)).toBe(true);
    await expect(rt.webhooks.rotateSecret('other', w.id)).rejects.toMatchObject({ code: 'not_found' });
  });

  it("a receiver that never answers holds up neither another tenant's deliveries nor more than 2 attempts; its own are retried after the timeout", async () => {
    const stuck = await receiver();
    stuck.hold = true;
    const ok = await receiver();
    const store = memoryStore();
    const clock = manualClock();
    const rt = createRuntime({
      store,
      agents: [agentOf()],
      clock,
      webhooks: { pollMs: 20, timeoutMs: 3000, random: () => 1, allowPrivateNetworks: true },
    });
    cleanups.push(() => rt.close({ graceMs: 50 }));
    const a = await rt.webhooks.create('a', { url: stuck.url, events: ['run.cancelled'] });
    const b = await rt.webhooks.create('b', { url: ok.url, events: ['run.cancelled'] });
    rt.webhooks.startDispatcher();
    for (let i = 0; i < 5; i++) await cancelledRun(rt, 'a');
    await until(() => stuck.holding >= 2, 'attempts held by the receiver that never answers');
    // While A's two slots hang and its three others are due, the polls only read: no write lock each time.
    const commits = store.commitCount;
    const hasDue = store.webhooks.hasDueDeliveries.bind(store);
    let polls = 0;
    store.webhooks.hasDueDeliveries = (...a) => {
      polls++;
      return hasDue(...a);
    };
    await until(() => polls >= 5, 'five polls');
    expect(store.commitCount).toBe(commits);
    store.webhooks.hasDueDeliveries = hasDue;
    for (let i = 0; i < 3; i++) await cancelledRun(rt, 'b');
    await ok.until(3);
    // B's three arrived while A's attempts still hang: none of them has ended yet.
    const aAttempts = async () => (await rt.webhooks.deliveries('a', a.id, { limit: 10 })).flatMap((d) => d.attempts);
    expect(await aAttempts()).toEqual([]);
    expect(stuck.holding).toBe(2);
    await until(
      async () =>
        (await rt.webhooks.deliveries('b', b.id, { limit: 10 })).every((d) => d.delivery.status === 'delivered'),
      "b's deliveries recorded",
    );

    // The two held attempts time out; the receiver answers from now on: A's other three are delivered,
    // the two that timed out are retried 10 s (the clock's) later, as documented.
    stuck.hold = false;
    await until(
      async () => (await aAttempts()).filter((x) => x.error === 'timeout').length === 2,
      "a's attempts timing out",
      20_000,
    );
    await until(
      async () =>
        (await rt.webhooks.deliveries('a', a.id, { limit: 10 })).filter((d) => d.delivery.status === 'delivered')
          .length === 3,
      "a's other three delivered",
    );
    const waiting = (await rt.webhooks.deliveries('a', a.id, { limit: 10 })).filter(
      (d) => d.delivery.status === 'pending',
    );
    expect(waiting.map((d) => d.delivery.nextAttemptAt)).toEqual([clock.now() + 10 * SEC, clock.now() + 10 * SEC]);
    clock.advance(10 * SEC);
    rt.webhooks.dispatcher.wake();
    await until(
      async () =>
        (await rt.webhooks.deliveries('a', a.id, { limit: 10 })).every((d) => d.delivery.status === 'delivered'),
      "a's retries delivered",
    );
    for (const d of waiting)
      expect((await rt.webhooks.delivery('a', a.id, d.delivery.id)).attempts.map((x) => [x.n, x.error])).toEqual([
        [1, 'timeout'],
        [2, null],
      ]);
    expect(stuck.maxHolding).toBe(2);
  });

  it('jittered backoff stays within half to all of the exponential delay', async () => {
    const { webhookBackoff } = await import('../../src/index.ts');
    const o = { baseDelayMs: 10 * SEC, maxDelayMs: 3600 * SEC };
    for (let n = 1; n <= 20; n++) {
      const full = Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** (n - 1));
      expect(webhookBackoff(n, { ...o, random: () => 0 })).toBe(full / 2);
      expect(webhookBackoff(n, { ...o, random: () => 1 })).toBe(full);
      const r = webhookBackoff(n, { ...o, random: Math.random });
      expect(r).toBeGreaterThanOrEqual(full / 2);
      expect(r).toBeLessThanOrEqual(full);
    }
  });

  /** Two dispatchers race over many deliveries: each is attempted exactly once. */
  async function race(a: Runtime, b: Runtime, hook: Receiver, n: number) {
    const w = await a.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    for (let i = 0; i < n; i++) await cancelledRun(i % 2 ? a : b);
    hook.delayMs = 15;
    await Promise.all([
      a.webhooks.dispatcher.drain(),
      b.webhooks.dispatcher.drain(),
      a.webhooks.dispatcher.drain(),
      b.webhooks.dispatcher.drain(),
    ]);
    const ids = hook.received.map((r) => r.headers['keel-delivery']);
    expect(ids).toHaveLength(n);
    expect(new Set(ids).size).toBe(n);
    const listed = await a.webhooks.deliveries('default', w.id, { limit: 1000 });
    expect(listed).toHaveLength(n);
    for (const d of listed) {
      expect(d.delivery.status).toBe('delivered');
      expect(d.attempts).toHaveLength(1);
    }
  }

  it('two runtimes on one SQLite file never attempt one delivery twice', async () => {
    const hook = await receiver();
    const dir = mkdtempSync(join(tmpdir(), 'keel-webhooks-'));
    const s1 = openSqliteStore({ path: join(dir, 'keel.db') });
    const s2 = openSqliteStore({ path: join(dir, 'keel.db') });
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    cleanups.push(() => s1.close());
    cleanups.push(() => s2.close());
    const clock = manualClock();
    await race(runtime(s1, { clock }).rt, runtime(s2, { clock }).rt, hook, 24);
  });

  it('two stores on one PostgreSQL schema never attempt one delivery twice', async () => {
    const hook = await receiver();
    const pg = await openTestPostgres();
    cleanups.push(() => pg.cleanup());
    const clock = manualClock();
    await race(runtime(pg.store, { clock }).rt, runtime(await pg.another(), { clock }).rt, hook, 24);
  });

  it('refuses to send to this machine or a private network unless allowed: at subscription, and before each attempt (what the host resolves to now)', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const { rt } = runtime(store, { allowPrivateNetworks: false });
    for (const url of [
      hook.url,
      'http://localhost:8080/hook',
      'http://10.1.2.3/hook',
      'http://192.168.0.10/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]:9000/hook',
      'http://[::ffff:127.0.0.1]/hook',
      'http://[fd00::1]/hook',
    ]) {
      await expect(rt.webhooks.create('default', { url, events: ['run.cancelled'] })).rejects.toThrow(
        /may not be sent to .*private|this machine/,
      );
    }
    // A public address is accepted as written.
    expect(
      (await rt.webhooks.create('default', { url: 'https://93.184.215.14/hook', events: ['run.completed'] })).url,
    ).toBe('https://93.184.215.14/hook');
    // Made where private networks are allowed, a subscription to this machine is refused by a
    // dispatcher that does not allow them, at the attempt (recorded, retried later).
    const allowed = runtime(store, { allowPrivateNetworks: true }).rt;
    const sub = await allowed.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    await cancelledRun(rt);
    await rt.webhooks.dispatcher.drain();
    expect(hook.received).toHaveLength(0);
    const [delivery] = await rt.webhooks.deliveries('default', sub.id, { limit: 10 });
    expect(delivery!.attempts[0]!.error).toMatch(/refused: 127\.0\.0\.1 is a private or local address/);
  });

  it('refuses IPv6 forms that embed a private IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible and -mapped), and localhost with a trailing dot', async () => {
    const { isPrivateAddress } = await import('../../src/index.ts');
    const store = memoryStore();
    const { rt } = runtime(store, { allowPrivateNetworks: false });
    const refused = [
      'http://[64:ff9b::7f00:1]/hook', // NAT64 of 127.0.0.1
      'http://[64:ff9b::10.1.2.3]/hook', // NAT64 of 10.1.2.3
      'http://[64:ff9b:1::5db8:d70e]/hook', // local-use NAT64: refused whatever it embeds
      'http://[2002:c0a8:1::1]/hook', // 6to4 of 192.168.0.1
      'http://[2002:a9fe:a9fe::]/hook', // 6to4 of 169.254.169.254
      'http://[::127.0.0.1]/hook', // IPv4-compatible
      'http://[::ffff:10.0.0.1]/hook', // IPv4-mapped
      'http://[::ffff:0:a00:1]/hook', // IPv4-translated (RFC 2765) of 10.0.0.1
      'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook', // Teredo, client 127.0.0.1
      'http://[2001:0:a00:1::1]/hook', // Teredo, server 10.0.0.1
      'http://localhost./hook',
      'http://LOCALHOST/hook',
    ];
    for (const url of refused) {
      await expect(rt.webhooks.create('default', { url, events: ['run.cancelled'] }), url).rejects.toMatchObject({
        code: 'validation',
        message: expect.stringMatching(/private|this machine/),
      });
    }
    // The same forms embedding a public address are public.
    for (const url of [
      'http://[64:ff9b::5db8:d70e]/hook',
      'http://[2002:5db8:d70e::1]/hook',
      'http://[2606:2800:220:1::1]/hook',
    ]) {
      expect((await rt.webhooks.create('default', { url, events: ['run.cancelled'] })).url).toBe(url);
    }
    expect(isPrivateAddress('64:ff9b::7f00:1')).toBe(true);
    expect(isPrivateAddress('64:ff9b::5db8:d70e')).toBe(false);
    expect(isPrivateAddress('fe80::1%eth0')).toBe(true);
    expect(isPrivateAddress('not an address')).toBe(true);
  });

  it('resolves the host once per attempt, checks every answer, and connects to exactly the address it checked (DNS rebinding)', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const clock = manualClock();
    let calls = 0;
    // A name that answers a public address first and a loopback address second: refused, never reached.
    const refusing = createRuntime({
      store,
      agents: [agentOf()],
      clock,
      webhooks: {
        allowPrivateNetworks: false,
        resolve: async (host) => {
          calls++;
          expect(host).toBe('hooks.example.test');
          return [
            { address: '93.184.215.14', family: 4 },
            { address: '127.0.0.1', family: 4 },
          ];
        },
      },
    });
    cleanups.push(() => refusing.close({ graceMs: 50 }));
    const w = await refusing.webhooks.create('default', {
      url: `http://hooks.example.test:${hook.port}/hook`,
      events: ['run.cancelled'],
    });
    await cancelledRun(refusing);
    expect(await refusing.webhooks.dispatcher.tick()).toBe(1);
    expect(calls).toBe(1);
    expect(hook.received).toEqual([]);
    const [d] = await refusing.webhooks.deliveries('default', w.id, { limit: 1 });
    expect(d!.attempts.map((a) => a.error)).toEqual([
      'refused: hooks.example.test resolves to 127.0.0.1, a private or local address',
    ]);
    // An answer in an embedded form is refused too.
    const nat64 = createRuntime({
      store: memoryStore(),
      agents: [agentOf()],
      clock,
      webhooks: { resolve: async () => [{ address: '64:ff9b::7f00:1', family: 6 }] },
    });
    cleanups.push(() => nat64.close({ graceMs: 50 }));
    const w64 = await nat64.webhooks.create('default', {
      url: `http://hooks.example.test:${hook.port}/hook`,
      events: ['run.cancelled'],
    });
    await cancelledRun(nat64);
    expect(await nat64.webhooks.dispatcher.tick()).toBe(1);
    expect((await nat64.webhooks.deliveries('default', w64.id, { limit: 1 }))[0]!.attempts[0]!.error).toMatch(
      /^refused: hooks\.example\.test resolves to 64:ff9b::7f00:1/,
    );
    expect(hook.received).toEqual([]);

    // Where private networks are allowed, the connection goes to the address resolved for the
    // attempt (the second answer of this name would be another address, where nobody listens),
    // with the URL's host in the Host header.
    const answers = ['127.0.0.1', '127.0.0.2'];
    let asked = 0;
    const pinned = createRuntime({
      store: memoryStore(),
      agents: [agentOf()],
      clock,
      webhooks: {
        allowPrivateNetworks: true,
        resolve: async () => [{ address: answers[Math.min(asked++, 1)]!, family: 4 }],
      },
    });
    cleanups.push(() => pinned.close({ graceMs: 50 }));
    const wp = await pinned.webhooks.create('default', {
      url: `http://hooks.example.test:${hook.port}/hook`,
      events: ['run.cancelled'],
    });
    await cancelledRun(pinned);
    expect(await pinned.webhooks.dispatcher.tick()).toBe(1);
    expect(asked).toBe(1);
    expect(hook.received.map((r) => r.headers.host)).toEqual([`hooks.example.test:${hook.port}`]);
    expect((await pinned.webhooks.deliveries('default', wp.id, { limit: 1 }))[0]!.delivery.status).toBe('delivered');
  });

  it('the dispatcher started with the workers delivers without being told, and stops with the runtime', async () => {
    const hook = await receiver();
    const store = memoryStore();
    const { rt } = runtime(store);
    await rt.webhooks.create('default', { url: hook.url, events: ['run.cancelled'] });
    rt.startWorker();
    await cancelledRun(rt);
    await hook.until(1);
    await rt.close();
    await cancelledRun(rt);
    await new Promise((r) => setTimeout(r, 150));
    expect(hook.received).toHaveLength(1);
  });
});
