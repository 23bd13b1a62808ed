/**
 * Provider flow control (docs/flow-control.md) through the runtime: limits hold across two
 * runtimes on one SQLite file and across two stores on one PostgreSQL schema (the fake provider
 * counts the calls in flight and answers 429 over its limits), a requests window, tokens reserved
 * then settled, a 429's retry-after pausing the model for every worker, priorities, a crashed
 * holder's slot, a long wait letting go of the worker slot, and the waiting time in /metrics.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createRuntime,
  defineAgent,
  manualClock,
  openSqliteStore,
  ScriptedModel,
  type Clock,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import type { ModelLimits, FlowControlOptions } from '../../src/flow-control/index.ts';
import { instrumentRuntime } from '../../src/monitoring/instrument-runtime.ts';
import { FakeProvider } from '../../bench/fake-provider.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { agentWith, summarizerModel } from '../support/session-helpers.ts';
import { decideLimit } from '../../src/flow-control/decide-limit.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempPath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'keel-limits-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'keel.db');
}

interface Node {
  rt: Runtime;
  store: Store;
}

function node(
  store: Store,
  agents: ReturnType<typeof defineAgent>[],
  o: {
    limits?: ModelLimits;
    flowControl?: FlowControlOptions;
    clock?: Clock;
    concurrency?: number;
    worker?: boolean;
    closeStore?: boolean;
  } = {},
): Node {
  const rt = createRuntime({
    store,
    agents,
    limits: o.limits ?? {},
    flowControl: { pollMs: 20, ...o.flowControl },
    ...(o.clock ? { clock: o.clock } : {}),
  });
  if (o.worker !== false) rt.startWorker({ pollMs: 10, sweepMs: 1000, concurrency: o.concurrency ?? 16 });
  cleanups.push(async () => {
    await rt.close({ graceMs: 100 });
    if (o.closeStore !== false) await store.close();
  });
  return { rt, store };
}

async function sendMany(
  rt: Runtime,
  n: number,
  text = (i: number) => `task ${i}`,
  options: Parameters<Runtime['sessions']['send']>[2] = {},
) {
  const runs = [];
  for (let i = 0; i < n; i++) {
    const s = await rt.sessions.create();
    runs.push((await rt.sessions.send(s.id, text(i), options)).run);
  }
  return runs;
}

/** Waits (up to 5 s) until `check` holds; the assertion after it says what failed. */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

async function allEnd(rt: Runtime, runs: Array<{ id: string }>, timeoutMs = 20_000) {
  return Promise.all(runs.map((r) => rt.runs.wait(r.id, { until: 'terminal', timeoutMs })));
}

const agentOn = (model: FakeProvider | ScriptedModel, name = 'a') => defineAgent({ name, model });

