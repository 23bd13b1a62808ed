/**
 * Waits of several kinds in one run (ADR-0015): a signal that arrives while the run waits for
 * something else is taken whatever moves the run on (a decision, a deadline, a steer that wakes a
 * sleep); one signal name waited for twice is refused to the second wait, never a hang; a question
 * denied at its deadline gets the `timeout` error; signal names, payloads and counts are checked.
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
  type Store,
} from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import { MAX_SIGNAL_PAYLOAD_BYTES, MAX_SIGNALS_PER_RUN } from '../../src/runs/waits.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function storeOf(backend: 'sqlite' | 'postgres'): Promise<Store> {
  if (backend === 'sqlite') {
    const s = openSqliteStore({ path: ':memory:' });
    cleanups.push(() => s.close());
    return s;
  }
  const pg = await openTestPostgres();
  cleanups.push(() => pg.cleanup());
  return pg.store;
}

async function start(backend: 'sqlite' | 'postgres', agents: AgentDefinition[], clock: Clock): Promise<Runtime> {
  const store = await storeOf(backend);
  const rt = createRuntime({ store, agents, clock });
  rt.startWorker({ pollMs: 10, sweepMs: 10 });
  cleanups.push(() => rt.close({ graceMs: 50 }));
  return rt;
}

const agentOf = (
  script: ScriptEntry[],
  tools: AgentDefinition['tools'],
  more: Partial<Parameters<typeof defineAgent>[0]> = {},
) => {
  const model = new ScriptedModel(script);
  return { model, agent: defineAgent({ name: 'a', model, tools, ...more }) };
};

/** The tool results the model was sent in its last call. */
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
const awaitCi = tool({
  name: 'await_ci',
  description: 'Waits for CI',
  input: z.object({}),
  execute: () => waitForSignal('ci'),
});

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`a signal kept while the run waits for something else (${backend})`, () => {
    it('approval and signal in one step: the signal comes first, then the approval; the run completes with both', async () => {
      const clock = manualClock();
      const { agent, model } = agentOf(
        [
          {
            toolCalls: [
              { id: 'd1', name: 'danger', input: { target: 'x' } },
              { id: 'c1', name: 'await_ci', input: {} },
            ],
          },
          { text: 'both done' },
        ],
        [danger(), awaitCi],
      );
      const rt = await start(backend, [agent], clock);
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'go');
      expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
      const delivered = await rt.runs.signal(run.id, 'ci', { ok: true });
      // The run waits for it: its wait takes it now, though the approval is still open.
      expect(delivered.consumed).toBe(true);
      expect(delivered.run.status).toBe('waiting_approval');
      await rt.runs.approve(run.id, 'd1');
      const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 });
      expect(done.status).toBe('completed');
      expect(lastToolResults(model)).toEqual([
        { type: 'text', value: 'did x' },
        { type: 'json', value: { ok: true } },
      ]);
      const events = await allEvents(rt.sessions, s.id);
      expect(ofType(events, 'wait/resolved').map((e) => e.data)).toEqual([
        { toolCallId: 'c1', kind: 'signal', by: 'signal', name: 'ci', output: { type: 'json', value: { ok: true } } },
      ]);
    });

    it('the approval is denied at its deadline: the kept signal is taken, the run goes on', async () => {
      const clock = manualClock();
      const { agent, model } = agentOf(
        [
          {
            toolCalls: [
              { id: 'd1', name: 'danger', input: { target: 'x' } },
              { id: 'c1', name: 'await_ci', input: {} },
            ],
          },
          { text: 'ok' },
        ],
        [danger({ timeoutMs: 60_000, onTimeout: { deny: 'too late' } }), awaitCi],
      );
      const rt = await start(backend, [agent], clock);
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'go');
      expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
      await rt.runs.signal(run.id, 'ci', { ok: true });
      clock.advance(61_000);
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
      expect(lastToolResults(model)).toEqual([
        { type: 'execution-denied', reason: 'too late' },
        { type: 'json', value: { ok: true } },
      ]);
    });

    it('a steer wakes a sleep: the signal that came during the sleep is taken', async () => {
      const clock = manualClock();
      const { agent, model } = agentOf(
        [
          {
            toolCalls: [
              { id: 'z1', name: 'sleep', input: { seconds: 3600 } },
              { id: 'c1', name: 'await_ci', input: {} },
            ],
          },
          { text: 'awake' },
        ],
        [sleepTool({ wakeOnSteer: true }), awaitCi],
      );
      const rt = await start(backend, [agent], clock);
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'go');
      // Signals come before time: it waits for the signal first.
      expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_signal');
      const delivered = await rt.runs.signal(run.id, 'ci', { ok: 1 });
      expect(delivered).toMatchObject({ consumed: true, run: { status: 'sleeping' } });
      await rt.runs.steer(run.id, 'wake up');
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
      expect(lastToolResults(model)).toEqual([
        { type: 'text', value: expect.stringMatching(/^woke at /) },
        { type: 'json', value: { ok: 1 } },
      ]);
    });

    it('a question and a signal: the signal comes while the question waits; the answer resumes the run', async () => {
      const clock = manualClock();
      const { agent, model } = agentOf(
        [
          {
            toolCalls: [
              { id: 'q1', name: 'ask_user', input: { questions: [{ id: 'color', question: 'Which?' }] } },
              { id: 'c1', name: 'await_ci', input: {} },
            ],
          },
          { text: 'ok' },
        ],
        [askUser(), awaitCi],
      );
      const rt = await start(backend, [agent], clock);
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'go');
      expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
      await rt.runs.signal(run.id, 'ci', 'green');
      await rt.runs.input(run.id, { color: 'red' });
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
      expect(lastToolResults(model)).toEqual([
        { type: 'json', value: { color: 'red' } },
        { type: 'json', value: 'green' },
      ]);
    });
  });

  describe(`one signal name waited for twice (${backend})`, () => {
    it('twice in one step: the first wait takes the delivery, the second is refused at once with an error result', async () => {
      const clock = manualClock();
      const { agent, model } = agentOf(
        [
          {
            toolCalls: [
              { id: 'c1', name: 'await_ci', input: {} },
              { id: 'c2', name: 'await_ci', input: {} },
            ],
          },
          { text: 'ok' },
        ],
        [awaitCi],
      );
      const rt = await start(backend, [agent], clock);
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'go');
      const waiting = await rt.runs.wait(run.id);
      expect(waiting.status).toBe('waiting_for_signal');
      expect(await rt.runs.signal(run.id, 'ci', 1)).toMatchObject({ consumed: true });
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
      expect(lastToolResults(model)).toEqual([
        { type: 'json', value: 1 },
        { type: 'error-text', value: expect.stringContaining('signal ci') },
      ]);
    });

    it('in two steps: the second wait is refused at once (the first took the only delivery), the run goes on', async () => {
      const clock = manualClock();
      const { agent, model } = agentOf(
        [
          { toolCalls: [{ id: 'c1', name: 'await_ci', input: {} }] },
          { toolCalls: [{ id: 'c2', name: 'await_ci', input: {} }] },
          { text: 'ok' },
        ],
        [awaitCi],
      );
      const rt = await start(backend, [agent], clock);
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'go');
      expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_signal');
      await rt.runs.signal(run.id, 'ci', 1);
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
      expect(lastToolResults(model)).toEqual([
        { type: 'json', value: 1 },
        { type: 'error-text', value: expect.stringMatching(/signal ci .*already/) },
      ]);
      const events = await allEvents(rt.sessions, s.id);
      expect(ofType(events, 'wait/resolved').map((e) => [e.data.toolCallId, e.data.by])).toEqual([
        ['c1', 'signal'],
        ['c2', 'signal'],
      ]);
    });
  });
}

