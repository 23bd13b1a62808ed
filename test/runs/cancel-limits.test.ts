/**
 * Cancelling a run in every state it can be in, and the limits that end a run: its timeout and
 * the agent's step, token and cost budgets. Whatever ends a run, the session's history keeps no
 * dangling tool call and the session takes the next message.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  askUser,
  createRuntime,
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  tool,
  type AgentOptions,
  type RunRecord,
  type Runtime,
  type ScriptEntry,
  type SqliteStore,
  type WorkerOptions,
} from '../../src/index.ts';
import { deferred } from '../support/deferred.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import { gated } from '../support/runs-helpers.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function start(
  script: ScriptEntry[],
  o: Partial<Omit<AgentOptions, 'model' | 'name'>> & { worker?: WorkerOptions | false; loop?: boolean } = {},
): { rt: Runtime; store: SqliteStore; model: ScriptedModel } {
  const { worker, loop, ...agentOptions } = o;
  const store = openSqliteStore({ path: ':memory:' });
  const model = new ScriptedModel(script, { loop: loop ?? false });
  const rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model, ...agentOptions })] });
  if (worker !== false) rt.startWorker(worker ?? {});
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, store, model };
}

const lookup = tool({
  name: 'lookup',
  description: 'Looks up',
  input: z.object({ q: z.string() }),
  execute: ({ q }) => `found ${q}`,
});
const danger = tool({
  name: 'danger',
  description: 'Needs approval',
  input: z.object({}),
  approval: 'always',
  execute: () => 'done',
});
const FRESH: ScriptEntry = { text: 'fresh start' };

/**
 * The history keeps no dangling tool call: in the log (every tool call of an assistant message of
 * the run has a tool/result) and in the model context the next run starts from.
 */
async function expectNoDanglingCall(rt: Runtime, run: RunRecord): Promise<void> {
  const events = (await allEvents(rt.sessions, run.sessionId)).filter((e) => e.runId === run.id);
  const results = new Set(ofType(events, 'tool/result').map((e) => e.data.toolCallId));
  const calls = ofType(events, 'assistant/message').flatMap((e) =>
    e.data.message.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])),
  );
  expect(calls.filter((id) => !results.has(id))).toEqual([]);

  const { messages } = await rt.sessions.context(run.sessionId);
  const answered = new Set(messages.flatMap((m) => (m.role === 'tool' ? m.content.map((r) => r.toolCallId) : [])));
  const called = messages.flatMap((m) =>
    m.role === 'assistant' ? m.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])) : [],
  );
  expect(called.filter((id) => !answered.has(id))).toEqual([]);
  // A turn the loop left open was closed.
  const starts = ofType(events, 'turn/start').length;
  expect(ofType(events, 'turn/end').length).toBe(starts);
}

/** The session takes a new message: a new run is created and completes. */
async function expectUsable(rt: Runtime, sessionId: string, model: ScriptedModel): Promise<void> {
  const { run } = await rt.sessions.send(sessionId, 'start over');
  const done = await rt.runs.wait(run.id);
  expect(done.status).toBe('completed');
  // What the model got is a valid conversation: every call answered.
  const prompt = model.calls.at(-1)!.prompt;
  const answered = new Set(
    prompt.flatMap((m) =>
      m.role === 'tool' ? m.content.flatMap((p) => (p.type === 'tool-result' ? [p.toolCallId] : [])) : [],
    ),
  );
  const called = prompt.flatMap((m) =>
    m.role === 'assistant' ? m.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])) : [],
  );
  expect(called.filter((id) => !answered.has(id))).toEqual([]);
  expect(prompt.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'start over' }] });
}

const statusReasons = async (rt: Runtime, run: RunRecord) =>
  ofType(await allEvents(rt.sessions, run.sessionId), 'run/status')
    .filter((e) => e.runId === run.id)
    .map((e) => [e.data.to, e.data.reason]);

