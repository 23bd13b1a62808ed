/**
 * Subagents as child runs (a `subagent` tool hands a task to another agent in a child session),
 * and agent versions: what a run records about the agent it runs with.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  StoreError,
  subagent,
  tool,
  type AgentDefinition,
  type Pricing,
  type RunRecord,
  type Runtime,
  type SqliteStore,
} from '../../src/index.ts';
import { aborted, deferred } from '../support/deferred.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function start(agents: AgentDefinition[], o: { worker?: boolean } = {}): { rt: Runtime; store: SqliteStore } {
  const store = openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents });
  if (o.worker !== false) rt.startWorker();
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, store };
}

// $1 per million input tokens, $2 per million output tokens.
const pricing: Pricing = { inputPerMTok: 1, outputPerMTok: 2 };
const delegate = subagent({ name: 'delegate', description: 'Hands a task to the child agent', agent: 'child' });

async function expectNoDanglingCall(rt: Runtime, run: RunRecord): Promise<void> {
  const events = (await allEvents(rt.sessions, run.sessionId)).filter((e) => e.runId === run.id);
  const results = new Set(ofType(events, 'tool/result').map((e) => e.data.toolCallId));
  const calls = ofType(events, 'assistant/message').flatMap((e) =>
    e.data.message.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])),
  );
  expect(calls.filter((id) => !results.has(id))).toEqual([]);
}

describe('subagents', () => {
  it('a parent waiting for its child holds no worker slot: with concurrency 1, two parents and their children all complete', async () => {
    const store = openSqliteStore({ path: ':memory:' });
    const parentModel = new ScriptedModel([
      { toolCalls: [{ id: 'p1', name: 'delegate', input: { task: 'one' } }] },
      { toolCalls: [{ id: 'p2', name: 'delegate', input: { task: 'two' } }] },
      { text: 'parent done' },
      { text: 'parent done' },
    ]);
    const rt = createRuntime({
      store,
      agents: [
        defineAgent({ name: 'parent', model: parentModel, tools: [delegate] }),
        defineAgent({ name: 'child', model: new ScriptedModel([{ text: 'c' }, { text: 'c' }]) }),
      ],
    });
    const worker = rt.startWorker({ concurrency: 1 });
    cleanups.push(async () => {
      await rt.close({ graceMs: 50 });
      await store.close();
    });
    const sessions = [await rt.sessions.create(), await rt.sessions.create()];
    const runs = await Promise.all(sessions.map(async (s) => (await rt.sessions.send(s.id, 'delegate it')).run));
    const ends = await Promise.all(runs.map((r) => rt.runs.wait(r.id, { until: 'terminal', timeoutMs: 5000 })));
    expect(ends.map((r) => r.status)).toEqual(['completed', 'completed']);
    const children = (await Promise.all(runs.map((r) => rt.runs.list({ parentRunId: r.id })))).flat();
    expect(children.map((c) => c.status)).toEqual(['completed', 'completed']);
    // Never more than one run executing at a time, parked parents aside.
    expect(worker.active).toBe(0);
  });

  it('erasing the parent session erases the child sessions its subagents worked in', async () => {
    const { rt, store } = start([
      defineAgent({
        name: 'parent',
        model: new ScriptedModel([
          { toolCalls: [{ id: 't1', name: 'delegate', input: { task: 'the private details' } }] },
          { text: 'done' },
        ]),
        tools: [delegate],
      }),
      defineAgent({ name: 'child', model: new ScriptedModel([{ text: 'handled the private details' }]) }),
    ]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'delegate it');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    const [child] = await rt.runs.list({ parentRunId: run.id });
    expect((await store.events.read(child!.sessionId)).length).toBeGreaterThan(0);
    await rt.sessions.erase(s.id);
    for (const id of [s.id, child!.sessionId]) {
      expect(await store.sessions.get(id)).toMatchObject({ erasedAt: expect.any(Number) });
      expect(await store.events.read(id)).toEqual([]);
    }
  });

  it('runs the child in a linked child session; its answer is the parent’s tool result; usage and cost roll up', async () => {
    const parentModel = new ScriptedModel([
      {
        toolCalls: [{ id: 't1', name: 'delegate', input: { task: 'find the answer' } }],
        usage: { input: 100, output: 10 },
      },
      { text: 'the child says 42', usage: { input: 200, output: 20 } },
    ]);
    const childModel = new ScriptedModel([{ text: '42', usage: { input: 50, output: 5 } }]);
    const { rt } = start([
      defineAgent({ name: 'parent', model: parentModel, tools: [delegate], pricing }),
      defineAgent({ name: 'child', model: childModel, pricing }),
    ]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'what is the answer?');
    const parent = await rt.runs.wait(run.id);
    expect(parent.status).toBe('completed');

    const children = await rt.runs.list({ parentRunId: run.id });
    expect(children).toHaveLength(1);
    const child = children[0]!;
    expect(child).toMatchObject({
      status: 'completed',
      parentRunId: run.id,
      parentToolCallId: 't1',
      agent: { name: 'child' },
    });
    expect(child.sessionId).not.toBe(s.id);
    const childSession = await rt.sessions.get(child.sessionId);
    expect(childSession.metadata).toEqual({
      parentRunId: run.id,
      parentSessionId: s.id,
      parentToolCallId: 't1',
      parentStep: 1,
    });
    expect(childSession.agent).toBe('child');
    // The child got the task as its message, and was born linked to its parent.
    expect(childModel.calls[0]!.prompt.at(-1)).toMatchObject({
      role: 'user',
      content: [{ type: 'text', text: 'find the answer' }],
    });
    const childEvents = await allEvents(rt.sessions, child.sessionId);
    expect(ofType(childEvents, 'run/status')[0]!.data).toMatchObject({ from: null, to: 'queued', parentRunId: run.id });

    // The child's answer is the result the parent's model sees.
    expect(parentModel.calls[1]!.prompt.at(-1)).toEqual({
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 't1',
          toolName: 'delegate',
          output: { type: 'json', value: { answer: '42', runId: child.id, sessionId: child.sessionId } },
        },
      ],
    });

    // Usage and cost: the parent's own two calls plus the child's.
    expect(child.usage).toMatchObject({ inputTokens: 50, outputTokens: 5 });
    expect(child.cost).toBeCloseTo((50 * 1 + 5 * 2) / 1e6, 12);
    expect(parent.usage).toMatchObject({ inputTokens: 350, outputTokens: 35 });
    expect(parent.cost).toBeCloseTo((300 * 1 + 30 * 2 + 50 * 1 + 5 * 2) / 1e6, 12);
    await expectNoDanglingCall(rt, parent);
  });

  it('a child session belongs to its parent’s tenant', async () => {
    const parentModel = new ScriptedModel([
      { toolCalls: [{ id: 't1', name: 'delegate', input: { task: 'find it' } }] },
      { text: 'found' },
    ]);
    const { rt } = start([
      defineAgent({ name: 'parent', model: parentModel, tools: [delegate] }),
      defineAgent({ name: 'child', model: new ScriptedModel([{ text: 'it' }]) }),
    ]);
    const s = await rt.sessions.create({ tenant: 'acme' });
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    const [child] = await rt.runs.list({ parentRunId: run.id });
    expect((await rt.sessions.get(child!.sessionId)).tenant).toBe('acme');
  });

  it('a parent that only lets go of its run (its worker stops) leaves its child alone; after takeover it finds the same child', async () => {
    const gate = deferred<string>();
    const started = deferred();
    const slow = tool({
      name: 'slow',
      description: 'Waits for the gate',
      input: z.object({}),
      idempotent: true,
      execute: async (_i, ctx) => {
        started.resolve();
        return Promise.race([gate.promise, aborted(ctx.signal).then(() => 'aborted')]);
      },
    });
    const parentModel = new ScriptedModel(
      [
        (call) =>
          call.prompt.some((m) => m.role === 'tool')
            ? { text: 'the child is done' }
            : { toolCalls: [{ id: 't1', name: 'delegate', input: { task: 'work slowly' } }] },
      ],
      { loop: true },
    );
    const childModel = new ScriptedModel(
      [
        (call) =>
          call.prompt.some((m) => m.role === 'tool')
            ? { text: 'slow work done' }
            : { toolCalls: [{ id: 'c1', name: 'slow', input: {} }] },
      ],
      { loop: true },
    );
    const { rt } = start(
      [
        defineAgent({ name: 'parent', model: parentModel, tools: [delegate] }),
        defineAgent({ name: 'child', model: childModel, tools: [slow] }),
      ],
      { worker: false },
    );
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    const w1 = rt.startWorker({ id: 'W1', concurrency: 2, pollMs: 20 });
    await started.promise;
    const [child] = await rt.runs.list({ parentRunId: run.id });
    // The worker stops at once (past its grace): both runs are handed back, none is cancelled.
    await w1.stop({ graceMs: 0 });
    expect((await rt.runs.get(child!.id)).status).toBe('queued');
    expect((await rt.runs.get(run.id)).status).toBe('queued');
    rt.startWorker({ id: 'W2', concurrency: 2, pollMs: 20 });
    gate.resolve('worked');
    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    // The same child, run to its end: never a second one.
    const children = await rt.runs.list({ parentRunId: run.id });
    expect(children.map((c) => [c.id, c.status])).toEqual([[child!.id, 'completed']]);
  });

  it('cancelling the parent while the child runs cancels the child', async () => {
    const started = deferred<AbortSignal>();
    const slow = tool({
      name: 'slow',
      description: 'Takes its time',
      input: z.object({}),
      execute: async (_i, ctx) => {
        started.resolve(ctx.signal);
        await aborted(ctx.signal);
        return 'stopped';
      },
    });
    const parentModel = new ScriptedModel([
      { toolCalls: [{ id: 't1', name: 'delegate', input: { task: 'work slowly' } }] },
    ]);
    const childModel = new ScriptedModel([{ toolCalls: [{ id: 'c1', name: 'slow', input: {} }] }]);
    const { rt } = start([
      defineAgent({ name: 'parent', model: parentModel, tools: [delegate], pricing }),
      defineAgent({ name: 'child', model: childModel, tools: [slow], pricing }),
    ]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    const childSignal = await started.promise;
    const [child] = await rt.runs.list({ parentRunId: run.id });
    expect(child!.status).toBe('running');

    const cancelled = await rt.runs.cancel(run.id);
    expect(cancelled.status).toBe('cancelled');
    const childDone = await rt.runs.wait(child!.id, { until: 'terminal' });
    expect(childDone.status).toBe('cancelled');
    expect(childSignal.aborted).toBe(true);
    await expectNoDanglingCall(rt, cancelled);
    await expectNoDanglingCall(rt, childDone);
    // Neither the parent nor the child asked its model again.
    expect(parentModel.calls).toHaveLength(1);
    expect(childModel.calls).toHaveLength(1);
    // What the child spent before it was cancelled still counts for its parent (one call each, 10 in, 5 out).
    expect(childDone.usage).toMatchObject({ inputTokens: 10, outputTokens: 5 });
    const parent = await rt.runs.get(run.id);
    expect(parent.usage).toMatchObject({ inputTokens: 20, outputTokens: 10 });
    expect(parent.cost).toBeCloseTo((2 * (10 * 1 + 5 * 2)) / 1e6, 12);
  });

  it('a parent that waits after its child ended counts the child’s usage, also when it is then cancelled; the ended child is left alone', async () => {
    const danger = tool({
      name: 'danger',
      description: 'Needs approval',
      input: z.object({}),
      approval: 'always',
      execute: () => 'x',
    });
    const parentModel = new ScriptedModel([
      { toolCalls: [{ id: 't1', name: 'delegate', input: { task: 'quick' } }] },
      { toolCalls: [{ id: 'd1', name: 'danger', input: {} }] },
    ]);
    const childModel = new ScriptedModel([{ text: 'quick answer', usage: { input: 100, output: 50 } }]);
    const { rt } = start([
      defineAgent({ name: 'parent', model: parentModel, tools: [delegate, danger], pricing }),
      defineAgent({ name: 'child', model: childModel, pricing }),
    ]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    const waiting = await rt.runs.wait(run.id);
    expect(waiting.status).toBe('waiting_approval');
    const [child] = await rt.runs.list({ parentRunId: run.id });
    expect(child!.status).toBe('completed');
    // Two parent calls (10 in, 5 out each) and the child's one.
    const expected = {
      usage: { inputTokens: 120, outputTokens: 60 },
      cost: (20 * 1 + 10 * 2 + 100 * 1 + 50 * 2) / 1e6,
    };
    expect(waiting.usage).toMatchObject(expected.usage);
    expect(waiting.cost).toBeCloseTo(expected.cost, 12);

    const cancelled = await rt.runs.cancel(run.id);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.usage).toMatchObject(expected.usage);
    expect(cancelled.cost).toBeCloseTo(expected.cost, 12);
    expect(await rt.runs.get(child!.id)).toEqual(child);
  });
});

describe('agent versions', () => {
  const lookup = tool({
    name: 'lookup',
    description: 'Looks up',
    input: z.object({ q: z.string() }),
    execute: ({ q }) => `found ${q}`,
  });

  it('a run records the agent name, version and spec it runs with; one session hosts runs of different agents', async () => {
    const m1 = new ScriptedModel([{ text: 'v1 here' }], { modelId: 'model-v1' });
    const m2 = new ScriptedModel([{ text: 'v2 here' }], { modelId: 'model-v2' });
    const mb = new ScriptedModel([{ text: 'b here' }], { modelId: 'model-b' });
    const v1 = defineAgent({
      name: 'a',
      version: '1',
      model: m1,
      system: 'You are version one.',
      tools: [lookup],
      settings: { temperature: 0 },
    });
    const v2 = defineAgent({
      name: 'a',
      version: '2',
      model: m2,
      system: 'You are version two.',
      limits: { maxSteps: 7 },
    });
    const b = defineAgent({ name: 'b', model: mb });
    const { rt } = start([v1, v2, b]);
    const s = await rt.sessions.create();

    const first = (await rt.sessions.send(s.id, 'one', { agent: 'a@1' })).run;
    expect(first.agent).toEqual({ name: 'a', version: '1' });
    expect(first.agentSpec).toMatchObject({
      name: 'a',
      version: '1',
      model: { provider: 'scripted', modelId: 'model-v1' },
      system: 'You are version one.',
      tools: [
        {
          name: 'lookup',
          description: 'Looks up',
          approval: 'never',
          idempotent: false,
          interactive: false,
          sequential: false,
        },
      ],
      settings: { temperature: 0 },
    });
    expect((first.agentSpec.tools as Array<{ inputSchema: unknown }>)[0]!.inputSchema).toMatchObject({
      type: 'object',
      properties: { q: { type: 'string' } },
    });
    expect((await rt.runs.wait(first.id)).status).toBe('completed');

    // Without a version: the latest registered one.
    const second = (await rt.sessions.send(s.id, 'two', { agent: 'a' })).run;
    expect(second.agent).toEqual({ name: 'a', version: '2' });
    expect(second.agentSpec).toMatchObject({
      model: { modelId: 'model-v2' },
      system: 'You are version two.',
      tools: [],
      limits: { maxSteps: 7 },
    });
    expect((await rt.runs.wait(second.id)).status).toBe('completed');

    const third = (await rt.sessions.send(s.id, 'three', { agent: 'b' })).run;
    expect(third.agent).toEqual({ name: 'b', version: '1' });
    expect((await rt.runs.wait(third.id)).status).toBe('completed');

    // Each run ran with its own agent's model, and saw the session's earlier turns.
    expect([m1.calls.length, m2.calls.length, mb.calls.length]).toEqual([1, 1, 1]);
    expect(m1.calls[0]!.prompt[0]).toEqual({ role: 'system', content: 'You are version one.' });
    expect(m2.calls[0]!.prompt[0]).toEqual({ role: 'system', content: 'You are version two.' });
    expect(JSON.stringify(mb.calls[0]!.prompt)).toContain('v1 here');
    expect(JSON.stringify(mb.calls[0]!.prompt)).toContain('v2 here');

    const runs = await rt.runs.list({ sessionId: s.id });
    expect(runs.map((r) => `${r.agent.name}@${r.agent.version}`).sort()).toEqual(['a@1', 'a@2', 'b@1']);
    const events = await allEvents(rt.sessions, s.id);
    expect(
      ofType(events, 'run/status')
        .filter((e) => e.data.to === 'queued')
        .map((e) => e.data.agent),
    ).toEqual([
      { name: 'a', version: '1' },
      { name: 'a', version: '2' },
      { name: 'b', version: '1' },
    ]);
    expect(ofType(events, 'turn/start').map((e) => e.data.agent)).toEqual([
      { name: 'a', version: '1' },
      { name: 'a', version: '2' },
      { name: 'b', version: '1' },
    ]);
  });

  it('an unknown agent or version is refused', async () => {
    const { rt } = start([defineAgent({ name: 'a', model: new ScriptedModel([]) })]);
    const s = await rt.sessions.create();
    for (const agent of ['nope', 'a@9']) {
      const err = await rt.sessions.send(s.id, 'hi', { agent }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as StoreError).code).toBe('unknown_agent');
    }
    expect(await rt.runs.list({ sessionId: s.id })).toEqual([]);
  });
});
