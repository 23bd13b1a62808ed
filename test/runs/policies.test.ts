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

function setup(
  script: ScriptEntry[],
  tools: AgentDefinition['tools'],
): { rt: Runtime; store: SqliteStore; model: ScriptedModel } {
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

const userTexts = (events: readonly SessionEvent[]) =>
  ofType(events, 'user/message').map((e) =>
    e.data.message.content.map((p) => (p.type === 'text' ? p.text : '')).join(''),
  );

describe('a message for a busy session is checked when it is taken', () => {
  it('to steer (by the session or the run) or to wait its turn: refused, nothing kept, the active run not hurt', async () => {
    const g = gated();
    const { rt, store } = setup([work, { text: 'done' }], [g.tool]);
    const s = await rt.sessions.create();
    const active = await rt.sessions.send(s.id, 'one');
    await g.started.promise;
    const bad = [{ type: 'text', text: 1 }] as unknown as Parameters<Runtime['sessions']['send']>[1];
    await expect(rt.sessions.send(s.id, bad, { ifBusy: 'steer' })).rejects.toMatchObject({ code: 'invalid_event' });
    await expect(rt.sessions.send(s.id, bad, { ifBusy: 'enqueue' })).rejects.toMatchObject({ code: 'invalid_event' });
    await expect(rt.runs.steer(active.run.id, bad)).rejects.toMatchObject({ code: 'invalid_event' });
    // Nor does one that would interrupt the active run: it is checked before the cancel.
    await expect(rt.sessions.send(s.id, bad, { ifBusy: 'interrupt' })).rejects.toMatchObject({ code: 'invalid_event' });
    expect((await rt.runs.get(active.run.id)).cancelRequested).toBe(false);
    // Nothing of them was kept: no input waits, no run is queued behind the active one. (An
    // enqueued message enters the log with the active run's end: an invalid one failed that end.)
    expect(await store.inputs.list(s.id, 'steer')).toEqual([]);
    expect(await store.inputs.list(s.id, 'message')).toEqual([]);
    expect((await store.runs.list({ sessionId: s.id, limit: 10 })).map((r) => r.id)).toEqual([active.run.id]);
    g.gate.resolve('ok');
    expect((await rt.runs.wait(active.run.id, { timeoutMs: 5000 })).status).toBe('completed');
  });
});

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
    expect(await store.inputs.count(s.id, 'message')).toBe(0);
    expect(await store.inputs.count(s.id, 'steer')).toBe(0);
    expect(await rt.runs.list({ sessionId: s.id })).toHaveLength(1);

    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(userTexts(await allEvents(rt.sessions, s.id))).toEqual(['first']);
  });
});

