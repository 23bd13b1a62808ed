/**
 * Runs that wait: for approvals, for the user's answers (ask_user), paused by request, and
 * waits that expire. A waiting run is held by no worker and survives a full restart (runtime and
 * store closed, the database file reopened); its decision resumes the same run.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  askUser,
  createRuntime,
  defineAgent,
  IllegalTransitionError,
  openSqliteStore,
  ScriptedModel,
  StoreError,
  tool,
  type AgentDefinition,
  type Runtime,
  type ScriptEntry,
  type SqliteStore,
  type WorkerOptions,
} from '../../src/index.ts';
import { aborted, deferred } from '../support/deferred.ts';
import { allEvents, ofType, tempDbPath } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A runtime with a worker on `store` (a new in-memory one by default). */
function start(
  agents: AgentDefinition[],
  o: { store?: SqliteStore; worker?: WorkerOptions | false } = {},
): { rt: Runtime; store: SqliteStore } {
  const store = o.store ?? openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents });
  if (o.worker !== false) rt.startWorker(o.worker ?? {});
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, store };
}

/** Stops everything as a process exit would after a clean shutdown: workers, runtime, store. */
async function shutdown({ rt, store }: { rt: Runtime; store: SqliteStore }): Promise<void> {
  await rt.close();
  await store.close();
}

/** Tools that count what they execute. */
function counters() {
  const ran = { safe: 0, danger: [] as unknown[] };
  const safe = tool({
    name: 'safe',
    description: 'Needs no approval',
    input: z.object({ q: z.string() }),
    execute: ({ q }) => (ran.safe++, `safe ${q}`),
  });
  const danger = tool({
    name: 'danger',
    description: 'Needs approval',
    input: z.object({ target: z.string() }),
    approval: 'always',
    execute: (input) => (ran.danger.push(input), `did ${input.target}`),
  });
  return { ran, safe, danger };
}

const agentOf = (script: ScriptEntry[], tools: AgentDefinition['tools']) => {
  const model = new ScriptedModel(script);
  return { model, agent: defineAgent({ name: 'a', model, tools }) };
};