describe('a question denied at its deadline', () => {
  it('gets the documented timeout error (not a denial of an approval)', async () => {
    const clock = manualClock();
    const { agent, model } = agentOf(
      [
        { toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'color', question: 'Which?' }] } }] },
        { text: 'no answer then' },
      ],
      [askUser()],
      { waits: { timeoutMs: 60_000, onTimeout: { deny: 'nobody answered' } } },
    );
    const rt = await start('sqlite', [agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    clock.advance(60_000);
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).status).toBe('completed');
    expect(lastToolResults(model)).toEqual([{ type: 'error-text', value: expect.stringContaining('nobody answered') }]);
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'tool/result').map((e) => e.data.output)).toEqual([
      { type: 'error', code: 'timeout', message: 'nobody answered' },
    ]);
    expect(ofType(events, 'wait/resolved').map((e) => e.data)).toEqual([
      {
        toolCallId: 'q1',
        kind: 'input',
        by: 'deadline',
        output: { type: 'error', code: 'timeout', message: 'nobody answered' },
      },
    ]);
  });
});

describe('signal names, payloads and counts', () => {
  async function waitingRun(): Promise<{ rt: Runtime; runId: string }> {
    const clock = manualClock();
    const { agent } = agentOf([{ toolCalls: [{ id: 'c1', name: 'await_ci', input: {} }] }, { text: 'ok' }], [awaitCi]);
    const rt = await start('sqlite', [agent], clock);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    await rt.runs.wait(run.id);
    return { rt, runId: run.id };
  }

  it('a name that breaks the rule waitForSignal applies is refused (validation), and nothing is stored', async () => {
    const { rt, runId } = await waitingRun();
    for (const name of ['has space', 'a/b', '', 'x'.repeat(129), 'nul\u0000']) {
      const e = await rt.runs.signal(runId, name, 1).catch((x: unknown) => x);
      expect(e, name).toBeInstanceOf(StoreError);
      expect((e as StoreError).code).toBe('validation');
    }
    expect((await rt.runs.get(runId)).status).toBe('waiting_for_signal');
  });

  it(`a payload over ${MAX_SIGNAL_PAYLOAD_BYTES} bytes of JSON is refused (payload_too_large)`, async () => {
    const { rt, runId } = await waitingRun();
    const e = await rt.runs.signal(runId, 'ci', 'x'.repeat(MAX_SIGNAL_PAYLOAD_BYTES)).catch((x: unknown) => x);
    expect((e as StoreError).code).toBe('payload_too_large');
    expect(await rt.store.waits.getSignal(runId, 'ci')).toBeUndefined();
    expect((await rt.runs.signal(runId, 'ci', 'x'.repeat(MAX_SIGNAL_PAYLOAD_BYTES - 100))).consumed).toBe(true);
  });

  it(`a run keeps at most ${MAX_SIGNALS_PER_RUN} signals: the next is refused (signal_limit)`, async () => {
    const { rt, runId } = await waitingRun();
    for (let i = 0; i < MAX_SIGNALS_PER_RUN; i++) await rt.runs.signal(runId, `other-${i}`, i);
    const e = await rt.runs.signal(runId, 'ci', 1).catch((x: unknown) => x);
    expect((e as StoreError).code).toBe('signal_limit');
    expect((await rt.runs.get(runId)).status).toBe('waiting_for_signal');
  });
});
