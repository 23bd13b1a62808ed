/**
 * The waiting model (ADR-0015): deadlines on approvals and questions with each policy, durable
 * sleep (across a restart, cancelled, steered with and without waking), signals (before and
 * after the wait starts, once, checked against their schema), and two workers racing to wake
 * the same run. Time is a manual clock: a wait of an hour takes no time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  askUser,
  createRuntime,
  defineAgent,
  manualClock,
  openSqliteStore,
  ScriptedModel,
  sleepTool,
  StoreError,
  tool,
  waitForSignal,
  type AgentDefinition,
  type Clock,
  type Runtime,
  type ScriptEntry,
  type SqliteStore,
  type Store,
} from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { deferred } from '../support/deferred.ts';
import { allEvents, ofType, tempDbPath } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const HOUR = 3600_000;

function start(
  agents: AgentDefinition[],
  clock: Clock,
  o: { store?: SqliteStore; worker?: boolean } = {},
): { rt: Runtime; store: SqliteStore } {
  const store = o.store ?? openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents, clock });
  if (o.worker !== false) rt.startWorker({ pollMs: 10, sweepMs: 10 });
  let closed = false;
  cleanups.push(async () => {
    if (closed) return;
    closed = true;
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, store };
}

async function stop(p: { rt: Runtime; store: SqliteStore }): Promise<void> {
  await p.rt.close({ graceMs: 50 });
  await p.store.close();
}

const agentOf = (
  script: ScriptEntry[],
  tools: AgentDefinition['tools'],
  more: Partial<Parameters<typeof defineAgent>[0]> = {},
) => {
  const model = new ScriptedModel(script);
  return { model, agent: defineAgent({ name: 'a', model, tools, ...more }) };
};

/** The text of the tool results the model was sent in its last call. */
function lastToolResults(model: ScriptedModel): unknown[] {
  const prompt = model.calls.at(-1)!.prompt;
  return prompt.flatMap((m) =>
    m.role === 'tool' ? m.content.map((p) => (p.type === 'tool-result' ? p.output : null)) : [],
  );
}

const danger = (wait?: Parameters<typeof tool>[0]['wait']) =>
  tool({
    name: 'danger',
    description: 'Needs approval',
    input: z.object({ target: z.string() }),
    approval: 'always',
    execute: ({ target }) => `did ${target}`,
    ...(wait ? { wait } : {}),
  });

describe('deadlines on waits', () => {
  it('timed_out (the default policy): the run times out when nobody decides in time', async () => {
    const clock = manualClock();
    const { agent } = agentOf([{ toolCalls: [{ id: 'd1', name: 'danger', input: { target: 'x' } }] }], [danger()], {
      waits: { timeoutMs: 60_000 },
    });
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    const parked = await rt.runs.wait(run.id);
    expect(parked.status).toBe('waiting_approval');
    expect(parked.waiting).toMatchObject({
      expiresAt: clock.now() + 60_000,
      calls: [{ toolCallId: 'd1', deadline: { at: clock.now() + 60_000, on: 'timed_out' } }],
    });
    clock.advance(59_000);
    await new Promise((r) => setTimeout(r, 50));
    expect((await rt.runs.get(run.id)).status).toBe('waiting_approval');
    clock.advance(2_000);
    const ended = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 });
    expect(ended.status).toBe('timed_out');
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'run/status').at(-1)!.data).toMatchObject({
      to: 'timed_out',
      reason: 'the wait for a decision expired',
    });
  });

  it('a default denial (the tool’s own policy): the model sees the denial with its reason and the run goes on', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(
      [{ toolCalls: [{ id: 'd1', name: 'danger', input: { target: 'x' } }] }, { text: 'understood' }],
      [danger({ timeoutMs: 1000, onTimeout: { deny: 'nobody approved in time' } })],
      // The tool's policy wins over the agent's.
      { waits: { timeoutMs: 60_000 } },
    );
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).waiting).toMatchObject({ expiresAt: clock.now() + 1000 });
    clock.advance(1000);
    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 });
    expect(done).toMatchObject({ status: 'completed', attempt: 1 });
    expect(lastToolResults(model)).toEqual([{ type: 'execution-denied', reason: 'nobody approved in time' }]);
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'tool/decision').map((e) => e.data)).toEqual([
      { toolCallId: 'd1', approved: false, reason: 'nobody approved in time', by: 'deadline' },
    ]);
    expect(ofType(events, 'tool/decision')[0]!.v).toBe(3); // v3: ADR-0018 (unknownOutcome)
    // The call never ran: its result is the denial.
    expect(ofType(events, 'tool/result').map((e) => e.data.output)).toEqual([
      { type: 'error', code: 'denied', message: 'nobody approved in time' },
    ]);
  });

  it('a default answer (the agent’s policy): the question gets it, the model sees it as the answer', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(
      [
        {
          toolCalls: [
            { id: 'q1', name: 'ask_user', input: { questions: [{ id: 'color', question: 'Which color?' }] } },
          ],
        },
        { text: 'red it is' },
      ],
      [askUser()],
      { waits: { timeoutMs: 5 * 60_000, onTimeout: { answer: { color: 'red' } } } },
    );
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    clock.advance(5 * 60_000);
    expect(await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).toMatchObject({ status: 'completed' });
    expect(lastToolResults(model)).toEqual([{ type: 'json', value: { color: 'red' } }]);
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'user/answer').map((e) => e.data)).toEqual([
      { toolCallId: 'q1', answer: { color: 'red' }, by: 'deadline' },
    ]);
  });
});