describe('provider flow control', () => {
  it('a concurrency limit holds across two runtimes on one SQLite file', async () => {
    const path = tempPath();
    const provider = new FakeProvider({ latencyMs: 25, concurrency: 3 });
    const limits = { 'fake:limited-1': { concurrency: 3 } };
    const a = node(openSqliteStore({ path }), [agentOn(provider)], { limits, concurrency: 8 });
    const b = node(openSqliteStore({ path }), [agentOn(provider)], { limits, concurrency: 8 });
    const runs = [...(await sendMany(a.rt, 12)), ...(await sendMany(b.rt, 12))];
    const ended = await allEnd(a.rt, runs);
    expect(ended.map((r) => r.status)).toEqual(runs.map(() => 'completed'));
    expect(provider.maxInFlight).toBeLessThanOrEqual(3);
    expect(provider.maxInFlight).toBeGreaterThan(1);
    expect(provider.rejected).toBe(0);
    // Each call gave its slot back (the release is written after the call's stream ends, so it
    // may land just after its run does; two SQLite instances in one process also wait on each other).
    const deadline = Date.now() + 10_000;
    while ((await a.store.limits.state('fake:limited-1', Date.now())).slots > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    expect((await a.store.limits.state('fake:limited-1', Date.now())).slots).toBe(0);
  }, 30_000);

  it('a concurrency limit holds across two stores on one PostgreSQL schema', async () => {
    const pg = await openTestPostgres();
    cleanups.push(() => pg.cleanup());
    const provider = new FakeProvider({ latencyMs: 25, concurrency: 2 });
    const limits = { 'fake:*': { concurrency: 2 } };
    const a = node(pg.store, [agentOn(provider)], { limits, closeStore: false });
    const b = node(await pg.another(), [agentOn(provider)], { limits, closeStore: false });
    const runs = [...(await sendMany(a.rt, 8)), ...(await sendMany(b.rt, 8))];
    const ended = await allEnd(b.rt, runs);
    expect(ended.every((r) => r.status === 'completed')).toBe(true);
    expect(provider.maxInFlight).toBeLessThanOrEqual(2);
    expect(provider.rejected).toBe(0);
  }, 30_000);

  it('requests per window: never more started in any window than allowed', async () => {
    // The provider counts its window 20 ms short of Keel's 400 ms: a request reaches it some time
    // after Keel granted it (the grant's commit, the event loop of a loaded machine), and the
    // first of a window may be late by more than Keel's margin (20 ms at this window).
    const provider = new FakeProvider({ requests: 5, windowMs: 380 });
    const rt = node(openSqliteStore({ path: tempPath() }), [agentOn(provider)], {
      limits: { 'fake:limited-1': { requestsPerMinute: 5, windowMs: 400 } },
    }).rt;
    const runs = await sendMany(rt, 12);
    const ended = await allEnd(rt, runs);
    expect(ended.every((r) => r.status === 'completed')).toBe(true);
    expect(provider.rejected).toBe(0);
    const at = provider.servedAt;
    expect(at).toHaveLength(12);
    // 12 requests at 5 per 400 ms: the last starts in the third window, counted from the first
    // request (which may start before the last send returns).
    expect(at[11]! - at[0]!).toBeGreaterThanOrEqual(760);
    for (let i = 5; i < at.length; i++) expect(at[i]! - at[i - 5]!).toBeGreaterThanOrEqual(380);
  }, 30_000);

  it('tokens per window: an estimate is reserved, then settled to the actual usage', async () => {
    const provider = new FakeProvider({ inputTokens: 10, outputTokens: 5 });
    // Each call reserves ~1,030 tokens (its prompt / 4 + 1,024 of output): three would not fit in
    // 3,000 without the settlement to the 15 tokens actually used.
    const { rt, store } = node(openSqliteStore({ path: tempPath() }), [agentOn(provider)], {
      limits: { 'fake:limited-1': { tokensPerMinute: 3000 } },
    });
    const runs = await sendMany(rt, 8);
    const ended = await allEnd(rt, runs, 10_000);
    expect(ended.every((r) => r.status === 'completed')).toBe(true);
    // The settlement is written after each call's stream ends: it may land just after its run does.
    await eventually(async () => (await store.limits.state('fake:limited-1', Date.now())).tokens === 8 * 15);
    expect(await store.limits.state('fake:limited-1', Date.now())).toMatchObject({ requests: 8, tokens: 8 * 15 });
  }, 20_000);

  it('a 429 with retry-after pauses the model for every worker, not only the run that got it', async () => {
    const path = tempPath();
    const provider = new FakeProvider();
    provider.fail429 = { n: 1, retryAfterMs: 600 };
    const limits = { 'fake:limited-1': { concurrency: 10 } };
    const a = node(openSqliteStore({ path }), [agentOn(provider)], { limits });
    const b = node(openSqliteStore({ path }), [agentOn(provider)], { limits });
    const [first] = await sendMany(a.rt, 1);
    const t0 = Date.now();
    while (provider.rejected === 0) await new Promise((r) => setTimeout(r, 5));
    // The pause is written once the 429 came back to the worker.
    await eventually(async () => (await b.store.limits.state('fake:limited-1', Date.now())).pausedUntil > Date.now());
    const state = await b.store.limits.state('fake:limited-1', Date.now());
    expect(state.pausedUntil).toBeGreaterThan(Date.now() + 300);
    const others = await sendMany(b.rt, 3);
    await allEnd(b.rt, [first!, ...others]);
    // Nobody called the provider while the model was paused.
    expect(provider.servedAt.every((t) => t >= t0 + 550)).toBe(true);
    expect(provider.served).toBe(4);
    expect(provider.rejected).toBe(1);
  }, 20_000);

  it('interactive runs go before batch runs when both wait', async () => {
    const provider = new FakeProvider({ latencyMs: 300 });
    const rt = node(openSqliteStore({ path: tempPath() }), [agentOn(provider)], {
      limits: { 'fake:limited-1': { concurrency: 1 } },
    }).rt;
    const runs = await sendMany(rt, 1, () => 'first');
    await new Promise((r) => setTimeout(r, 30));
    runs.push(...(await sendMany(rt, 3, (i) => `batch ${i}`, { priority: 'batch' })));
    await new Promise((r) => setTimeout(r, 50));
    runs.push(...(await sendMany(rt, 3, (i) => `interactive ${i}`)));
    await allEnd(rt, runs);
    // The interactive runs came last but go first, in their order; the batch runs keep theirs.
    expect(provider.prompts).toEqual([
      'first',
      'interactive 0',
      'interactive 1',
      'interactive 2',
      'batch 0',
      'batch 1',
      'batch 2',
    ]);
  }, 20_000);

  it("a crashed holder's slot frees itself when its lease is over", async () => {
    const clock = manualClock();
    const provider = new FakeProvider();
    const { rt, store } = node(openSqliteStore({ path: tempPath() }), [agentOn(provider)], {
      limits: { 'fake:limited-1': { concurrency: 1 } },
      clock,
      flowControl: { slotLeaseMs: 30_000 },
    });
    // Another process took the only slot and died: nothing releases or renews it.
    await store.limits.acquire(
      {
        key: 'fake:limited-1',
        id: 'dead',
        waiter: 'dead',
        rank: 0,
        since: clock.now(),
        now: clock.now(),
        concurrency: 1,
        tokens: 0,
        windowMs: 60_000,
        slotLeaseMs: 30_000,
        waiterLeaseMs: 0,
      },
      decideLimit,
    );
    const [run] = await sendMany(rt, 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(provider.calls).toBe(0);
    expect((await rt.runs.get(run!.id))?.status).toBe('running');
    clock.advance(30_000);
    expect((await rt.runs.wait(run!.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(provider.calls).toBe(1);
  }, 20_000);

  it("a compaction's own model waits for its limits like an agent's model", async () => {
    const clock = manualClock();
    const store = openSqliteStore({ path: tempPath() });
    // The agent's model has no limit; the compaction's model (scripted:summarizer-1) has one slot,
    // which another process took before it died: nothing releases it until its lease is over.
    const model = new ScriptedModel([
      { text: 'step 1', toolCalls: [{ id: 't1', name: 'lookup', input: { q: 'a' } }], usage: { input: 900 } },
      { text: 'done', usage: { input: 100 } },
    ]);
    const summarizer = summarizerModel('LIMITED SUMMARY');
    const rt = createRuntime({
      store,
      agents: [agentWith(model)],
      compaction: { contextWindow: 1000, reserveTokens: 200, keepRecentTokens: 1, model: summarizer },
      limits: { 'scripted:summarizer-1': { concurrency: 1 } },
      flowControl: { pollMs: 20, slotLeaseMs: 30_000 },
      clock,
    });
    rt.startWorker({ pollMs: 10, sweepMs: 1000 });
    cleanups.push(async () => {
      await rt.close({ graceMs: 100 });
      await store.close();
    });
    expect(rt.flowControl?.keyFor(summarizer)).toBe('scripted:summarizer-1');
    await store.limits.acquire(
      {
        key: 'scripted:summarizer-1',
        id: 'dead',
        waiter: 'dead',
        rank: 0,
        since: clock.now(),
        now: clock.now(),
        concurrency: 1,
        tokens: 0,
        windowMs: 60_000,
        slotLeaseMs: 30_000,
        waiterLeaseMs: 0,
      },
      decideLimit,
    );
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'process it');
    // The step after the first is over the threshold: the compaction's call queues for the slot.
    await eventually(async () => (await store.limits.state('scripted:summarizer-1', clock.now())).waiters === 1);
    expect(await store.limits.state('scripted:summarizer-1', clock.now())).toMatchObject({ slots: 1, waiters: 1 });
    expect(summarizer.calls).toHaveLength(0);
    expect((await rt.runs.get(run.id))?.status).toBe('running');
    // The dead holder's lease ends: the compaction gets the slot, summarizes, and the run goes on.
    clock.advance(30_000);
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    expect(summarizer.calls).toHaveLength(1);
    const events = await rt.sessions.events(s.id, { limit: 1000 });
    expect(events.filter((e) => e.type === 'compaction').map((e) => (e.data as { summary: string }).summary)).toEqual([
      'LIMITED SUMMARY 1',
    ]);
    // It gave its slot back, and nobody waits any more.
    await eventually(async () => (await store.limits.state('scripted:summarizer-1', clock.now())).slots === 0);
    expect(await store.limits.state('scripted:summarizer-1', clock.now())).toMatchObject({ slots: 0, waiters: 0 });
  }, 20_000);

  it("a manual compaction's model is limited too, and an agent's limited model counts once", async () => {
    const store = openSqliteStore({ path: tempPath() });
    const model = new ScriptedModel([
      { text: 'answer 1' },
      { text: 'answer 2' },
      { text: 'SUMMARY BY THE AGENT MODEL' },
    ]);
    const summarizer = summarizerModel('MANUAL SUMMARY');
    const { rt } = node(store, [agentWith(model)], { limits: { 'scripted:*': { requestsPerMinute: 100 } } });
    const requests = async () => (await store.limits.state('scripted:*', Date.now())).requests;
    const s = await rt.sessions.create();
    const ask = async (text: string) =>
      (await rt.runs.wait((await rt.sessions.send(s.id, text)).run.id, { until: 'terminal' })).status;
    expect(await ask('question 1')).toBe('completed');
    expect(await requests()).toBe(1);
    // A model of the caller's: its request is counted in the key's window.
    expect(await rt.sessions.compact(s.id, { model: summarizer, keepRecentTokens: 1 })).toMatchObject({
      compacted: true,
    });
    expect(summarizer.calls).toHaveLength(1);
    expect(await requests()).toBe(2);
    expect(await ask('question 2')).toBe('completed');
    expect(await requests()).toBe(3);
    // The agent's model, limited already (the HTTP route passes it): its request is counted once.
    const limited = rt.resolveAgent('test-agent')!.model;
    expect(limited).not.toBe(model);
    expect(await rt.sessions.compact(s.id, { model: limited, keepRecentTokens: 1 })).toMatchObject({ compacted: true });
    expect(model.calls).toHaveLength(3);
    expect(await requests()).toBe(4);
  }, 20_000);

  it('a long wait does not hold a worker slot: another run goes meanwhile', async () => {
    const limitedModel = new FakeProvider();
    const free = new ScriptedModel([{ text: 'free' }], { provider: 'other', modelId: 'm' });
    const store = openSqliteStore({ path: tempPath() });
    const { rt } = node(store, [agentOn(limitedModel, 'limited'), agentOn(free as unknown as FakeProvider, 'free')], {
      limits: { 'fake:limited-1': { concurrency: 1 } },
      flowControl: { holdSlotMs: 50 },
      concurrency: 1,
    });
    await store.limits.pause('fake:limited-1', Date.now() + 1500);
    const s1 = await rt.sessions.create();
    const waiting = (await rt.sessions.send(s1.id, 'wait', { agent: 'limited' })).run;
    await new Promise((r) => setTimeout(r, 150));
    const s2 = await rt.sessions.create();
    const other = (await rt.sessions.send(s2.id, 'go', { agent: 'free' })).run;
    const t0 = Date.now();
    expect((await rt.runs.wait(other.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    // It finished while the first run still waited for the pause to end.
    expect(Date.now() - t0).toBeLessThan(1000);
    expect((await rt.runs.get(waiting.id))?.status).toBe('running');
    expect(limitedModel.calls).toBe(0);
    expect((await rt.runs.wait(waiting.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
  }, 20_000);

  it('the time waited for limits and the 429s seen appear in /metrics', async () => {
    const provider = new FakeProvider({ latencyMs: 30 });
    provider.fail429 = { n: 1, retryAfterMs: 100 };
    const { rt } = node(openSqliteStore({ path: tempPath() }), [agentOn(provider)], {
      limits: { 'fake:*': { concurrency: 1 } },
    });
    const telemetry = instrumentRuntime(rt);
    cleanups.push(() => telemetry.stop());
    await allEnd(rt, await sendMany(rt, 4));
    const { body } = await telemetry.metrics.render();
    const count = /keel_model_limit_wait_seconds_count\{model="fake:\*"\} (\d+)/.exec(body);
    expect(Number(count?.[1])).toBeGreaterThan(0);
    expect(body).toMatch(/keel_model_rate_limited_total\{model="fake:\*"\} 1/);
  }, 20_000);

  it('without limits for a model, its agent keeps the model itself (no store query per step)', async () => {
    const model = new ScriptedModel([{ text: 'x' }]);
    const rt = createRuntime({
      store: openSqliteStore({ path: ':memory:' }),
      agents: [defineAgent({ name: 'a', model })],
      limits: { 'openai:*': { concurrency: 1 } },
    });
    expect(rt.resolveAgent('a')!.model).toBe(model);
    expect(rt.flowControl?.keyFor(model)).toBeUndefined();
    await rt.store.close();
  });
});
