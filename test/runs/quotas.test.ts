/**
 * Tenant quotas through the runtime (ADR-0043), on SQLite and PostgreSQL: tokens reserved before
 * each model call so that a burst of parallel runs never overshoots, the `wait` policy (a durable
 * `waiting_for_quota` that wakes when the quota frees, across a UTC day boundary of a manual clock),
 * the `fail` policy, a retried step and a recovered run counted once, and runs per minute at creation.
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeProvider } from '../../bench/fake-provider.ts';
import {
  createRuntime,
  defineAgent,
  manualClock,
  QuotaExceededError,
  ScriptedModel,
  type Clock,
  type QuotaOptions,
  type Runtime,
  type Store,
  type TenantQuotas,
} from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Each call: 1 input token and 50 output tokens (its estimate, with maxOutputTokens 50, is at least that). */
const PER_CALL = 51;
/** Noon, UTC: a day boundary twelve hours away. */
const NOON = Date.UTC(2026, 11, 5, 12);

const answering = () => new ScriptedModel([{ text: 'done', usage: { input: 1, output: 50 } }], { loop: true });

const agentOn = (model: LanguageModelV4) =>
  defineAgent({
    name: 'a',
    model,
    settings: { maxOutputTokens: 50 },
    retry: { initialDelayMs: 1, maxDelayMs: 5 },
  });

function runtimeOn(
  store: Store,
  quotas: TenantQuotas,
  model: LanguageModelV4,
  clock?: Clock,
  source?: QuotaOptions['source'],
) {
  return createRuntime({
    store,
    agents: [agentOn(model)],
    ...(clock ? { clock } : {}),
    quotas: { default: quotas, recheckMs: 1000, ...(source ? { source } : {}) },
  });
}

async function setup(
  backend: 'sqlite' | 'postgres',
  quotas: TenantQuotas,
  o: { concurrency?: number; model?: LanguageModelV4; source?: QuotaOptions['source'] } = {},
) {
  const { store, close } = await openBackendStore(backend);
  const clock = manualClock(NOON);
  const model = o.model ?? answering();
  const rt = runtimeOn(store, quotas, model, clock, o.source);
  rt.startWorker({ pollMs: 5, sweepMs: 20, concurrency: o.concurrency ?? 16 });
  cleanups.push(async () => {
    await rt.close({ graceMs: 100 });
    await close();
  });
  return { rt, store, clock, model };
}

async function sendMany(rt: Runtime, n: number, tenant = 'acme', apiKey?: string) {
  const runs = [];
  for (let i = 0; i < n; i++) {
    const s = await rt.sessions.create({ tenant });
    runs.push((await rt.sessions.send(s.id, 'go', apiKey ? { apiKey } : {})).run);
  }
  return runs;
}

/** Waits (up to `ms`) until every run is in one of `statuses`; returns them. */
async function settle(rt: Runtime, ids: string[], statuses: string[], ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const runs = await Promise.all(ids.map((id) => rt.runs.get(id)));
    if (runs.every((r) => statuses.includes(r!.status)) || Date.now() > deadline) return runs.map((r) => r!);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const count = (runs: Array<{ status: string }>, status: string) => runs.filter((r) => r.status === status).length;

async function tokensToday(store: Store, tenant: string, now: number) {
  const day = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate());
  const month = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1);
  return (await store.quotas.usage(`tenant:${tenant}`, day, month)).tokensDay;
}

