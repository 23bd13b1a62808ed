/**
 * What a message to a busy session does (`ifBusy`): reject, enqueue, steer or interrupt. A run
 * waiting for the user never takes a message as its answer: answers go through `runs.input`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  askUser,
  createRuntime,
  defineAgent,
  openSqliteStore,
  RunBusyError,
  ScriptedModel,
  type AgentDefinition,
  type Runtime,
  type ScriptEntry,
  type SessionEvent,
  type SqliteStore,
} from '../../src/index.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import { gated } from '../support/runs-helpers.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(script: ScriptEntry[], tools: AgentDefinition['tools']): { rt: Runtime; store: SqliteStore; model: ScriptedModel } {
  const store = openSqliteStore({ path: ':memory:' });
  const model = new ScriptedModel(script);
  const rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model, tools })] });
  rt.startWorker();
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, store, model };
}


const work = { toolCalls: [{ id: 'w1', name: 'work', input: {} }] };

/** Tool calls of the run's assistant messages that have no tool/result. */
function dangling(events: readonly SessionEvent[], runId?: string): string[] {
  const mine = runId ? events.filter((e) => e.runId === runId) : events;
  const results = new Set(ofType(mine, 'tool/result').map((e) => e.data.toolCallId));
  return ofType(mine, 'assistant/message')
    .flatMap((e) => e.data.message.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])))
    .filter((id) => !results.has(id));
}

const userTexts = (events: readonly SessionEvent[]) => ofType(events, 'user/message').map((e) => e.data.message.content.map((p) => (p.type === 'text' ? p.text : '')).join(''));

describe('ifBusy: reject (the default)', () => {
  it('refuses with RunBusyError naming the active run, and appends nothing', async () => {
    const g = gated();
    const { rt, store } = setup([work, { text: 'done' }], [g.tool]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'first');
    await g.started.promise;
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;

    for (const ifBusy of [undefined, 'reject'] as const) {
      const err = await rt.sessions.send(s.id, 'second', ifBusy ? { ifBusy } : {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RunBusyError);
      expect((err as RunBusyError).activeRunId).toBe(run.id);
    }
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
    expect(await store.countInputs(s.id, 'message')).toBe(0);
    expect(await store.countInputs(s.id, 'steer')).toBe(0);
    expect(await rt.runs.list({ sessionId: s.id })).toHaveLength(1);

    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(userTexts(await allEvents(rt.sessions, s.id))).toEqual(['first']);
  });
});

describe('ifBusy: enqueue', () => {
  it('keeps the message out of the log until the active run ends; then it is the next run, created in the same transaction', async () => {
    const g = gated();
    const { rt, store, model } = setup([work, { text: 'first done' }, { text: 'second done' }, { text: 'third done' }], [g.tool]);
    const s = await rt.sessions.create();
    const { run: first } = await rt.sessions.send(s.id, 'first');
    await g.started.promise;

    const second = await rt.sessions.send(s.id, 'second', { ifBusy: 'enqueue' });
    const third = await rt.sessions.send(s.id, 'third', { ifBusy: 'enqueue' });
    expect(second.outcome).toBe('enqueued');
    expect(second.run.id).toBe(first.id);
    expect(third.outcome).toBe('enqueued');
    expect(await store.countInputs(s.id, 'message')).toBe(2);
    let events = await allEvents(rt.sessions, s.id);
    expect(userTexts(events)).toEqual(['first']);
    expect(events.some((e) => e.type === 'user/message' && e.data.message.id === second.message.id)).toBe(false);

    g.gate.resolve('ok');
    expect((await rt.runs.wait(first.id)).status).toBe('completed');
    const runs = () => rt.runs.list({ sessionId: s.id });
    // One at a time, in order: the first run's end made the second; the second's end made the third.
    for (const [i, message] of [
      [1, second.message],
      [2, third.message],
    ] as const) {
      const all = await runs();
      expect(all.length).toBeGreaterThanOrEqual(i + 1);
      const next = all.find((r) => r.triggerMessageId === message.id)!;
      expect(next).toBeDefined();
      expect((await rt.runs.wait(next.id)).status).toBe('completed');
    }
    expect(await store.countInputs(s.id, 'message')).toBe(0);

    events = await allEvents(rt.sessions, s.id);
    const all = await runs();
    expect(all).toHaveLength(3);
    const byTrigger = (id: string) => all.find((r) => r.triggerMessageId === id)!;
    for (const [prev, nextMessage] of [
      [first, second.message],
      [byTrigger(second.message.id), third.message],
    ] as const) {
      const next = byTrigger(nextMessage.id);
      const end = events.findIndex((e) => e.type === 'run/status' && e.runId === prev.id && e.data.to === 'completed');
      expect(end).toBeGreaterThan(-1);
      // Nothing between the end of one run and the birth of the next: they were one transaction.
      const [message, queued] = [events[end + 1]!, events[end + 2]!];
      expect(message).toMatchObject({ type: 'user/message', runId: next.id, data: { message: { id: nextMessage.id }, via: 'input' } });
      expect(queued).toMatchObject({ type: 'run/status', runId: next.id, data: { from: null, to: 'queued' } });
    }
    expect(userTexts(events)).toEqual(['first', 'second', 'third']);
    // The second run saw the first run's exchange and its own message, last.
    const prompt = JSON.stringify(model.calls[2]!.prompt);
    expect(prompt).toContain('first done');
    expect(model.calls[2]!.prompt.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'second' }] });
  });

  it('creates a run at once when the session is idle', async () => {
    const { rt } = setup([{ text: 'done' }], []);
    const s = await rt.sessions.create();
    const r = await rt.sessions.send(s.id, 'hi', { ifBusy: 'enqueue' });
    expect(r.outcome).toBe('created');
    expect((await rt.runs.wait(r.run.id)).status).toBe('completed');
  });
});