describe('approvals', () => {
  it('park durably, survive a full restart, and resume the same run; decisions are recorded once and nothing runs twice', async () => {
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const { ran, safe, danger } = counters();
    const tools = [safe, danger];

    // Process 1: the run asks for two approvals in one step; the call that needs none runs.
    const first = agentOf(
      [
        {
          toolCalls: [
            { id: 's1', name: 'safe', input: { q: 'x' } },
            { id: 'd1', name: 'danger', input: { target: 'a' } },
            { id: 'd2', name: 'danger', input: { target: 'c' } },
          ],
        },
      ],
      tools,
    );
    let proc = start([first.agent], { store: openSqliteStore({ path: db.path }) });
    const s = await proc.rt.sessions.create();
    const { run } = await proc.rt.sessions.send(s.id, 'go');
    const parked = await proc.rt.runs.wait(run.id);
    expect(parked).toMatchObject({
      status: 'waiting_approval',
      lease: null,
      waiting: {
        kind: 'approval',
        calls: [
          { toolCallId: 'd1', toolName: 'danger', input: { target: 'a' }, kind: 'approval' },
          { toolCallId: 'd2', toolName: 'danger', input: { target: 'c' }, kind: 'approval' },
        ],
        decisions: {},
        expiresAt: null,
      },
    });
    expect(ran.safe).toBe(1);
    expect(ran.danger).toEqual([]);
    await shutdown(proc);

    // Process 2: the request is still there; one decision is recorded, once.
    const second = agentOf([], tools);
    proc = start([second.agent], { store: openSqliteStore({ path: db.path }) });
    expect(await proc.rt.runs.get(run.id)).toEqual(parked);
    const partly = await proc.rt.runs.approve(run.id, 'd1', { input: { target: 'b' } });
    expect(partly.status).toBe('waiting_approval');
    expect(partly.waiting).toMatchObject({ decisions: { d1: { approved: true, input: { target: 'b' } } } });
    const seqAfterDecision = (await proc.rt.sessions.get(s.id)).lastSeq;
    // The same decision again is a no-op; another one is refused.
    expect(await proc.rt.runs.approve(run.id, 'd1', { input: { target: 'b' } })).toEqual(partly);
    for (const other of [
      () => proc.rt.runs.deny(run.id, 'd1', { reason: 'changed my mind' }),
      () => proc.rt.runs.approve(run.id, 'd1'),
    ]) {
      const err = await other().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StoreError);
      expect((err as StoreError).code).toBe('already_decided');
    }
    expect((await proc.rt.sessions.get(s.id)).lastSeq).toBe(seqAfterDecision);
    expect(await proc.rt.runs.get(run.id)).toEqual(partly);
    await shutdown(proc);

    // Process 3: the last decision resumes the same run.
    const third = agentOf([{ text: 'all done' }], tools);
    proc = start([third.agent], { store: openSqliteStore({ path: db.path }) });
    expect((await proc.rt.runs.approve(run.id, 'd2')).status).toBe('queued');
    const done = await proc.rt.runs.wait(run.id);
    expect(done).toMatchObject({ id: run.id, status: 'completed', attempt: 1, waiting: null, lease: null });
    expect(await proc.rt.runs.list({ sessionId: s.id })).toHaveLength(1);

    // Each approved call ran once, the first with the edited input; the safe call was not re-run.
    expect(ran.safe).toBe(1);
    expect(ran.danger).toEqual([{ target: 'b' }, { target: 'c' }]);
    expect(second.model.calls).toHaveLength(0);
    expect(third.model.calls).toHaveLength(1);
    expect(third.model.calls[0]!.prompt.at(-1)).toMatchObject({
      role: 'tool',
      content: [
        { toolCallId: 's1', output: { type: 'text', value: 'safe x' } },
        { toolCallId: 'd1', output: { type: 'text', value: 'did b' } },
        { toolCallId: 'd2', output: { type: 'text', value: 'did c' } },
      ],
    });

    const events = await allEvents(proc.rt.sessions, s.id);
    // Asked once, decided once, each: the recovered run did not ask again.
    expect(ofType(events, 'tool/approval').map((e) => e.data.toolCallId)).toEqual(['d1', 'd2']);
    expect(ofType(events, 'tool/decision').map((e) => e.data)).toEqual([
      { toolCallId: 'd1', approved: true, editedInput: { target: 'b' } },
      { toolCallId: 'd2', approved: true },
    ]);
    expect(ofType(events, 'tool/call').map((e) => [e.data.toolCallId, e.data.input])).toEqual([
      ['s1', { q: 'x' }],
      ['d1', { target: 'b' }],
      ['d2', { target: 'c' }],
    ]);
    expect(ofType(events, 'run/status').map((e) => e.data.to)).toEqual([
      'queued',
      'running',
      'waiting_approval',
      'queued',
      'running',
      'completed',
    ]);
  });

  it('a denial with a reason: the tool does not run and the model sees an execution-denied result', async () => {
    const { ran, danger } = counters();
    const { model, agent } = agentOf(
      [{ toolCalls: [{ id: 'd1', name: 'danger', input: { target: 'prod' } }] }, { text: 'understood' }],
      [danger],
    );
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'deploy');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    await rt.runs.deny(run.id, 'd1', { reason: 'not on a Friday' });
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(ran.danger).toEqual([]);
    expect(model.calls[1]!.prompt.at(-1)).toEqual({
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'd1',
          toolName: 'danger',
          output: { type: 'execution-denied', reason: 'not on a Friday' },
        },
      ],
    });
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'tool/decision').map((e) => e.data)).toEqual([
      { toolCallId: 'd1', approved: false, reason: 'not on a Friday' },
    ]);
    // On record with its denied result, but never executed.
    expect(ofType(events, 'tool/result').map((e) => e.data.output)).toEqual([
      { type: 'error', code: 'denied', message: 'not on a Friday' },
    ]);
  });
});