describe('durable sleep', () => {
  const sleepScript = (after: ScriptEntry[] = [{ text: 'awake' }]): ScriptEntry[] => [
    { toolCalls: [{ id: 'z1', name: 'sleep', input: { seconds: 3600, reason: 'wait for the report' } }] },
    ...after,
  ];

  it('survives a restart: the run sleeps without a worker, a new runtime on the same file wakes it when the time comes, in the same run', async () => {
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const clock = manualClock(Date.UTC(2026, 0, 1));
    const first = agentOf(sleepScript([]), [sleepTool()]);
    let proc = start([first.agent], clock, { store: openSqliteStore({ path: db.path }) });
    const s = await proc.rt.sessions.create();
    const { run } = await proc.rt.sessions.send(s.id, 'go');
    const asleep = await proc.rt.runs.wait(run.id);
    expect(asleep).toMatchObject({
      status: 'sleeping',
      lease: null,
      waiting: { kind: 'sleep', expiresAt: clock.now() + HOUR },
    });
    expect((await proc.rt.runs.countByStatus()).sleeping).toBe(1);
    await stop(proc);

    const second = agentOf([{ text: 'awake' }], [sleepTool()]);
    proc = start([second.agent], clock, { store: openSqliteStore({ path: db.path }) });
    await new Promise((r) => setTimeout(r, 50));
    expect((await proc.rt.runs.get(run.id)).status).toBe('sleeping');
    clock.advance(HOUR);
    const done = await proc.rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 });
    expect(done).toMatchObject({ id: run.id, status: 'completed', attempt: 1, waiting: null });
    expect(lastToolResults(second.model)).toEqual([{ type: 'text', value: 'slept until 2026-01-01T01:00:00.000Z' }]);
    const events = await allEvents(proc.rt.sessions, s.id);
    expect(ofType(events, 'wait/resolved').map((e) => e.data)).toEqual([
      {
        toolCallId: 'z1',
        kind: 'sleep',
        by: 'clock',
        output: { type: 'text', value: 'slept until 2026-01-01T01:00:00.000Z' },
      },
    ]);
    expect(ofType(events, 'run/status').map((e) => e.data.to)).toEqual([
      'queued',
      'running',
      'sleeping',
      'queued',
      'running',
      'completed',
    ]);
  });

  it('validates its input: a sleep longer than the maximum is refused, and the model is told', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(
      [{ toolCalls: [{ id: 'z1', name: 'sleep', input: { seconds: 7200 } }] }, { text: 'ok' }],
      [sleepTool({ maxSeconds: 3600 })],
    );
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)).toEqual([{ type: 'error-text', value: expect.stringContaining('3600') }]);
  });

  it('cancel works while it sleeps: the sleep call gets a cancelled result, and the time passing later does nothing', async () => {
    const clock = manualClock();
    const { agent } = agentOf(sleepScript(), [sleepTool()]);
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('sleeping');
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    clock.advance(2 * HOUR);
    await new Promise((r) => setTimeout(r, 50));
    expect((await rt.runs.get(run.id)).status).toBe('cancelled');
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'tool/result').map((e) => e.data.output)).toEqual([
      { type: 'error', code: 'cancelled', message: expect.any(String) },
    ]);
    expect(ofType(events, 'wait/resolved')).toHaveLength(0);
  });

  it('steering waits in the inbox until the run wakes (the sleep does not wake on steering)', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(sleepScript(), [sleepTool()]);
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('sleeping');
    await rt.runs.steer(run.id, 'also check the logs');
    await new Promise((r) => setTimeout(r, 50));
    expect((await rt.runs.get(run.id)).status).toBe('sleeping');
    clock.advance(HOUR);
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    const sent = JSON.stringify(model.calls.at(-1)!.prompt);
    expect(sent).toContain('also check the logs');
    expect(sent).toContain('slept until');
  });

  it('steering wakes it early when the sleep says so (wakeOnSteer)', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(sleepScript(), [sleepTool({ wakeOnSteer: true })]);
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('sleeping');
    await rt.runs.steer(run.id, 'wake up, it is ready');
    // No time passes: the message wakes it.
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)).toEqual([
      { type: 'text', value: expect.stringMatching(/^woke at .*a message arrived$/) },
    ]);
    expect(JSON.stringify(model.calls.at(-1)!.prompt)).toContain('wake up, it is ready');
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'wait/resolved').map((e) => e.data.by)).toEqual(['steer']);
  });

  it('a message steered in while the step that sleeps still runs wakes the sleep as it starts (wakeOnSteer)', async () => {
    const clock = manualClock();
    const gate = deferred();
    const started = deferred();
    const slow = tool({
      name: 'slow',
      description: 'Takes a while',
      input: z.object({}),
      idempotent: true,
      execute: async () => {
        started.resolve();
        await gate.promise;
        return 'done';
      },
    });
    const { agent, model } = agentOf(
      [
        {
          toolCalls: [
            { id: 'z1', name: 'sleep', input: { seconds: 3600 } },
            { id: 's1', name: 'slow', input: {} },
          ],
        },
        { text: 'awake' },
      ],
      [sleepTool({ wakeOnSteer: true }), slow],
    );
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    await started.promise;
    // The run still runs the step whose sleep it is about to start: the message waits for it.
    await rt.runs.steer(run.id, 'wake up, it is ready');
    gate.resolve();
    // No time passes: the message that came before the sleep started wakes it.
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)[0]).toEqual({ type: 'text', value: expect.stringMatching(/a message arrived$/) });
    expect(JSON.stringify(model.calls.at(-1)!.prompt)).toContain('wake up, it is ready');
  });

  it('a message sent to its session to steer (ifBusy: steer) wakes it as runs.steer does (wakeOnSteer)', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(sleepScript(), [sleepTool({ wakeOnSteer: true })]);
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('sleeping');
    expect((await rt.sessions.send(s.id, 'wake up, it is ready', { ifBusy: 'steer' })).outcome).toBe('steered');
    // No time passes: the message wakes it.
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)).toEqual([
      { type: 'text', value: expect.stringMatching(/^woke at .*a message arrived$/) },
    ]);
    expect(JSON.stringify(model.calls.at(-1)!.prompt)).toContain('wake up, it is ready');
  });

  for (const backend of ['sqlite', 'postgres'] as const) {
    it(`two workers racing to wake the same run: one wake, one resumption (${backend})`, async () => {
      const clock = manualClock();
      // Two runtimes, as two processes: two stores (two connections, two nodes) on one database.
      let stores: [Store, Store];
      if (backend === 'postgres') {
        const pgs = await openTestPostgres();
        cleanups.push(() => pgs.cleanup());
        stores = [pgs.store, await pgs.another()];
      } else {
        const db = tempDbPath();
        cleanups.push(() => db.cleanup());
        stores = [openSqliteStore({ path: db.path }), openSqliteStore({ path: db.path })];
        for (const one of stores) cleanups.push(() => one.close());
      }
      const runtimes = stores.map((store, i) => {
        const rt = createRuntime({
          store,
          agents: [agentOf(i === 0 ? sleepScript() : [{ text: 'awake' }], [sleepTool()]).agent],
          clock,
        });
        cleanups.push(() => rt.close({ graceMs: 50 }));
        return rt;
      });
      const [b, c] = runtimes as [Runtime, Runtime];
      b.startWorker({ pollMs: 10, sweepMs: 10_000 });
      const s = await b.sessions.create();
      const { run } = await b.sessions.send(s.id, 'go');
      expect((await b.runs.wait(run.id)).status).toBe('sleeping');
      clock.advance(HOUR);
      // The expiry itself, four times at once from both: one wins.
      const results = await Promise.all([
        b.waits.expire(run.id),
        c.waits.expire(run.id),
        b.waits.expire(run.id),
        c.waits.expire(run.id),
      ]);
      expect(results.filter((r) => r !== undefined)).toHaveLength(1);
      // Workers on both race for the claim: the run resumes once.
      c.startWorker({ pollMs: 10, sweepMs: 10 });
      b.startWorker({ pollMs: 10, sweepMs: 10 });
      expect((await c.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
      const events = await allEvents(c.sessions, s.id);
      expect(ofType(events, 'wait/resolved')).toHaveLength(1);
      expect(ofType(events, 'run/status').map((x) => x.data.to)).toEqual([
        'queued',
        'running',
        'sleeping',
        'queued',
        'running',
        'completed',
      ]);
      expect(ofType(events, 'assistant/message')).toHaveLength(2);
    });
  }
});