describe('ifBusy: enqueue', () => {
  it('gives each message its own run at once, queued behind the active one; they start in order, each message entering the log as its run comes up', async () => {
    const g = gated();
    const { rt, store, model } = setup(
      [work, { text: 'first done' }, { text: 'second done' }, { text: 'third done' }],
      [g.tool],
    );
    const s = await rt.sessions.create();
    const { run: first } = await rt.sessions.send(s.id, 'first');
    await g.started.promise;

    const second = await rt.sessions.send(s.id, 'second', { ifBusy: 'enqueue' });
    const third = await rt.sessions.send(s.id, 'third', { ifBusy: 'enqueue' });
    for (const q of [second, third]) {
      expect(q.outcome).toBe('enqueued');
      expect(q.run).toMatchObject({ status: 'queued', queuedBehind: true, turn: null, triggerMessageId: q.message.id });
      expect(q.run.id).not.toBe(first.id);
    }
    expect(second.run.id).not.toBe(third.run.id);
    // The session's active run is still the first; the queued ones wait in the inbox, out of the log.
    expect((await store.runs.active(s.id))!.id).toBe(first.id);
    expect(await store.inputs.count(s.id, 'message')).toBe(2);
    let events = await allEvents(rt.sessions, s.id);
    expect(userTexts(events)).toEqual(['first']);
    expect(
      ofType(events, 'run/status')
        .filter((e) => e.runId === second.run.id)
        .map((e) => e.data),
    ).toEqual([
      {
        from: null,
        to: 'queued',
        attempt: 0,
        agent: { name: 'a', version: '1' },
        reason: `queued behind run ${first.id}`,
      },
    ]);

    g.gate.resolve('ok');
    // Each can be waited on by its own id; they end in order.
    const ends = await Promise.all([first, second.run, third.run].map((r) => rt.runs.wait(r.id)));
    expect(ends.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    expect(ends.map((r) => r.turn)).toEqual([1, 2, 3]);
    expect(ends[1]!.startedAt!).toBeGreaterThanOrEqual(ends[0]!.endedAt!);
    expect(ends[2]!.startedAt!).toBeGreaterThanOrEqual(ends[1]!.endedAt!);
    expect(await store.inputs.count(s.id, 'message')).toBe(0);

    events = await allEvents(rt.sessions, s.id);
    expect(await rt.runs.list({ sessionId: s.id })).toHaveLength(3);
    for (const [prev, next, text] of [
      [first, second, 'second'],
      [second.run, third, 'third'],
    ] as const) {
      const end = events.findIndex((e) => e.type === 'run/status' && e.runId === prev.id && e.data.to === 'completed');
      expect(end).toBeGreaterThan(-1);
      // The next message enters the log right after the end of the run before it: one transaction.
      expect(events[end + 1]).toMatchObject({
        type: 'user/message',
        runId: next.run.id,
        data: { message: { id: next.message.id }, via: 'input' },
      });
      expect(userTexts([events[end + 1]!])).toEqual([text]);
    }
    expect(userTexts(events)).toEqual(['first', 'second', 'third']);
    // The second run saw the first run's exchange and its own message, last.
    const prompt = JSON.stringify(model.calls[2]!.prompt);
    expect(prompt).toContain('first done');
    expect(model.calls[2]!.prompt.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'second' }] });
  });

  it('a queued run can be cancelled before it starts: its message never enters the log, and the next one takes its place', async () => {
    const g = gated();
    const { rt, store } = setup([work, { text: 'first done' }, { text: 'third done' }], [g.tool]);
    const s = await rt.sessions.create();
    const { run: first } = await rt.sessions.send(s.id, 'first');
    await g.started.promise;
    const second = await rt.sessions.send(s.id, 'second', { ifBusy: 'enqueue' });
    const third = await rt.sessions.send(s.id, 'third', { ifBusy: 'enqueue' });

    const cancelled = await rt.runs.cancel(second.run.id);
    expect(cancelled).toMatchObject({ status: 'cancelled', queuedBehind: true });
    expect(await rt.runs.get(first.id)).toMatchObject({ status: 'running' });
    expect(await store.inputs.count(s.id, 'message')).toBe(1);

    g.gate.resolve('ok');
    expect((await rt.runs.wait(third.run.id)).status).toBe('completed');
    expect((await rt.runs.get(second.run.id)).status).toBe('cancelled');
    const events = await allEvents(rt.sessions, s.id);
    expect(userTexts(events)).toEqual(['first', 'third']);
    expect(
      ofType(events, 'run/status')
        .filter((e) => e.runId === second.run.id)
        .map((e) => e.data.to),
    ).toEqual(['queued', 'cancelled']);
  });

  it('a queued run whose agent is gone when its turn comes ends failed, saying why, and the next one still runs', async () => {
    const store = openSqliteStore({ path: ':memory:' });
    const g = gated();
    const a = defineAgent({
      name: 'a',
      model: new ScriptedModel([work, { text: 'first done' }, { text: 'third done' }]),
      tools: [g.tool],
    });
    const b = defineAgent({ name: 'b', model: new ScriptedModel([{ text: 'never' }]) });
    // The process that enqueues knows agent b; the one whose worker ends the active run does not (b was removed in a deploy).
    const sender = createRuntime({ store, agents: [a, b] });
    const worker = createRuntime({ store, agents: [a] });
    worker.startWorker();
    cleanups.push(async () => {
      await worker.close({ graceMs: 50 });
      await sender.close({ graceMs: 50 });
      await store.close();
    });
    const s = await sender.sessions.create();
    const { run: first } = await sender.sessions.send(s.id, 'first', { agent: 'a' });
    await g.started.promise;
    const second = await sender.sessions.send(s.id, 'second', { agent: 'b', ifBusy: 'enqueue' });
    const third = await sender.sessions.send(s.id, 'third', { agent: 'a', ifBusy: 'enqueue' });

    g.gate.resolve('ok');
    expect((await worker.runs.wait(third.run.id)).status).toBe('completed');
    const failed = await worker.runs.get(second.run.id);
    expect(failed).toMatchObject({
      status: 'failed',
      error: { code: 'agent_not_found', message: 'agent b@1 is not registered any more' },
    });
    const events = await allEvents(worker.sessions, s.id);
    expect(userTexts(events)).toEqual(['first', 'third']);
    expect(
      ofType(events, 'run/status')
        .filter((e) => e.runId === second.run.id)
        .map((e) => [e.data.to, e.data.reason]),
    ).toEqual([
      ['queued', `queued behind run ${first.id}`],
      ['failed', 'the run cannot start: agent b@1 is not registered any more'],
    ]);
    expect(await store.inputs.count(s.id, 'message')).toBe(0);
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
    expect(await store.inputs.count(s.id, 'steer')).toBe(1);
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
    expect(await store.inputs.count(s.id, 'steer')).toBe(0);
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
  const ask = {
    toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'city', question: 'Which city?' }] } }],
  };

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
    expect(await store.inputs.count(s.id, 'message')).toBe(0);

    await rt.runs.input(run.id, { city: 'Paris' });
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'user/answer').map((e) => e.data)).toEqual([{ toolCallId: 'q1', answer: { city: 'Paris' } }]);
    expect(userTexts(events)).toEqual(['plan a trip']);
    expect(model.calls[1]!.prompt.at(-1)).toMatchObject({
      role: 'tool',
      content: [{ toolCallId: 'q1', output: { type: 'json', value: { city: 'Paris' } } }],
    });
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
    expect((await rt.runs.wait(queued.run.id)).status).toBe('completed');
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
    const recorded = await store.idempotency.get('default', 'k1');
    expect(recorded).toMatchObject({ status: 0, fingerprint: 'f' });
    expect(JSON.parse(recorded!.body)).toEqual({ outcome: 'created', message_id: message.id, run_id: run.id });
    await g.started.promise;
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;

    // As another process that missed the in-memory guard would: refused before anything else
    // (not run_busy, which the server would record as the key's answer), and an interrupt cancels nothing.
    for (const ifBusy of ['reject', 'steer', 'enqueue', 'interrupt'] as const) {
      await expect(rt.sessions.send(s.id, 'again', { ifBusy, idempotency: claim })).rejects.toMatchObject({
        code: 'idempotency_in_progress',
      });
    }
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
    expect(await store.inputs.count(s.id, 'steer')).toBe(0);
    expect(await store.inputs.count(s.id, 'message')).toBe(0);

    // Another key on the busy session: the outcome is recorded too.
    const steered = await rt.sessions.send(s.id, 'also', { ifBusy: 'steer', idempotency: { ...claim, key: 'k2' } });
    expect(JSON.parse((await store.idempotency.get('default', 'k2'))!.body)).toEqual({
      outcome: 'steered',
      message_id: steered.message.id,
      run_id: run.id,
    });
    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(userTexts(await allEvents(rt.sessions, s.id))).toEqual(['first', 'also']);
  });
});