describe('cancel', () => {
  it('a queued run: cancelled before any worker took it', async () => {
    const { rt, model } = start([FRESH], { worker: false });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    const cancelled = await rt.runs.cancel(run.id, { reason: 'changed my mind' });
    expect(cancelled).toMatchObject({ status: 'cancelled', attempt: 0, lease: null });
    expect(await statusReasons(rt, run)).toEqual([
      ['queued', undefined],
      ['cancelled', 'changed my mind'],
    ]);
    rt.startWorker();
    await expectNoDanglingCall(rt, run);
    await expectUsable(rt, s.id, model);
    expect(model.calls).toHaveLength(1);
  });

  it('a running run mid-model-call: the stream is cut, the partial output is kept marked interrupted', async () => {
    const words = Array.from({ length: 300 }, (_, i) => `w${i} `);
    const { rt, model } = start([{ chunks: words, chunkDelayMs: 10 }, FRESH]);
    const s = await rt.sessions.create();
    const firstDelta = deferred();
    const off = rt.sessions.subscribe(s.id, (item) => {
      if (item.kind === 'delta' && item.delta.type === 'text/delta') firstDelta.resolve();
    });
    const { run } = await rt.sessions.send(s.id, 'talk');
    await firstDelta.promise;
    off();
    const cancelled = await rt.runs.cancel(run.id);
    expect(cancelled.status).toBe('cancelled');

    const events = (await allEvents(rt.sessions, s.id)).filter((e) => e.runId === run.id);
    const [partial] = ofType(events, 'assistant/message');
    expect(partial).toBeDefined();
    expect(partial!.data.finishReason).toBe('interrupted');
    expect(partial!.data.message.interrupted).toBe(true);
    const text = partial!.data.message.content.map((p) => (p.type === 'text' ? p.text : '')).join('');
    expect(text.startsWith('w0 ')).toBe(true);
    expect(text.length).toBeLessThan(words.join('').length);
    expect(ofType(events, 'turn/end').map((e) => e.data.reason)).toEqual(['cancelled']);
    // The context the next run starts from keeps it.
    const { messages } = await rt.sessions.context(s.id);
    expect(messages.find((m) => m.id === partial!.data.message.id)).toMatchObject({
      role: 'assistant',
      interrupted: true,
    });

    await expectNoDanglingCall(rt, run);
    await expectUsable(rt, s.id, model);
    expect(JSON.stringify(model.calls.at(-1)!.prompt)).toContain('w0 ');
  });

  it('a running run mid-tool: the tool gets the abort signal and its call a cancelled result', async () => {
    const g = gated();
    const { rt, model } = start([{ toolCalls: [{ id: 'w1', name: 'work', input: {} }] }, FRESH], { tools: [g.tool] });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'work');
    const signal = await g.started.promise;
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    expect(signal.aborted).toBe(true);
    const events = (await allEvents(rt.sessions, s.id)).filter((e) => e.runId === run.id);
    expect(ofType(events, 'tool/result').map((e) => [e.data.toolCallId, e.data.output])).toEqual([
      ['w1', expect.objectContaining({ type: 'error', code: 'cancelled' })],
    ]);
    await expectNoDanglingCall(rt, run);
    await expectUsable(rt, s.id, model);
  });

  it('a run waiting for approval: the pending call gets a cancelled result', async () => {
    const { rt, model } = start([{ toolCalls: [{ id: 'd1', name: 'danger', input: {} }] }, FRESH], { tools: [danger] });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'do it');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    expect(await rt.runs.cancel(run.id)).toMatchObject({ status: 'cancelled', waiting: null });
    const events = (await allEvents(rt.sessions, s.id)).filter((e) => e.runId === run.id);
    expect(ofType(events, 'tool/result').map((e) => [e.data.toolCallId, e.data.output])).toEqual([
      ['d1', { type: 'error', code: 'cancelled', message: 'the run was cancelled before this call had a result' }],
    ]);
    await expectNoDanglingCall(rt, run);
    await expectUsable(rt, s.id, model);
  });

  it('a run waiting for the user: the question gets a cancelled result', async () => {
    const { rt, model } = start(
      [{ toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'x', question: 'x?' }] } }] }, FRESH],
      { tools: [askUser()] },
    );
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'ask me');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    const events = (await allEvents(rt.sessions, s.id)).filter((e) => e.runId === run.id);
    expect(ofType(events, 'tool/result').map((e) => [e.data.toolCallId, e.data.output.type])).toEqual([
      ['q1', 'error'],
    ]);
    await expectNoDanglingCall(rt, run);
    await expectUsable(rt, s.id, model);
  });

  it('a paused run', async () => {
    const g = gated();
    const { rt, model } = start([{ toolCalls: [{ id: 'w1', name: 'work', input: {} }] }, FRESH], { tools: [g.tool] });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'work');
    await g.started.promise;
    await rt.runs.pause(run.id);
    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('paused');
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    expect(await statusReasons(rt, run)).toEqual([
      ['queued', undefined],
      ['running', expect.stringContaining('claimed by')],
      ['paused', 'pause requested'],
      ['cancelled', 'cancel requested'],
    ]);
    await expectNoDanglingCall(rt, run);
    await expectUsable(rt, s.id, model);
    // Only the first and the fresh run's requests: the paused run never ran again.
    expect(model.calls).toHaveLength(2);
  });
});