describe('signals', () => {
  const ciTool = (gate?: Promise<void>) =>
    tool({
      name: 'await_ci',
      description: 'Waits for the CI result',
      input: z.object({}),
      execute: async () => {
        if (gate) await gate;
        return waitForSignal('ci', { schema: z.object({ ok: z.boolean() }) });
      },
    });
  const ciScript: ScriptEntry[] = [{ toolCalls: [{ id: 'c1', name: 'await_ci', input: {} }] }, { text: 'ci answered' }];

  it('after the wait starts: the payload resumes the run as the tool’s result; a second delivery is refused; a bad payload is refused and not stored', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(ciScript, [ciTool()]);
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    const waiting = await rt.runs.wait(run.id);
    expect(waiting).toMatchObject({
      status: 'waiting_for_signal',
      lease: null,
      waiting: { kind: 'signal', calls: [{ toolCallId: 'c1', kind: 'signal', wait: { kind: 'signal', name: 'ci' } }] },
    });

    const bad = await rt.runs.signal(run.id, 'ci', { ok: 'yes' }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(StoreError);
    expect((bad as StoreError).code).toBe('validation');
    expect(await rt.store.waits.getSignal(run.id, 'ci')).toBeUndefined();

    expect((await rt.runs.signal(run.id, 'ci', { ok: true })).consumed).toBe(true);
    const dup = await rt.runs.signal(run.id, 'ci', { ok: false }).catch((e: unknown) => e);
    expect((dup as StoreError).code).toBe('already_delivered');
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)).toEqual([{ type: 'json', value: { ok: true } }]);
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'wait/resolved').map((e) => e.data)).toEqual([
      { toolCallId: 'c1', kind: 'signal', by: 'signal', name: 'ci', output: { type: 'json', value: { ok: true } } },
    ]);
  });

  it('before the wait starts: the signal is kept and taken when the wait starts', async () => {
    const clock = manualClock();
    const gate = deferred<void>();
    const { agent, model } = agentOf(ciScript, [ciTool(gate.promise)]);
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    for (let i = 0; i < 100 && (await rt.runs.get(run.id)).status !== 'running'; i++)
      await new Promise((r) => setTimeout(r, 10));
    const early = await rt.runs.signal(run.id, 'ci', { ok: true });
    expect(early.consumed).toBe(false);
    expect(await rt.store.waits.getSignal(run.id, 'ci')).toMatchObject({ consumedAt: null, payload: { ok: true } });
    gate.resolve();
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)).toEqual([{ type: 'json', value: { ok: true } }]);
    expect((await rt.store.waits.getSignal(run.id, 'ci'))!.consumedAt).not.toBeNull();
    const dup = await rt.runs.signal(run.id, 'ci', { ok: true }).catch((e: unknown) => e);
    expect((dup as StoreError).code).toMatch(/already_delivered|illegal_transition/);
  });

  it('a signal deadline with a default payload: the tool gets it when nothing comes in time', async () => {
    const clock = manualClock();
    const t = tool({
      name: 'await_ci',
      description: 'Waits for CI',
      input: z.object({}),
      execute: (_i, ctx) =>
        waitForSignal('ci', { deadline: ctx.now!() + HOUR, onTimeout: { answer: { ok: false, why: 'no answer' } } }),
    });
    const { agent, model } = agentOf(ciScript, [t]);
    const { rt } = start([agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).waiting).toMatchObject({ expiresAt: clock.now() + HOUR });
    clock.advance(HOUR);
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)).toEqual([{ type: 'json', value: { ok: false, why: 'no answer' } }]);
  });
});