describe('send: bad options', () => {
  it('refuses each with a validation error naming the option, and keeps nothing', async () => {
    const { rt, store } = setup([{ text: 'done' }], []);
    const s = await rt.sessions.create();
    const before = await allEvents(rt.sessions, s.id);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ timeoutMs: -5 }, 'timeoutMs'],
      [{ timeoutMs: 'x' }, 'timeoutMs'],
      [{ timeoutMs: Number.NaN }, 'timeoutMs'],
      [{ waitTimeoutMs: 0 }, 'waitTimeoutMs'],
      [{ maxAttempts: 0 }, 'maxAttempts'],
      [{ maxAttempts: 1.5 }, 'maxAttempts'],
      [{ priority: 'weird' }, 'priority'],
      [{ ifBusy: 'sometimes' }, 'ifBusy'],
      [{ agent: 5 }, 'agent'],
      [{ timeout: 1000 }, 'timeout'],
    ];
    for (const [options, field] of cases) {
      const e = await rt.sessions.send(s.id, 'go', options as never).then(
        () => undefined,
        (err: unknown) => err as Error & { code?: string; field?: string },
      );
      expect(e, JSON.stringify(options)).toBeDefined();
      expect([e!.code, e!.field], JSON.stringify(options)).toEqual(['validation', field]);
      expect(e!.message.startsWith(`${field}: `), e!.message).toBe(true);
    }
    expect(await allEvents(rt.sessions, s.id)).toEqual(before);
    expect(await store.runs.list({ sessionId: s.id, limit: 10 })).toEqual([]);
    // What is valid still goes through.
    const ok = await rt.sessions.send(s.id, 'go', {
      timeoutMs: 60_000,
      waitTimeoutMs: 1000,
      maxAttempts: 2,
      priority: 'batch',
      ifBusy: 'reject',
    });
    expect((await rt.runs.wait(ok.run.id, { timeoutMs: 5000 })).status).toBe('completed');
  });
});