describe('ask_user', () => {
  it('parks with the questions, survives a full restart, and the answer resumes the same run as the result the model sees', async () => {
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const questions = [{ id: 'color', question: 'Which color?', choices: ['red', 'blue'] }];
    const first = agentOf([{ toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions } }] }], [askUser()]);
    let proc = start([first.agent], { store: openSqliteStore({ path: db.path }) });
    const s = await proc.rt.sessions.create();
    const { run } = await proc.rt.sessions.send(s.id, 'paint it');
    const parked = await proc.rt.runs.wait(run.id);
    expect(parked).toMatchObject({
      status: 'waiting_for_user',
      lease: null,
      waiting: {
        kind: 'input',
        calls: [{ toolCallId: 'q1', toolName: 'ask_user', input: { questions }, kind: 'input' }],
        decisions: {},
      },
    });
    expect(ofType(await allEvents(proc.rt.sessions, s.id), 'user/question').map((e) => e.data.input)).toEqual([
      { questions },
    ]);
    await shutdown(proc);

    const second = agentOf([{ text: 'Blue it is' }], [askUser()]);
    proc = start([second.agent], { store: openSqliteStore({ path: db.path }) });
    expect(await proc.rt.runs.get(run.id)).toEqual(parked);
    expect((await proc.rt.runs.input(run.id, { color: 'blue' })).status).toBe('queued');
    expect(await proc.rt.runs.wait(run.id)).toMatchObject({ id: run.id, status: 'completed', attempt: 1 });
    expect(second.model.calls[0]!.prompt.at(-1)).toEqual({
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId: 'q1',
          toolName: 'ask_user',
          output: { type: 'json', value: { color: 'blue' } },
        },
      ],
    });
    const events = await allEvents(proc.rt.sessions, s.id);
    expect(ofType(events, 'user/question')).toHaveLength(1);
    expect(ofType(events, 'user/answer').map((e) => e.data)).toEqual([{ toolCallId: 'q1', answer: { color: 'blue' } }]);
  });

  it('an answer is recorded once', async () => {
    const { model, agent } = agentOf(
      [
        {
          toolCalls: [
            { id: 'q1', name: 'ask_user', input: { questions: [{ id: 'a', question: 'a?' }] } },
            { id: 'q2', name: 'ask_user', input: { questions: [{ id: 'b', question: 'b?' }] } },
          ],
        },
        { text: 'thanks' },
      ],
      [askUser()],
    );
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'ask me');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    // Two open questions: the call must be named.
    expect(await rt.runs.input(run.id, 'x').catch((e: unknown) => (e as StoreError).code)).toBe('ambiguous');
    const partly = await rt.runs.input(run.id, 'A', { toolCallId: 'q1' });
    expect(partly.status).toBe('waiting_for_user');
    expect(await rt.runs.input(run.id, 'A', { toolCallId: 'q1' })).toEqual(partly);
    expect(
      await rt.runs.input(run.id, 'other', { toolCallId: 'q1' }).catch((e: unknown) => (e as StoreError).code),
    ).toBe('already_decided');
    // Now only one question is open: it may go unnamed.
    await rt.runs.input(run.id, 'B');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(model.calls[1]!.prompt.at(-1)).toMatchObject({
      role: 'tool',
      content: [
        { toolCallId: 'q1', output: { type: 'json', value: 'A' } },
        { toolCallId: 'q2', output: { type: 'json', value: 'B' } },
      ],
    });
    expect(ofType(await allEvents(rt.sessions, s.id), 'user/answer').map((e) => e.data.toolCallId)).toEqual([
      'q1',
      'q2',
    ]);
  });
});

describe('pause and resume', () => {
  it('pausing a running run stops it at the next step boundary; resuming continues and completes it', async () => {
    const started = deferred<AbortSignal>();
    const gate = deferred<string>();
    let executions = 0;
    const slow = tool({
      name: 'slow',
      description: 'Waits',
      input: z.object({}),
      execute: async (_i, ctx) => {
        executions++;
        started.resolve(ctx.signal);
        return Promise.race([gate.promise, aborted(ctx.signal).then(() => 'aborted')]);
      },
    });
    const { model, agent } = agentOf(
      [{ toolCalls: [{ id: 'w1', name: 'slow', input: {} }] }, { text: 'finished' }],
      [slow],
    );
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'work');
    const signal = await started.promise;

    const requested = await rt.runs.pause(run.id);
    expect(requested).toMatchObject({ status: 'running', pauseRequested: true });
    // The step in flight is not interrupted: the tool finishes.
    gate.resolve('ok');
    const paused = await rt.runs.wait(run.id);
    expect(paused).toMatchObject({ status: 'paused', lease: null, pauseRequested: false });
    expect(signal.aborted).toBe(false);
    expect(model.calls).toHaveLength(1);
    expect(ofType(await allEvents(rt.sessions, s.id), 'tool/result').map((e) => e.data.output)).toEqual([
      { type: 'text', value: 'ok' },
    ]);

    expect((await rt.runs.resume(run.id)).status).toBe('queued');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(executions).toBe(1);
    expect(model.calls).toHaveLength(2);
    expect(model.calls[1]!.prompt.at(-1)).toMatchObject({
      role: 'tool',
      content: [{ toolCallId: 'w1', output: { type: 'text', value: 'ok' } }],
    });
    const statuses = ofType(await allEvents(rt.sessions, s.id), 'run/status').map((e) => e.data.to);
    expect(statuses).toEqual(['queued', 'running', 'paused', 'queued', 'running', 'completed']);
  });

  it('resuming before the next step boundary withdraws the pause request: the run never pauses', async () => {
    const gate = deferred<string>();
    const started = deferred<void>();
    const slow = tool({
      name: 'slow',
      description: 'Waits',
      input: z.object({}),
      execute: async () => {
        started.resolve();
        return gate.promise;
      },
    });
    const { agent } = agentOf([{ toolCalls: [{ id: 'w1', name: 'slow', input: {} }] }, { text: 'finished' }], [slow]);
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'work');
    await started.promise;
    expect(await rt.runs.pause(run.id)).toMatchObject({ status: 'running', pauseRequested: true });
    expect(await rt.runs.resume(run.id)).toMatchObject({ status: 'running', pauseRequested: false });
    gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(ofType(await allEvents(rt.sessions, s.id), 'run/status').map((e) => e.data.to)).toEqual([
      'queued',
      'running',
      'completed',
    ]);
  });

  it('pausing a queued run pauses it at once: no worker takes it until it is resumed', async () => {
    const { model, agent } = agentOf([{ text: 'other done' }, { text: 'resumed done' }], []);
    const { rt } = start([agent], { worker: false });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'later');
    const paused = await rt.runs.pause(run.id);
    expect(paused).toMatchObject({ status: 'paused', attempt: 0, lease: null });

    rt.startWorker({ pollMs: 10 });
    // The worker claims other work meanwhile, and not the paused run.
    const other = await rt.sessions.create();
    const { run: otherRun } = await rt.sessions.send(other.id, 'now');
    expect((await rt.runs.wait(otherRun.id)).status).toBe('completed');
    expect(await rt.runs.get(run.id)).toEqual(paused);
    expect(model.calls).toHaveLength(1);

    await rt.runs.resume(run.id);
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(ofType(await allEvents(rt.sessions, s.id), 'run/status').map((e) => e.data.to)).toEqual([
      'queued',
      'paused',
      'queued',
      'running',
      'completed',
    ]);
  });
});