describe('limits', () => {
  it('timeoutMs: a run past its deadline is timed out, its running tool aborted', async () => {
    const g = gated();
    const { rt, model } = start([{ toolCalls: [{ id: 'w1', name: 'work', input: {} }] }, FRESH], { tools: [g.tool] });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'work', { timeoutMs: 300 });
    expect(run.deadlineAt).toBe(run.createdAt + 300);
    const done = await rt.runs.wait(run.id);
    expect(done.status).toBe('timed_out');
    // (On a very slow machine the deadline may pass before the tool starts: then it never runs.)
    if (g.started.settled) expect((await g.started.promise).aborted).toBe(true);
    expect((await statusReasons(rt, run)).at(-1)).toEqual(['timed_out', 'run timeout']);
    await expectNoDanglingCall(rt, run);
    await expectUsable(rt, s.id, model);
  });

  it('maxSteps: the run fails with a limit error once its steps are used up', async () => {
    // The model would call the tool forever.
    const { rt, model } = start([{ toolCalls: [{ name: 'lookup', input: { q: 'again' } }] }], {
      tools: [lookup],
      limits: { maxSteps: 2 },
      loop: true,
    });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'loop');
    const done = await rt.runs.wait(run.id);
    expect(done).toMatchObject({ status: 'failed', error: { kind: 'limit', limit: 'max_steps' } });
    expect(model.calls).toHaveLength(2);
    const last = ofType(await allEvents(rt.sessions, s.id), 'run/status').at(-1)!;
    expect(last.data).toMatchObject({
      to: 'failed',
      reason: 'max_steps',
      error: { kind: 'limit', limit: 'max_steps' },
    });
    await expectNoDanglingCall(rt, run);
  });

  it('maxTokens: the run fails with a limit error once its token budget is spent', async () => {
    const step = { toolCalls: [{ name: 'lookup', input: { q: 'x' } }], usage: { input: 10, output: 5 } };
    const { rt, model } = start([step, step, step, step, step], { tools: [lookup], limits: { maxTokens: 40 } });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'spend');
    const done = await rt.runs.wait(run.id);
    // 15 tokens a step: after three steps (45) the budget of 40 is spent.
    expect(done).toMatchObject({
      status: 'failed',
      error: { kind: 'limit', limit: 'budget_exceeded' },
      usage: { inputTokens: 30, outputTokens: 15 },
    });
    expect(model.calls).toHaveLength(3);
    const last = ofType(await allEvents(rt.sessions, s.id), 'run/status').at(-1)!;
    expect(last.data).toMatchObject({ to: 'failed', reason: 'budget_exceeded', error: { kind: 'limit' } });
    await expectNoDanglingCall(rt, run);
  });

  it('maxCostUsd (with pricing): the run fails with a limit error once its cost budget is spent', async () => {
    const step = { toolCalls: [{ name: 'lookup', input: { q: 'x' } }], usage: { input: 10, output: 5 } };
    // $2 a step: 10 input tokens at $0.1 each, 5 output tokens at $0.2 each.
    const { rt, model } = start([step, step, step, step, step], {
      tools: [lookup],
      pricing: { inputPerMTok: 100_000, outputPerMTok: 200_000 },
      limits: { maxCostUsd: 5 },
    });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'spend');
    const done = await rt.runs.wait(run.id);
    expect(done).toMatchObject({ status: 'failed', error: { kind: 'limit', limit: 'budget_exceeded' } });
    expect(done.cost).toBeCloseTo(6, 9);
    expect(model.calls).toHaveLength(3);
    const last = ofType(await allEvents(rt.sessions, s.id), 'run/status').at(-1)!;
    expect(last.data).toMatchObject({
      to: 'failed',
      reason: 'budget_exceeded',
      error: { kind: 'limit', message: expect.stringContaining('budget') },
    });
    await expectNoDanglingCall(rt, run);
  });
});
