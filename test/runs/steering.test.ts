import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineAgent, ScriptedModel, SqliteStore, tool, type Runtime } from '../../src/index.ts';
import { deferred } from '../support/deferred.ts';
import { tempDbPath } from '../support/session-helpers.ts';

/**
 * Steering accepted for a run is answered by that run: the turn may only end when no steering is
 * pending, including steering stored at the last moment (by this process or another one).
 */
describe('steering is never lost', () => {
  let rt: Runtime | undefined;
  let store: SqliteStore | undefined;
  afterEach(async () => {
    await rt?.close({ graceMs: 0 });
    await store?.close();
  });

  const lastUserText = (prompt: ReadonlyArray<{ role: string; content: unknown }>) => {
    const last = [...prompt].reverse().find((m) => m.role === 'user');
    return (
      (last?.content as Array<{ type: string; text?: string }> | undefined)?.map((p) => p.text ?? '').join('') ?? ''
    );
  };

  function setup(onFinal?: () => void, path = ':memory:') {
    store = new SqliteStore({ path });
    const model = new ScriptedModel(
      [
        (call) => {
          const text = lastUserText(call.prompt as never);
          if (text.startsWith('also')) return { text: `answered: ${text}` };
          onFinal?.();
          return { chunks: Array.from({ length: 20 }, (_, i) => `part ${i} `), chunkDelayMs: 3 };
        },
      ],
      { loop: true },
    );
    rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model })] });
    return { rt, store, model };
  }

  async function steeringOf(runtime: Runtime, sessionId: string, runId: string) {
    const events = await runtime.sessions.log.read(sessionId, { runId });
    return events.filter((e) => e.type === 'user/message' && (e.data as { via: string }).via === 'steer');
  }

  it('steering sent while the final answer streams is answered in the same run, once', async () => {
    const streaming = deferred();
    const { rt: runtime, store: s, model } = setup(() => streaming.resolve());
    const session = await runtime.sessions.create();
    const { run } = await runtime.sessions.send(session.id, 'tell me');
    runtime.startWorker({ id: 'W', pollMs: 20 });
    await streaming.promise;
    const steered = await runtime.runs.steer(run.id, 'also this');
    const done = await runtime.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    const steering = await steeringOf(runtime, session.id, run.id);
    expect(steering.map((e) => (e.data as { message: { id: string } }).message.id)).toEqual([steered.message.id]);
    expect(await s.inputs.count(session.id, 'steer')).toBe(0);
    expect(model.calls).toHaveLength(2);
    expect((await runtime.sessions.transcript(session.id)).at(-1)).toMatchObject({
      kind: 'assistant',
      text: 'answered: also this',
    });
  });

  it('steering stored by another process at the very moment the final answer is complete is taken: the turn goes on', async () => {
    const db = tempDbPath();
    const { rt: runtime, store: s, model } = setup(undefined, db.path);
    // Another process: a connection of its own to the same file (no notice to this one).
    const other = new SqliteStore({ path: db.path });
    const session = await runtime.sessions.create();
    const { run } = await runtime.sessions.send(session.id, 'tell me');
    // When the final answer's last chunk has streamed, before the turn's end commits, another
    // process stores steering for the run.
    let chunks = 0;
    let stored: Promise<void> | undefined;
    const off = runtime.sessions.subscribe(session.id, (item) => {
      if (item.kind !== 'delta' || item.delta.type !== 'text/delta' || ++chunks !== 20) return;
      const message = {
        id: 'late-steer',
        role: 'user' as const,
        content: [{ type: 'text' as const, text: 'also the late one' }],
      };
      stored = other.inputs.add({
        id: message.id,
        sessionId: session.id,
        kind: 'steer',
        runId: run.id,
        payload: { message },
        createdAt: Date.now(),
      });
    });
    runtime.startWorker({ id: 'W', pollMs: 20 });
    const done = await runtime.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    off();
    await stored;
    expect(done.status).toBe('completed');
    const steering = await steeringOf(runtime, session.id, run.id);
    expect(steering.map((e) => (e.data as { message: { id: string } }).message.id)).toEqual(['late-steer']);
    expect(await s.inputs.count(session.id, 'steer')).toBe(0);
    expect(model.calls).toHaveLength(2);
    expect((await runtime.sessions.transcript(session.id)).at(-1)).toMatchObject({
      kind: 'assistant',
      text: 'answered: also the late one',
    });
    // One turn: one end, the steps numbered on; the refused end left nothing behind.
    const events = await runtime.sessions.log.read(session.id, { runId: run.id });
    expect(events.filter((e) => e.type === 'turn/start')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'turn/end')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'step/end').map((e) => e.step)).toEqual([1, 2]);
    await other.close();
    await runtime.close({ graceMs: 0 });
    await s.close();
    rt = undefined;
    store = undefined;
    db.cleanup();
  });

  it("steering a run that is cancelled before it takes it stays in the conversation: logged with the run's end, not left in the inbox", async () => {
    store = new SqliteStore({ path: ':memory:' });
    const started = deferred();
    const slow = tool({
      name: 'slow',
      description: 'slow',
      input: z.object({}),
      execute: (_i, ctx) =>
        new Promise<string>((resolve) => {
          started.resolve();
          ctx.signal.addEventListener('abort', () => resolve('aborted'));
        }),
    });
    rt = createRuntime({
      store,
      agents: [
        defineAgent({
          name: 'a',
          model: new ScriptedModel([{ toolCalls: [{ name: 'slow', input: {} }] }]),
          tools: [slow],
        }),
      ],
    });
    rt.startWorker({ pollMs: 20 });
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'go');
    await started.promise;
    const steered = await rt.runs.steer(run.id, 'also this, please');
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    expect(await store.inputs.count(session.id, 'steer')).toBe(0);
    const steering = await steeringOf(rt, session.id, run.id);
    expect(steering.map((e) => (e.data as { message: { id: string } }).message.id)).toEqual([steered.message.id]);
    // The next run sees it in its conversation.
    const context = await rt.sessions.context(session.id);
    expect(JSON.stringify(context.messages)).toContain('also this, please');
  });

  it('steering a run that has ended is refused and stores nothing', async () => {
    const { rt: runtime, store: s } = setup();
    const session = await runtime.sessions.create();
    const { run } = await runtime.sessions.send(session.id, 'tell me');
    runtime.startWorker({ id: 'W', pollMs: 20 });
    await runtime.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    await expect(runtime.runs.steer(run.id, 'too late')).rejects.toMatchObject({ name: 'IllegalTransitionError' });
    expect(await s.inputs.count(session.id, 'steer')).toBe(0);
  });

  describe('at every point of a run, each accepted steering message is logged once and answered in that run', () => {
    const points = [
      'before the first step',
      'while a step streams',
      'while a tool runs',
      'while the final answer streams',
    ] as const;
    it.each(points)('%s', async (point) => {
      store = new SqliteStore({ path: ':memory:' });
      const reached = deferred();
      const gate = deferred();
      // Only the tool point holds the tool until the steering is in.
      if (point !== 'while a tool runs') gate.resolve();
      const work = tool({
        name: 'work',
        description: 'slow work',
        input: z.object({}),
        execute: async () => {
          if (point === 'while a tool runs') reached.resolve();
          await gate.promise;
          return 'worked';
        },
      });
      const model = new ScriptedModel(
        [
          (call) => {
            const prompt = call.prompt as ReadonlyArray<{ role: string; content: unknown }>;
            const last = prompt.at(-1)!;
            const text = last.role === 'user' ? lastUserText(prompt) : '';
            if (text.startsWith('also')) return { text: `answered: ${text}` };
            const chunks = Array.from({ length: 20 }, (_, i) => `part ${i} `);
            if (!prompt.some((m) => m.role === 'tool')) {
              if (point === 'while a step streams') reached.resolve();
              return { chunks, chunkDelayMs: 3, toolCalls: [{ id: 'w1', name: 'work', input: {} }] };
            }
            if (point === 'while the final answer streams') reached.resolve();
            return { chunks, chunkDelayMs: 3 };
          },
        ],
        { loop: true },
      );
      rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model, tools: [work] })] });
      const session = await rt.sessions.create();
      const { run } = await rt.sessions.send(session.id, 'tell me');
      if (point === 'before the first step') reached.resolve();
      else rt.startWorker({ id: 'W', pollMs: 20 });
      await reached.promise;
      const steered = await rt.runs.steer(run.id, `also ${point}`);
      gate.resolve();
      if (point === 'before the first step') rt.startWorker({ id: 'W', pollMs: 20 });
      const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
      expect(done.status).toBe('completed');
      const steering = await steeringOf(rt, session.id, run.id);
      expect(steering.map((e) => (e.data as { message: { id: string } }).message.id)).toEqual([steered.message.id]);
      expect(await store.inputs.count(session.id, 'steer')).toBe(0);
      // The model was asked with the steering message last, and its answer is the run's last word.
      expect(model.calls.some((c) => lastUserText(c.prompt as never) === `also ${point}`)).toBe(true);
      expect((await rt.sessions.transcript(session.id)).at(-1)).toMatchObject({
        kind: 'assistant',
        text: `answered: also ${point}`,
      });
    });
  });
});
