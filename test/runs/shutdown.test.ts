/**
 * Graceful shutdown and concurrency of one worker.
 *
 * `worker.stop({ graceMs })` lets running steps finish and hands each run back at its next step
 * boundary (queued, lease released, so another worker takes it at once: the lease here is a
 * minute long, and nothing waits for it); a run whose tool outlives the grace period is let go
 * at once and its next owner recovers it from the checkpoint. One worker runs many runs at
 * once, each with its own abort signal.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  runScope,
  ScriptedModel,
  SqliteStore,
  tool,
  type Runtime,
  type ScriptEntry,
  type SessionEvent,
  type Tool,
} from '../../src/index.ts';
import { deferred, flush, type Deferred } from '../support/deferred.ts';

const LONG_LEASE_MS = 60_000;

let cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

function runtime(script: ScriptEntry[], tools: Tool[]): { rt: Runtime; store: SqliteStore } {
  const store = new SqliteStore({ path: ':memory:' });
  const agent = defineAgent({
    name: 'shutdown',
    model: new ScriptedModel(script, { loop: script.length === 1 && typeof script[0] === 'function' }),
    tools,
  });
  const rt = createRuntime({ store, agents: [agent], leaseMs: LONG_LEASE_MS, maxAttempts: 10 });
  cleanup.push(async () => {
    await rt.close({ graceMs: 0 });
    await store.close();
  });
  return { rt, store };
}

async function start(rt: Runtime, text = 'go') {
  const session = await rt.sessions.create();
  const { run } = await rt.sessions.send(session.id, text);
  return { sessionId: session.id, runId: run.id };
}

const ofType = (events: readonly SessionEvent[], type: string) => events.filter((e) => e.type === type);
const statusChanges = (events: readonly SessionEvent[]) =>
  ofType(events, 'run/status').map((e) => {
    const d = e.data as { from: string | null; to: string; reason?: string };
    return `${d.from}→${d.to}${d.reason ? ` (${d.reason})` : ''}`;
  });

describe('graceful shutdown', () => {
  it('lets the running step finish, hands the run back at the boundary, and a second worker continues it', async () => {
    const gate = deferred();
    const inTool = deferred();
    const executed: string[] = [];
    const { rt, store } = runtime(
      [
        { toolCalls: [{ id: 'c1', name: 'slow', input: {} }] },
        { toolCalls: [{ id: 'c2', name: 'quick', input: {} }] },
        { text: 'done' },
      ],
      [
        tool({
          name: 'slow',
          description: 'takes a while',
          input: z.object({}),
          execute: async () => {
            executed.push('slow');
            inTool.resolve();
            await gate.promise;
            return 'slow done';
          },
        }),
        tool({
          name: 'quick',
          description: 'is quick',
          input: z.object({}),
          execute: () => {
            executed.push('quick');
            return 'quick done';
          },
        }),
      ],
    );
    const { sessionId, runId } = await start(rt);
    const w1 = rt.startWorker({ id: 'W1', pollMs: 20 });
    await inTool.promise;

    const stopped = w1.stop({ graceMs: 60_000 });
    let stopDone = false;
    void stopped.then(() => (stopDone = true));
    await flush();
    expect(stopDone).toBe(false); // it waits for the step to finish
    expect(await store.runs.get(runId)).toMatchObject({ status: 'running', lease: { owner: 'W1' } });

    gate.resolve(); // well within the grace period
    await stopped;
    const handedBack = await store.runs.get(runId);
    expect(handedBack).toMatchObject({ status: 'queued', lease: null });
    let events = await rt.sessions.log.read(sessionId);
    // Step 1 finished (its result and its end are on record); step 2 was not started by W1.
    expect(ofType(events, 'tool/result').map((e) => (e.data as { output: unknown }).output)).toEqual([
      { type: 'text', value: 'slow done' },
    ]);
    expect(ofType(events, 'step/end').map((e) => e.step)).toEqual([1]);
    expect(ofType(events, 'step/start').map((e) => e.step)).toEqual([1]);
    expect(statusChanges(events)).toEqual([
      'null→queued',
      'queued→running (claimed by W1)',
      'running→queued (released by its worker)',
    ]);
    expect(await store.runs.getCheckpoint(runId)).toMatchObject({ step: 1 });

    // Another worker takes it at once: the lease was released, nothing waits for it to expire.
    rt.startWorker({ id: 'W2', pollMs: 20 });
    const done = await rt.runs.wait(runId, { until: 'terminal', timeoutMs: 20_000 });
    // (Whether a hand-back counts as a new attempt is the attempt policy's business, not asserted here.)
    expect(done).toMatchObject({ status: 'completed', lease: null });
    events = await rt.sessions.log.read(sessionId);
    expect(statusChanges(events).slice(3)).toEqual(['queued→running (claimed by W2)', 'running→completed']);
    expect(ofType(events, 'run/interrupted')).toEqual([]);
    expect(ofType(events, 'assistant/message').map((e) => e.step)).toEqual([1, 2, 3]);
    expect(executed).toEqual(['slow', 'quick']);
  });

  it('lets go at once of a run whose tool outlives the grace period; the next worker recovers it from the checkpoint', async () => {
    const forever = deferred(); // the first executions never finish on their own
    const bothRunning = deferred();
    const executions: Array<{ tool: string; key: string; toolCallId: string; signal: AbortSignal }> = [];
    const body =
      (name: string) =>
      async (_: unknown, ctx: { idempotencyKey: string; toolCallId: string; signal: AbortSignal }) => {
        executions.push({ tool: name, key: ctx.idempotencyKey, toolCallId: ctx.toolCallId, signal: ctx.signal });
        if (executions.length === 2) bothRunning.resolve();
        if (executions.length <= 2) await forever.promise; // ignores its abort signal
        return `${name} again`;
      };
    const { rt, store } = runtime(
      [
        {
          toolCalls: [
            { id: 'c-fetch', name: 'fetch', input: {} },
            { id: 'c-charge', name: 'charge', input: {} },
          ],
        },
        { text: 'done' },
      ],
      [
        tool({
          name: 'fetch',
          description: 'safe to repeat',
          input: z.object({}),
          idempotent: true,
          execute: body('fetch'),
        }),
        tool({ name: 'charge', description: 'not safe to repeat', input: z.object({}), execute: body('charge') }),
      ],
    );
    cleanup.push(async () => forever.resolve());
    const { sessionId, runId } = await start(rt);
    const w1 = rt.startWorker({ id: 'W1', pollMs: 20 });
    await bothRunning.promise;

    await w1.stop({ graceMs: 50 });
    // Let go at once: queued, no lease; the calls are on record without a result.
    expect(await store.runs.get(runId)).toMatchObject({ status: 'queued', lease: null });
    expect(executions.map((x) => x.signal.aborted)).toEqual([true, true]);
    let events = await rt.sessions.log.read(sessionId);
    expect(ofType(events, 'tool/call').map((e) => (e.data as { toolCallId: string }).toolCallId)).toEqual([
      'c-fetch',
      'c-charge',
    ]);
    expect(ofType(events, 'tool/result')).toEqual([]);
    expect(statusChanges(events).at(-1)).toMatch(/^running→queued \(released by W1/);
    // No step ended yet, so no checkpoint: the next owner resumes from the log alone.
    expect(await store.runs.getCheckpoint(runId)).toBeUndefined();

    rt.startWorker({ id: 'W2', pollMs: 20 });
    const done = await rt.runs.wait(runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: 'completed', lease: null });
    events = await rt.sessions.log.read(sessionId);
    expect(statusChanges(events).slice(-2)).toEqual(['queued→running (claimed by W2)', 'running→completed']);
    const calls = ofType(events, 'tool/call').map((e) => e.data as { toolCallId: string; idempotencyKey: string });
    expect(calls.map((c) => c.toolCallId)).toEqual(['c-fetch', 'c-charge']); // not recorded again
    const results = new Map(
      ofType(events, 'tool/result').map((e) => [
        (e.data as { toolCallId: string }).toolCallId,
        (e.data as { output: unknown }).output,
      ]),
    );
    expect(results.size).toBe(2);
    // The idempotent call ran again, with the same key; the other was not repeated: its outcome is unknown.
    expect(results.get('c-fetch')).toEqual({ type: 'text', value: 'fetch again' });
    expect(results.get('c-charge')).toMatchObject({ type: 'error', code: 'outcome_unknown' });
    expect(executions.map((x) => x.tool)).toEqual(['fetch', 'charge', 'fetch']);
    expect(executions[2]!.key).toBe(executions[0]!.key);
    expect(executions[2]!.key).toBe(calls[0]!.idempotencyKey);
    expect(ofType(events, 'assistant/message').map((e) => e.step)).toEqual([1, 2]);
  });
});

describe('one worker, many runs at once', () => {
  it('runs N runs simultaneously, each with its own abort signal: cancelling one leaves the others running', async () => {
    const N = 5;
    const gates = new Map<string, Deferred<void>>();
    const signals = new Map<string, AbortSignal>();
    const allStarted = deferred();
    // Each run calls `wait` once, then answers: decided by what its own conversation holds.
    const script: ScriptEntry[] = [
      (call) =>
        call.prompt.some((m) => m.role === 'tool') ? { text: 'done' } : { toolCalls: [{ name: 'wait', input: {} }] },
    ];
    const { rt, store } = runtime(script, [
      tool({
        name: 'wait',
        description: 'waits for its gate',
        input: z.object({}),
        execute: async (_, ctx) => {
          const runId = runScope.getStore()!.runId;
          signals.set(runId, ctx.signal);
          const gate = deferred();
          gates.set(runId, gate);
          if (gates.size === N) allStarted.resolve();
          await Promise.race([
            gate.promise,
            new Promise((_r, reject) =>
              ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
            ),
          ]);
          return 'released';
        },
      }),
    ]);
    const runs = [];
    for (let i = 0; i < N + 1; i++) runs.push(await start(rt, `task ${i}`));
    const worker = rt.startWorker({ id: 'W', concurrency: N, pollMs: 20 });
    await allStarted.promise;

    // N runs in flight at once on this worker; the one over its concurrency waits in the queue.
    expect(worker.active).toBe(N);
    const records = await Promise.all(runs.map((r) => store.runs.get(r.runId)));
    expect(records.filter((r) => r!.status === 'running' && r!.lease?.owner === 'W')).toHaveLength(N);
    const waitingOne = records.find((r) => r!.status === 'queued')!;
    expect(waitingOne.id).toBe(runs[N]!.runId);
    expect(new Set(signals.values()).size).toBe(N);

    const [victim, ...others] = [...gates.keys()];
    await rt.runs.cancel(victim!);
    expect(await store.runs.get(victim!)).toMatchObject({ status: 'cancelled' });
    expect(signals.get(victim!)!.aborted).toBe(true);
    for (const id of others) {
      expect(signals.get(id)!.aborted).toBe(false);
      expect(await store.runs.get(id)).toMatchObject({ status: 'running' });
    }
    // The freed slot takes the queued run.
    const last = await (async () => {
      for (;;) {
        if (gates.has(waitingOne.id)) return waitingOne.id;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    expect(worker.active).toBe(N);

    for (const id of [...others, last]) gates.get(id)!.resolve();
    for (const id of [...others, last]) {
      expect(await rt.runs.wait(id, { until: 'terminal', timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
      expect(signals.get(id)!.aborted).toBe(false);
    }
    const victimEvents = await rt.sessions.log.read((await store.runs.get(victim!))!.sessionId);
    expect(
      ofType(victimEvents, 'tool/result').map((e) => (e.data as { output: { code?: string } }).output.code),
    ).toEqual(['cancelled']);
  });

  it('keeps renewing its leases while it is busy: no timer starves behind the store queue', async () => {
    // A zero-latency model and instant tools: the whole workload is store operations, which a
    // synchronous driver completes as microtasks. Lease renewals (timers) must still get their turn.
    const RUNS = 20;
    const STEPS = 30;
    const store = new SqliteStore({ path: ':memory:' });
    const agent = defineAgent({
      name: 'busy',
      model: new ScriptedModel(
        [
          (call) =>
            call.prompt.filter((m) => m.role === 'tool').length >= STEPS
              ? { text: 'done' }
              : { toolCalls: [{ name: 'inc', input: {} }] },
        ],
        { loop: true },
      ),
      tools: [tool({ name: 'inc', description: 'instant', input: z.object({}), execute: () => 1 })],
      limits: { maxSteps: STEPS + 1 },
    });
    const rt = createRuntime({ store, agents: [agent], leaseMs: LONG_LEASE_MS, renewEveryMs: 5 });
    cleanup.push(async () => {
      await rt.close({ graceMs: 0 });
      await store.close();
    });
    let renewals = 0;
    const renew = store.claims.renewLease.bind(store);
    store.claims.renewLease = (...args) => {
      renewals++;
      return renew(...args);
    };
    const ids = [];
    for (let i = 0; i < RUNS; i++) ids.push((await start(rt, `task ${i}`)).runId);
    rt.startWorker({ id: 'W', concurrency: RUNS, pollMs: 20 });
    for (const id of ids)
      expect(await rt.runs.wait(id, { until: 'terminal', timeoutMs: 60_000 })).toMatchObject({
        status: 'completed',
        attempt: 1,
      });
    // 600 steps take far longer than 5 ms anywhere: renewal timers fired while the runs ran.
    expect(renewals).toBeGreaterThan(0);
  });
});

describe('a worker with bad options', () => {
  it('is refused with a validation error naming the option, and no worker starts', async () => {
    const { rt } = runtime([{ text: 'done' }], []);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ concurrency: 0 }, 'concurrency'],
      [{ concurrency: 1.5 }, 'concurrency'],
      [{ pollMs: 0 }, 'pollMs'],
      [{ pollMs: Number.POSITIVE_INFINITY }, 'pollMs'],
      [{ sweepMs: -1 }, 'sweepMs'],
      [{ id: '' }, 'id'],
    ];
    for (const [options, field] of cases) {
      let error: (Error & { code?: string }) | undefined;
      try {
        rt.startWorker(options as never);
      } catch (e) {
        error = e as Error & { code?: string };
      }
      expect([error?.code, error?.message.split(':')[0]], JSON.stringify(options)).toEqual(['validation', field]);
    }
    // None of them took the run: the one valid worker does.
    const { runId } = await start(rt);
    rt.startWorker({ concurrency: 1, pollMs: 50 });
    expect((await rt.runs.wait(runId, { timeoutMs: 5000 })).status).toBe('completed');
  });
});