describe('send: a message that says nothing', () => {
  it('is refused (no part, or only empty or blank texts), on an idle and on a busy session, and nothing is kept', async () => {
    const g = gated();
    const { rt, store } = setup([work, { text: 'done' }, { text: 'and done' }], [g.tool]);
    const s = await rt.sessions.create();
    const before = await allEvents(rt.sessions, s.id);
    const empty = [
      '',
      '  \n\t',
      [],
      [{ type: 'text', text: '' }],
      [
        { type: 'text', text: ' ' },
        { type: 'text', text: '' },
      ],
    ] as Array<Parameters<Runtime['sessions']['send']>[1]>;
    for (const input of empty) {
      const e = await rt.sessions.send(s.id, input).then(
        () => undefined,
        (err: unknown) => err as Error & { code?: string },
      );
      expect(e?.code, JSON.stringify(input)).toBe('invalid_event');
      expect(e!.message, JSON.stringify(input)).toMatch(/says nothing/);
      await expect(rt.sessions.appendUserMessage(s.id, input), JSON.stringify(input)).rejects.toMatchObject({
        code: 'invalid_event',
      });
    }
    expect(await allEvents(rt.sessions, s.id)).toEqual(before);
    expect(await store.runs.list({ sessionId: s.id, limit: 10 })).toEqual([]);

    // Busy: neither steering nor a queued message nor an interrupt takes it.
    const active = await rt.sessions.send(s.id, 'one');
    await g.started.promise;
    for (const ifBusy of ['steer', 'enqueue', 'interrupt'] as const) {
      await expect(rt.sessions.send(s.id, '', { ifBusy }), ifBusy).rejects.toMatchObject({ code: 'invalid_event' });
    }
    await expect(rt.runs.steer(active.run.id, [])).rejects.toMatchObject({ code: 'invalid_event' });
    expect((await rt.runs.get(active.run.id)).cancelRequested).toBe(false);
    expect(await store.inputs.list(s.id, 'steer')).toEqual([]);
    expect(await store.inputs.list(s.id, 'message')).toEqual([]);
    g.gate.resolve('ok');
    expect((await rt.runs.wait(active.run.id, { timeoutMs: 5000 })).status).toBe('completed');

    // A file alone, or a text beside an empty one, says something.
    const file = await rt.sessions.send(s.id, [
      { type: 'text', text: '' },
      { type: 'file', mediaType: 'text/plain', data: 'aGk=' },
    ]);
    expect((await rt.runs.wait(file.run.id, { timeoutMs: 5000 })).status).toBe('completed');
  });
});