describe('waits that expire', () => {
  it('the sweep times out a run whose wait for a decision expired, and records why', async () => {
    const { ran, danger } = counters();
    const { agent } = agentOf([{ toolCalls: [{ id: 'd1', name: 'danger', input: { target: 'x' } }] }], [danger]);
    const { rt } = start([agent], { worker: { pollMs: 10, sweepMs: 10 } });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go', { waitTimeoutMs: 30 });
    const parked = await rt.runs.wait(run.id);
    expect(parked.status).toBe('waiting_approval');
    expect((parked.waiting as { expiresAt: number }).expiresAt).toBeGreaterThan(0);

    const done = await rt.runs.wait(run.id, { until: 'terminal' });
    expect(done).toMatchObject({ status: 'timed_out', waiting: null, lease: null });
    const events = await allEvents(rt.sessions, s.id);
    const last = ofType(events, 'run/status').at(-1)!;
    expect(last.data).toMatchObject({
      from: 'waiting_approval',
      to: 'timed_out',
      reason: 'the wait for a decision expired',
    });
    // The call that waited has a result: the history has no dangling call.
    expect(ofType(events, 'tool/result').map((e) => [e.data.toolCallId, e.data.output])).toEqual([
      ['d1', { type: 'error', code: 'cancelled', message: 'the run timed out before this call had a result' }],
    ]);
    expect(ran.danger).toEqual([]);
    // Too late to decide.
    expect(await rt.runs.approve(run.id, 'd1').catch((e: unknown) => e)).toBeInstanceOf(IllegalTransitionError);
  });

  it('a decision accepted before its wait expired is never timed out later: the run stops waiting (its waiting field is cleared) even while no worker takes it', async () => {
    const { ran, danger } = counters();
    const gate = deferred<string>();
    const hold = tool({
      name: 'hold',
      description: 'holds the only worker slot',
      input: z.object({}),
      execute: () => gate.promise,
    });
    const model = new ScriptedModel(
      [
        (call) => {
          const prompt = call.prompt as ReadonlyArray<{
            role: string;
            content: Array<{ type: string; text?: string }>;
          }>;
          const user = prompt
            .filter((m) => m.role === 'user')
            .at(-1)!
            .content.map((p) => p.text ?? '')
            .join('');
          const answered = prompt.some((m) => m.role === 'tool');
          if (answered) return { text: 'done' };
          return user === 'hold'
            ? { toolCalls: [{ id: 'h1', name: 'hold', input: {} }] }
            : { toolCalls: [{ id: 'd1', name: 'danger', input: { target: 'x' } }] };
        },
      ],
      { loop: true },
    );
    const agent = defineAgent({ name: 'a', model, tools: [danger, hold] });
    const { rt } = start([agent], { worker: { concurrency: 1, pollMs: 10, sweepMs: 10 } });
    const waiting = await rt.sessions.create();
    const { run } = await rt.sessions.send(waiting.id, 'go', { waitTimeoutMs: 200 });
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    // The only worker slot gets busy; the decision queues the run, which then waits for the slot
    // longer than its wait for the decision would have lasted.
    const other = await rt.sessions.create();
    const busy = await rt.sessions.send(other.id, 'hold');
    while ((await rt.runs.get(busy.run.id)).status !== 'running') await new Promise((r) => setTimeout(r, 5));
    const decided = await rt.runs.approve(run.id, 'd1');
    expect(decided).toMatchObject({ status: 'queued', waiting: null });
    await new Promise((r) => setTimeout(r, 400));
    expect((await rt.runs.get(run.id)).status).toBe('queued');
    gate.resolve('held');
    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    expect(ran.danger).toEqual([{ target: 'x' }]);
  });
});