describe('ifBusy: steer', () => {
  it("puts the message into the active run's next step", async () => {
    const g = gated();
    const { rt, store, model } = setup([work, { text: 'done' }], [g.tool]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'first');
    await g.started.promise;

    const steered = await rt.sessions.send(s.id, 'also consider this', { ifBusy: 'steer' });
    expect(steered.outcome).toBe('steered');
    expect(steered.run.id).toBe(run.id);
    expect(await store.countInputs(s.id, 'steer')).toBe(1);
    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');

    // The second request ends with the tool result, then the steering message.
    expect(model.calls).toHaveLength(2);
    const prompt = model.calls[1]!.prompt;
    expect(prompt.at(-2)).toMatchObject({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'w1' }] });
    expect(prompt.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'also consider this' }] });

    const events = await allEvents(rt.sessions, s.id);
    const steer = ofType(events, 'user/message').filter((e) => e.data.via === 'steer');
    expect(steer).toHaveLength(1);
    expect(steer[0]).toMatchObject({ runId: run.id, data: { message: { id: steered.message.id } } });
    // It joined at the boundary between the steps.
    const stepStarts = ofType(events, 'step/start').filter((e) => e.runId === run.id);
    expect(steer[0]!.seq).toBeGreaterThan(stepStarts[0]!.seq);
    expect(steer[0]!.seq).toBeLessThan(stepStarts[1]!.seq);
    // Delivered exactly once: the input left the store when the log recorded it.
    expect(await store.countInputs(s.id, 'steer')).toBe(0);
    expect(await rt.runs.list({ sessionId: s.id })).toHaveLength(1);
  });
});

describe('ifBusy: interrupt', () => {
  it('cancels the active run (no dangling tool call), then starts the new one', async () => {
    const g = gated();
    const { rt, model } = setup([work, { text: 'fresh answer' }], [g.tool]);
    const s = await rt.sessions.create();
    const { run: old } = await rt.sessions.send(s.id, 'first');
    const signal = await g.started.promise;

    const r = await rt.sessions.send(s.id, 'never mind, do this', { ifBusy: 'interrupt' });
    expect(r.outcome).toBe('created');
    expect(r.run.id).not.toBe(old.id);
    expect(signal.aborted).toBe(true);
    const cancelled = await rt.runs.get(old.id);
    expect(cancelled.status).toBe('cancelled');

    expect((await rt.runs.wait(r.run.id)).status).toBe('completed');
    const events = await allEvents(rt.sessions, s.id);
    expect(dangling(events)).toEqual([]);
    const result = ofType(events, 'tool/result').find((e) => e.data.toolCallId === 'w1')!;
    expect(result.data.output).toMatchObject({ type: 'error', code: 'cancelled' });
    // The old run ended before the new one began.
    const oldEnd = events.find((e) => e.type === 'run/status' && e.runId === old.id && e.data.to === 'cancelled')!;
    const newBirth = events.find((e) => e.type === 'run/status' && e.runId === r.run.id)!;
    expect(oldEnd.seq).toBeLessThan(newBirth.seq);
    // The new run's request carries the interrupted exchange, closed.
    const prompt = model.calls[1]!.prompt;
    expect(prompt.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'never mind, do this' }] });
    expect(prompt.at(-2)).toMatchObject({ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'w1' }] });
  });
});