describe.each(['sqlite', 'postgres'] as const)('tenant quotas on %s', (backend) => {
  it('50 parallel runs against 10 runs’ worth of tokens: at most the quota is spent, the rest wait, and resume the next day', async () => {
    const { rt, store, clock } = await setup(backend, { tokensPerDay: 10 * PER_CALL });
    const runs = await sendMany(rt, 50);
    const ids = runs.map((r) => r.id);
    // Reservations in flight may make some wait for a recheck: the clock moves by the recheck until nothing is left in flight.
    let now = await settle(rt, ids, ['completed', 'waiting_for_quota']);
    for (let i = 0; i < 20 && (await tokensToday(store, 'acme', clock.now())).reserved > 0; i++) {
      clock.advance(1000);
      now = await settle(rt, ids, ['completed', 'waiting_for_quota']);
    }
    for (let i = 0; i < 5; i++) {
      clock.advance(1000);
      await new Promise((r) => setTimeout(r, 60));
      now = await settle(rt, ids, ['completed', 'waiting_for_quota']);
    }
    const first = count(now, 'completed');
    const spent = await tokensToday(store, 'acme', clock.now());
    expect(spent.used).toBeLessThanOrEqual(10 * PER_CALL);
    expect(spent.used).toBe(first * PER_CALL);
    // The estimate (1 prompt token + 50 of output at most) is the actual usage here: exactly 10 runs fit.
    expect(first).toBe(10);
    expect(count(now, 'waiting_for_quota')).toBe(50 - first);
    const waiting = now.find((r) => r.status === 'waiting_for_quota')!;
    expect(waiting.waiting).toMatchObject({ kind: 'quota', quota: { scope: 'tenant:acme', limit: 'tokensPerDay' } });
    // The usage report says the same.
    const report = await rt.runs.quota('acme');
    expect(report.tenant?.tokens_per_day).toMatchObject({ limit: 10 * PER_CALL, used: first * PER_CALL, reserved: 0 });
    // The next UTC day: the waiting runs wake by themselves, and again at most the quota is spent.
    clock.set(Date.UTC(2026, 11, 6, 0, 0, 1));
    const deadline = Date.now() + 10_000;
    while (count(now, 'completed') === first && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      now = await settle(rt, ids, ['completed', 'waiting_for_quota']);
    }
    for (let i = 0; i < 20 && (await tokensToday(store, 'acme', clock.now())).reserved > 0; i++) {
      clock.advance(1000);
      now = await settle(rt, ids, ['completed', 'waiting_for_quota']);
    }
    const second = count(now, 'completed') - first;
    expect(second).toBe(10);
    expect((await tokensToday(store, 'acme', clock.now())).used).toBe(second * PER_CALL);
    expect((await tokensToday(store, 'acme', clock.now())).used).toBeLessThanOrEqual(10 * PER_CALL);
    // Another tenant is not held by acme's quota.
    const [other] = await sendMany(rt, 1, 'globex');
    expect((await rt.runs.wait(other!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
  }, 60_000);

  it('the fail policy fails a run over its quota with quota_exceeded', async () => {
    const { rt } = await setup(backend, { tokensPerDay: PER_CALL, onLimit: 'fail' }, { concurrency: 1 });
    const [a] = await sendMany(rt, 1);
    expect((await rt.runs.wait(a!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    const [b] = await sendMany(rt, 1);
    const ended = await rt.runs.wait(b!.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(ended.status).toBe('failed');
    expect(ended.error).toMatchObject({
      kind: 'quota_exceeded',
      code: 'quota_exceeded',
      limit: 'tokensPerDay',
      max: PER_CALL,
    });
  }, 30_000);
});

describe.each(['sqlite', 'postgres'] as const)('quota waits and settlement on %s', (backend) => {
  it('a run over its quota waits until the next UTC day, and says so to webhooks', async () => {
    const { rt, store } = await setup(backend, { tokensPerDay: PER_CALL }, { concurrency: 1 });
    const hook = await rt.webhooks.create('acme', {
      url: 'https://example.com/hook',
      events: ['run.waiting_for_quota'],
    });
    const [a] = await sendMany(rt, 1);
    expect((await rt.runs.wait(a!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    const [b] = await sendMany(rt, 1);
    const waiting = await rt.runs.wait(b!.id, { until: 'settled', timeoutMs: 10_000 });
    expect(waiting.status).toBe('waiting_for_quota');
    // Nothing was reserved in flight: it tries again when the day ends.
    expect(waiting.waiting).toMatchObject({
      kind: 'quota',
      expiresAt: Date.UTC(2026, 11, 6),
      quota: { scope: 'tenant:acme', limit: 'tokensPerDay', max: PER_CALL, used: PER_CALL, reserved: 0 },
    });
    const deliveries = await store.webhooks.listDeliveries(hook.id, { limit: 10 });
    expect(deliveries.map((d) => d.eventType)).toEqual(['run.waiting_for_quota']);
    expect(JSON.parse(deliveries[0]!.body)).toMatchObject({ type: 'run.waiting_for_quota' });
    // Cancelled while it waits: it ends, and nothing more is charged.
    expect((await rt.runs.cancel(b!.id)).status).toBe('cancelled');
    expect(await tokensToday(store, 'acme', NOON)).toEqual({ used: PER_CALL, reserved: 0 });
  }, 30_000);

  it('a step whose model call is retried is charged once, at its actual usage', async () => {
    const model = new ScriptedModel([
      { error: { kind: 'server', message: 'try again' } },
      { error: { kind: 'overloaded', message: 'busy' } },
      { text: 'done', usage: { input: 1, output: 50 } },
    ]);
    const { rt, store } = await setup(backend, { tokensPerDay: 10 * PER_CALL }, { model });
    const [a] = await sendMany(rt, 1);
    expect((await rt.runs.wait(a!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    expect(model.calls.length).toBe(3);
    expect(await tokensToday(store, 'acme', NOON)).toEqual({ used: PER_CALL, reserved: 0 });
  }, 30_000);

  it('a failed model call leaves no reservation behind', async () => {
    const model = new ScriptedModel([{ error: { kind: 'bad_request', message: 'no' } }]);
    const { rt, store } = await setup(backend, { tokensPerDay: 10 * PER_CALL }, { model });
    const [a] = await sendMany(rt, 1);
    expect((await rt.runs.wait(a!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('failed');
    expect(await tokensToday(store, 'acme', NOON)).toEqual({ used: 0, reserved: 0 });
  }, 30_000);

  it('a run recovered from a worker that let go mid-call is charged once', async () => {
    const { store, close } = await openBackendStore(backend);
    cleanups.push(close);
    const clock = manualClock(NOON);
    // The first worker's call never ends: it lets go of the run at once (as if its process died).
    const stuck = new ScriptedModel([{ text: 'never', delayMs: 60_000 }]);
    const first = runtimeOn(store, { tokensPerDay: 10 * PER_CALL }, stuck, clock);
    first.startWorker({ pollMs: 5, sweepMs: 20 });
    const s = await first.sessions.create({ tenant: 'acme' });
    const { run } = await first.sessions.send(s.id, 'go');
    const deadline = Date.now() + 5000;
    while ((await tokensToday(store, 'acme', NOON)).reserved === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    const reserved = await tokensToday(store, 'acme', NOON);
    expect(reserved.used).toBe(0);
    expect(reserved.reserved).toBeGreaterThanOrEqual(PER_CALL);
    await first.close({ graceMs: 0 });
    // Another worker takes the run over: the same call reserved again replaces the first reservation.
    const second = runtimeOn(store, { tokensPerDay: 10 * PER_CALL }, answering(), clock);
    second.startWorker({ pollMs: 5, sweepMs: 20 });
    cleanups.push(() => second.close({ graceMs: 100 }));
    const ended = await second.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(ended.status).toBe('completed');
    expect(await tokensToday(store, 'acme', NOON)).toEqual({ used: PER_CALL, reserved: 0 });
  }, 30_000);
});

describe.each(['sqlite', 'postgres'] as const)('concurrent runs and API keys on %s', (backend) => {
  it('at most concurrentRuns of a tenant run at once; the others wait and all end', async () => {
    const provider = new FakeProvider({ latencyMs: 60 });
    const { rt, clock } = await setup(backend, { concurrentRuns: 2 }, { model: provider });
    const runs = await sendMany(rt, 6);
    const ids = runs.map((r) => r.id);
    let now = await settle(rt, ids, ['completed', 'waiting_for_quota']);
    for (let i = 0; i < 30 && count(now, 'completed') < 6; i++) {
      // Waiting runs try again after the recheck: the clock moves once nothing runs.
      clock.advance(1000);
      await new Promise((r) => setTimeout(r, 40));
      now = await settle(rt, ids, ['completed', 'waiting_for_quota']);
    }
    expect(count(now, 'completed')).toBe(6);
    expect(provider.maxInFlight).toBeLessThanOrEqual(2);
    expect(provider.maxInFlight).toBeGreaterThanOrEqual(1);
    // Every slot was given back.
    expect((await rt.runs.quota('acme')).tenant?.concurrent_runs).toMatchObject({ limit: 2, used: 0 });
  }, 60_000);

  it("an API key's own quota applies on top of its tenant's; runs per minute refuse a send with QuotaExceededError", async () => {
    const source: QuotaOptions['source'] = async (tenant, keyId) =>
      keyId === 'k1'
        ? { tokensPerDay: PER_CALL, onLimit: 'fail' }
        : tenant === 'acme'
          ? { runsPerMinute: 4 }
          : undefined;
    const { rt, store } = await setup(backend, {}, { concurrency: 1, source });
    const [a] = await sendMany(rt, 1, 'acme', 'k1');
    expect((await rt.runs.wait(a!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    const [b] = await sendMany(rt, 1, 'acme', 'k1');
    const failed = await rt.runs.wait(b!.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(failed.error).toMatchObject({ kind: 'quota_exceeded', scope: 'key:k1', limit: 'tokensPerDay' });
    // The tenant (no token quota of its own) and its other keys are not held by k1's.
    const [c] = await sendMany(rt, 1, 'acme', 'k2');
    expect((await rt.runs.wait(c!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    expect(await store.quotas.usage('key:k1', Date.UTC(2026, 11, 5), Date.UTC(2026, 11, 1))).toMatchObject({
      tokensDay: { used: PER_CALL, reserved: 0 },
    });
    expect(await rt.runs.quota('acme', 'k1')).toMatchObject({
      tenant: { scope: 'tenant:acme', runs_per_minute: { limit: 4, used: 3 } },
      key: { scope: 'key:k1', on_limit: 'fail', tokens_per_day: { limit: PER_CALL, used: PER_CALL, reserved: 0 } },
    });
    // The fourth run of the minute is made; the fifth is refused, saying when to try again.
    await sendMany(rt, 1, 'acme');
    const s = await rt.sessions.create({ tenant: 'acme' });
    const refused = await rt.sessions.send(s.id, 'go').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(QuotaExceededError);
    expect(refused).toMatchObject({ scope: 'tenant:acme', limit: 'runsPerMinute', max: 4 });
    expect((refused as QuotaExceededError).retryAfterMs).toBeGreaterThan(0);
    expect((refused as QuotaExceededError).retryAfterMs).toBeLessThanOrEqual(60_000);
    // Another tenant is not counted in acme's minute.
    expect(await sendMany(rt, 2, 'globex')).toHaveLength(2);
  }, 30_000);
});

describe('quota options', () => {
  it('refuses quotas it does not know', async () => {
    const { store, close } = await openBackendStore('sqlite');
    cleanups.push(close);
    expect(() =>
      createRuntime({
        store,
        agents: [defineAgent({ name: 'a', model: answering() })],
        quotas: { default: { tokensPerDya: 5 } as TenantQuotas },
      }),
    ).toThrow(/quotas.default.tokensPerDya: not a quota/);
  });
});