describe('a run waiting for the user', () => {
  const ask = { toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'city', question: 'Which city?' }] } }] };

  it('does not take a message as its answer: reject refuses it, runs.input answers', async () => {
    const { rt, store, model } = setup([ask, { text: 'Paris it is' }], [askUser()]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'plan a trip');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;

    const err = await rt.sessions.send(s.id, 'Paris').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunBusyError);
    expect((err as RunBusyError).activeRunId).toBe(run.id);
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
    expect(await rt.runs.get(run.id)).toMatchObject({ status: 'waiting_for_user' });
    expect(await store.countInputs(s.id, 'message')).toBe(0);

    await rt.runs.input(run.id, { city: 'Paris' });
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'user/answer').map((e) => e.data)).toEqual([{ toolCallId: 'q1', answer: { city: 'Paris' } }]);
    expect(userTexts(events)).toEqual(['plan a trip']);
    expect(model.calls[1]!.prompt.at(-1)).toMatchObject({ role: 'tool', content: [{ toolCallId: 'q1', output: { type: 'json', value: { city: 'Paris' } } }] });
  });

  it('an enqueued message waits for the run to end and is never its answer', async () => {
    const { rt } = setup([ask, { text: 'Rome it is' }, { text: 'next run' }], [askUser()]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'plan a trip');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    const queued = await rt.sessions.send(s.id, 'Paris', { ifBusy: 'enqueue' });
    expect(queued.outcome).toBe('enqueued');
    expect(await rt.runs.get(run.id)).toMatchObject({ status: 'waiting_for_user' });

    await rt.runs.input(run.id, { city: 'Rome' });
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    const next = (await rt.runs.list({ sessionId: s.id })).find((r) => r.triggerMessageId === queued.message.id)!;
    expect((await rt.runs.wait(next.id)).status).toBe('completed');
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'user/answer').map((e) => e.data.answer)).toEqual([{ city: 'Rome' }]);
    expect(userTexts(events)).toEqual(['plan a trip', 'Paris']);
  });
});

describe('idempotency: a key recorded with the effect', () => {
  it('records what the send did in its own transaction; a second send under the key is refused and changes nothing', async () => {
    const g = gated();
    const { rt, store } = setup([work, { text: 'done' }], [g.tool]);
    const s = await rt.sessions.create();
    const claim = { tenant: 'default', key: 'k1', fingerprint: 'f' };
    const { run, message } = await rt.sessions.send(s.id, 'first', { idempotency: claim });
    const recorded = await store.getIdempotency('default', 'k1');
    expect(recorded).toMatchObject({ status: 0, fingerprint: 'f' });
    expect(JSON.parse(recorded!.body)).toEqual({ outcome: 'created', message_id: message.id, run_id: run.id });
    await g.started.promise;
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;

    // As another process that missed the in-memory guard would: refused before anything else
    // (not run_busy, which the server would record as the key's answer), and an interrupt cancels nothing.
    for (const ifBusy of ['reject', 'steer', 'enqueue', 'interrupt'] as const) {
      await expect(rt.sessions.send(s.id, 'again', { ifBusy, idempotency: claim })).rejects.toMatchObject({ code: 'idempotency_in_progress' });
    }
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
    expect(await store.countInputs(s.id, 'steer')).toBe(0);
    expect(await store.countInputs(s.id, 'message')).toBe(0);

    // Another key on the busy session: the outcome is recorded too.
    const steered = await rt.sessions.send(s.id, 'also', { ifBusy: 'steer', idempotency: { ...claim, key: 'k2' } });
    expect(JSON.parse((await store.getIdempotency('default', 'k2'))!.body)).toEqual({ outcome: 'steered', message_id: steered.message.id, run_id: run.id });
    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(userTexts(await allEvents(rt.sessions, s.id))).toEqual(['first', 'also']);
  });
});
