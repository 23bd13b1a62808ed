/**
 * The run state machine (src/runs/lifecycle/run-status.ts) as the runtime enforces it: every legal transition
 * happens through the public API where something can cause it, refused ones throw
 * IllegalTransitionError, and every transition commits a `run/status` event with the row.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { StoreError } from '../../src/index.ts';
import {
  askUser,
  canTransition,
  createRuntime,
  defineAgent,
  IllegalTransitionError,
  isTerminal,
  openSqliteStore,
  RunConflictError,
  ScriptedModel,
  tool,
  FencedError,
  type AgentDefinition,
  type RunRecord,
  type RunStatus,
  type Runtime,
  type RuntimeOptions,
  type ScriptEntry,
  type SqliteStore,
} from '../../src/index.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import { gated } from '../support/runs-helpers.ts';

const ALL: RunStatus[] = [
  'queued',
  'running',
  'waiting_approval',
  'waiting_for_user',
  'paused',
  'completed',
  'failed',
  'cancelled',
  'timed_out',
];

/** Transitions the public-API tests below went through (checked for coverage at the end). */
const seenThroughApi = new Set<string>();

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(agents: AgentDefinition[], o: Partial<RuntimeOptions> = {}): { rt: Runtime; store: SqliteStore } {
  const store = openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ ...o, store, agents });
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, store };
}

const danger = tool({
  name: 'danger',
  description: 'Needs approval',
  input: z.object({ target: z.string() }),
  approval: 'always',
  execute: ({ target }) => `did ${target}`,
});

function agent(script: ScriptEntry[], tools = [danger, askUser()], name = 'a'): AgentDefinition {
  return defineAgent({ name, model: new ScriptedModel(script), tools });
}

/** The `to` of every run/status event of the run, in log order. */
async function chain(rt: Runtime, run: RunRecord): Promise<Array<RunStatus | null>> {
  const events = ofType(await allEvents(rt.sessions, run.sessionId), 'run/status').filter((e) => e.runId === run.id);
  return events.map((e) => e.data.to);
}

/**
 * The invariant that makes the log an exact history of the row: the run/status events of a run
 * form one unbroken chain of legal transitions from null, and it ends where the row is.
 */
async function expectConsistent(rt: Runtime, id: string): Promise<RunRecord> {
  const run = await rt.runs.get(id);
  const events = ofType(await allEvents(rt.sessions, run.sessionId), 'run/status').filter((e) => e.runId === id);
  let from: RunStatus | null = null;
  let attempt = 0;
  for (const e of events) {
    expect(e.data.from).toBe(from);
    if (from !== null) {
      expect(canTransition(from, e.data.to), `${from} → ${e.data.to}`).toBe(true);
      seenThroughApi.add(`${from} → ${e.data.to}`);
    }
    expect(e.data.attempt).toBeGreaterThanOrEqual(attempt);
    attempt = e.data.attempt;
    from = e.data.to;
  }
  expect(from).toBe(run.status);
  return run;
}

describe('the transition table', () => {
  it('terminal statuses have no way out; every other status can be cancelled and timed out', () => {
    for (const from of ALL) {
      for (const to of ALL) {
        if (isTerminal(from)) expect(canTransition(from, to)).toBe(false);
      }
      if (!isTerminal(from)) {
        expect(canTransition(from, 'cancelled')).toBe(true);
        expect(canTransition(from, 'timed_out')).toBe(true);
      }
    }
    expect(canTransition('running', 'completed')).toBe(true);
    expect(canTransition('queued', 'completed')).toBe(false);
    expect(canTransition('paused', 'running')).toBe(false);
  });

  it('RunLifecycle.move applies exactly the legal transitions, each with its run/status event, and refuses the rest writing nothing', async () => {
    const { rt, store } = setup([agent([])]);
    const s = await rt.sessions.create();
    // No worker: the run only moves when this test moves it.
    const { run } = await rt.sessions.send(s.id, 'hi');
    let legal = 0;
    for (const from of ALL) {
      for (const to of ALL) {
        // Put the row in `from` (test setup only), then ask the lifecycle for the transition.
        await store.runs.update(run.id, { status: from, endedAt: null });
        const before = await rt.runs.get(run.id);
        const lastSeq = (await rt.sessions.get(s.id)).lastSeq;
        if (canTransition(from, to)) {
          legal++;
          const moved = await rt.lifecycle.move(run.id, to, { reason: 'table' });
          expect(moved.status).toBe(to);
          const appended = await rt.sessions.events(s.id, { after: lastSeq });
          expect(appended.map((e) => [e.type, e.data])).toEqual([
            ['run/status', { from, to, attempt: 0, reason: 'table' }],
          ]);
          if (isTerminal(to)) {
            expect(moved.endedAt).not.toBeNull();
            expect(moved.fencingToken).toBe(before.fencingToken + 1);
          }
        } else {
          const err = await rt.lifecycle.move(run.id, to).catch((e: unknown) => e);
          expect(err, `${from} → ${to}`).toBeInstanceOf(IllegalTransitionError);
          expect(err).toMatchObject({ runId: run.id, from, to, code: 'illegal_transition' });
          expect(await rt.runs.get(run.id)).toEqual(before);
          expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
        }
      }
    }
    expect(legal).toBe(24);
  });

  it('a transition whose row update is refused leaves no event: both commit together or not at all', async () => {
    const { rt } = setup([agent([])]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    await rt.runs.pause(run.id);
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;
    // A stale view of the run (it was queued): queued → cancelled is legal, but the row moved on.
    const err = await rt.sessions.log
      .transaction((tx) => rt.lifecycle.transition(tx, run, 'cancelled'))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunConflictError);
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
    expect((await rt.runs.get(run.id)).status).toBe('paused');
  });

  it('a transition fenced with a stale token changes neither the row nor the log', async () => {
    const { rt } = setup([agent([])]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;
    const err = await rt.sessions.log
      .transaction(async (tx) =>
        rt.lifecycle.transition(tx, (await tx.runs.get(run.id))!, 'paused', {
          guard: { fencingToken: run.fencingToken + 7 },
        }),
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FencedError);
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
    expect(await rt.runs.get(run.id)).toEqual(run);
  });
});

describe('legal transitions through the public API', () => {
  it('queued → running → completed', async () => {
    const { rt } = setup([agent([{ text: 'done' }])]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    // Claimed in the message's transaction by this process's idle worker (ADR-0027).
    expect(run.status).toBe('running');
    const done = await rt.runs.wait(run.id);
    expect(done.status).toBe('completed');
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'completed']);
    await expectConsistent(rt, run.id);
  });

  it('queued → paused → queued (pause and resume a queued run) → running → completed', async () => {
    const { rt } = setup([agent([{ text: 'done' }])]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    expect((await rt.runs.pause(run.id)).status).toBe('paused');
    expect((await rt.runs.resume(run.id)).status).toBe('queued');
    rt.startWorker();
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(await chain(rt, run)).toEqual(['queued', 'paused', 'queued', 'running', 'completed']);
    await expectConsistent(rt, run.id);
  });

  it('queued → cancelled', async () => {
    const { rt } = setup([agent([])]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    expect(await chain(rt, run)).toEqual(['queued', 'cancelled']);
    await expectConsistent(rt, run.id);
  });

  it('queued → timed_out: the sweep times out a run no worker could take before its deadline', async () => {
    const busy = gated();
    const { rt } = setup([agent([{ toolCalls: [{ name: 'work', input: {} }] }, { text: 'done' }], [busy.tool])]);
    // One slot, taken by a run that waits: the other run stays queued until its deadline passes.
    rt.startWorker({ concurrency: 1, pollMs: 10, sweepMs: 10 });
    const a = await rt.sessions.create();
    const { run: blocker } = await rt.sessions.send(a.id, 'block');
    await busy.started.promise;
    const b = await rt.sessions.create();
    const { run } = await rt.sessions.send(b.id, 'late', { timeoutMs: 1 });
    const done = await rt.runs.wait(run.id);
    expect(done.status).toBe('timed_out');
    expect(await chain(rt, run)).toEqual(['queued', 'timed_out']);
    expect(ofType(await allEvents(rt.sessions, b.id), 'run/status').at(-1)!.data.reason).toBe('run timeout');
    busy.gate.resolve('ok');
    expect((await rt.runs.wait(blocker.id)).status).toBe('completed');
    await expectConsistent(rt, run.id);
  });

  it('running → waiting_approval → queued → running → completed', async () => {
    const { rt } = setup([
      agent([{ toolCalls: [{ id: 'c1', name: 'danger', input: { target: 'x' } }] }, { text: 'done' }]),
    ]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    await expectConsistent(rt, run.id);
    expect((await rt.runs.approve(run.id, 'c1')).status).toBe('queued');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'waiting_approval', 'queued', 'running', 'completed']);
    await expectConsistent(rt, run.id);
  });

  it('running → waiting_for_user → queued → running → completed', async () => {
    const { rt } = setup([
      agent([
        { toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'x', question: 'x?' }] } }] },
        { text: 'done' },
      ]),
    ]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    expect((await rt.runs.input(run.id, { x: 'y' })).status).toBe('queued');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'waiting_for_user', 'queued', 'running', 'completed']);
    await expectConsistent(rt, run.id);
  });

  it('waiting_approval → waiting_for_user: an approval and a question in one step are settled in turn', async () => {
    const { rt } = setup([
      agent([
        {
          toolCalls: [
            { id: 'c1', name: 'danger', input: { target: 'x' } },
            { id: 'q1', name: 'ask_user', input: { questions: [{ id: 'x', question: 'x?' }] } },
          ],
        },
        { text: 'done' },
      ]),
    ]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    // The question cannot be answered before the approval is decided.
    expect(await rt.runs.input(run.id, 'early', { toolCallId: 'q1' }).catch((e: unknown) => e)).toBeInstanceOf(
      IllegalTransitionError,
    );
    expect((await rt.runs.approve(run.id, 'c1')).status).toBe('waiting_for_user');
    expect((await rt.runs.input(run.id, 'yes')).status).toBe('queued');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(await chain(rt, run)).toEqual([
      'queued',
      'running',
      'waiting_approval',
      'waiting_for_user',
      'queued',
      'running',
      'completed',
    ]);
    await expectConsistent(rt, run.id);
  });

  it('running → paused → queued → running → completed', async () => {
    const g = gated();
    const { rt } = setup([agent([{ toolCalls: [{ name: 'work', input: {} }] }, { text: 'done' }], [g.tool])]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    await g.started.promise;
    await rt.runs.pause(run.id);
    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('paused');
    await rt.runs.resume(run.id);
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'paused', 'queued', 'running', 'completed']);
    await expectConsistent(rt, run.id);
  });

  it('running → failed (a model error that is not retried)', async () => {
    const { rt } = setup([agent([{ error: { kind: 'bad_request', message: 'nope' } }])]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    const done = await rt.runs.wait(run.id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatchObject({ kind: 'model' });
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'failed']);
    await expectConsistent(rt, run.id);
  });

  it('queued → failed (an enqueued run whose agent is gone when it comes up)', async () => {
    const g = gated();
    const store = openSqliteStore({ path: ':memory:' });
    const sender = createRuntime({
      store,
      agents: [
        agent([{ toolCalls: [{ name: 'work', input: {} }] }, { text: 'done' }], [g.tool]),
        agent([], [], 'gone'),
      ],
    });
    const rt = createRuntime({
      store,
      agents: [agent([{ toolCalls: [{ name: 'work', input: {} }] }, { text: 'done' }], [g.tool])],
    });
    rt.startWorker();
    cleanups.push(async () => {
      await rt.close({ graceMs: 50 });
      await sender.close({ graceMs: 50 });
      await store.close();
    });
    const s = await sender.sessions.create();
    const { run: active } = await sender.sessions.send(s.id, 'hi', { agent: 'a' });
    await g.started.promise;
    const { run } = await sender.sessions.send(s.id, 'later', { agent: 'gone', ifBusy: 'enqueue' });
    g.gate.resolve('ok');
    expect((await rt.runs.wait(active.id)).status).toBe('completed');
    expect((await rt.runs.wait(run.id)).status).toBe('failed');
    expect(await chain(rt, run)).toEqual(['queued', 'failed']);
    await expectConsistent(rt, run.id);
  });

  it('running → cancelled', async () => {
    const g = gated();
    const { rt } = setup([agent([{ toolCalls: [{ name: 'work', input: {} }] }], [g.tool])]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    await g.started.promise;
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'cancelled']);
    await expectConsistent(rt, run.id);
  });

  it('running → timed_out', async () => {
    const g = gated();
    const { rt } = setup([agent([{ toolCalls: [{ name: 'work', input: {} }] }], [g.tool])]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi', { timeoutMs: 200 });
    expect((await rt.runs.wait(run.id)).status).toBe('timed_out');
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'timed_out']);
    await expectConsistent(rt, run.id);
  });

  it('running → queued: a stopping worker hands the run back at the next step boundary, and another finishes it', async () => {
    const g = gated();
    const { rt } = setup([agent([{ toolCalls: [{ name: 'work', input: {} }] }, { text: 'done' }], [g.tool])]);
    const w1 = rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    await g.started.promise;
    const stopped = w1.stop({ graceMs: 30_000 });
    g.gate.resolve('ok');
    await stopped;
    const handedBack = await rt.runs.get(run.id);
    expect(handedBack).toMatchObject({ status: 'queued', lease: null });
    expect(g.executions()).toBe(1);
    rt.startWorker();
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    // The tool ran once: the second worker continued after the step the first one finished.
    expect(g.executions()).toBe(1);
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'queued', 'running', 'completed']);
    await expectConsistent(rt, run.id);
  });

  it('waiting_approval → cancelled, waiting_for_user → cancelled, paused → cancelled', async () => {
    const g = gated();
    const { rt } = setup([
      agent(
        [
          { toolCalls: [{ id: 'c1', name: 'danger', input: { target: 'x' } }] },
          { toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'x', question: 'x?' }] } }] },
          { toolCalls: [{ name: 'work', input: {} }] },
        ],
        [danger, askUser(), g.tool],
      ),
    ]);
    rt.startWorker();
    const expectations: Array<[string, RunStatus]> = [];
    for (const waitFor of ['waiting_approval', 'waiting_for_user'] as const) {
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'hi');
      expect((await rt.runs.wait(run.id)).status).toBe(waitFor);
      expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
      expect(await chain(rt, run)).toEqual(['queued', 'running', waitFor, 'cancelled']);
      expectations.push([run.id, waitFor]);
    }
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    await g.started.promise;
    await rt.runs.pause(run.id);
    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('paused');
    expect((await rt.runs.cancel(run.id)).status).toBe('cancelled');
    expect(await chain(rt, run)).toEqual(['queued', 'running', 'paused', 'cancelled']);
    for (const id of [...expectations.map(([id]) => id), run.id]) await expectConsistent(rt, id);
  });

  it('waiting_approval → timed_out and waiting_for_user → timed_out when the wait expires', async () => {
    const { rt } = setup([
      agent([
        { toolCalls: [{ id: 'c1', name: 'danger', input: { target: 'x' } }] },
        { toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'x', question: 'x?' }] } }] },
      ]),
    ]);
    rt.startWorker({ sweepMs: 10, pollMs: 10, concurrency: 1 });
    for (const waitFor of ['waiting_approval', 'waiting_for_user'] as const) {
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'hi', { waitTimeoutMs: 30 });
      const done = await rt.runs.wait(run.id, { until: 'terminal' });
      expect(done.status).toBe('timed_out');
      expect(await chain(rt, run)).toEqual(['queued', 'running', waitFor, 'timed_out']);
      await expectConsistent(rt, run.id);
    }
  });

  it('paused → timed_out when the run deadline passes while it is paused', async () => {
    const { rt } = setup([agent([{ text: 'never' }])]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi', { timeoutMs: 1 });
    await rt.runs.pause(run.id);
    rt.startWorker({ sweepMs: 10, pollMs: 10 });
    expect((await rt.runs.wait(run.id, { until: 'terminal' })).status).toBe('timed_out');
    expect(await chain(rt, run)).toEqual(['queued', 'paused', 'timed_out']);
    await expectConsistent(rt, run.id);
  });

  it('together, these went through every legal transition but one the API cannot cause', () => {
    const legal = ALL.flatMap((from) => ALL.filter((to) => canTransition(from, to)).map((to) => `${from} → ${to}`));
    // Approvals are asked before questions, so a run waiting for the user never goes back to
    // waiting for an approval; the table allows it, and RunLifecycle.move is tested with it above.
    expect(legal.filter((t) => !seenThroughApi.has(t))).toEqual(['waiting_for_user → waiting_approval']);
  });
});

describe('refused transitions', () => {
  it('a completed run cannot be resumed, paused, approved, answered or steered', async () => {
    const { rt } = setup([
      agent([{ toolCalls: [{ id: 'c1', name: 'danger', input: { target: 'x' } }] }, { text: 'done' }]),
    ]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    await rt.runs.wait(run.id);
    await rt.runs.approve(run.id, 'c1');
    const done = await rt.runs.wait(run.id);
    expect(done.status).toBe('completed');
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;

    for (const attempt of [
      () => rt.runs.resume(run.id),
      () => rt.runs.pause(run.id),
      () => rt.runs.approve(run.id, 'c1'),
      () => rt.runs.deny(run.id, 'c1'),
      () => rt.runs.input(run.id, 'late', { toolCallId: 'c1' }),
      () => rt.runs.steer(run.id, 'late'),
    ]) {
      const err = await attempt().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IllegalTransitionError);
      expect((err as IllegalTransitionError).from).toBe('completed');
    }
    // Cancelling a finished run changes nothing.
    expect(await rt.runs.cancel(run.id)).toEqual(done);
    expect(await rt.runs.get(run.id)).toEqual(done);
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
  });

  it('a waiting run cannot be paused or resumed (resuming is for paused runs: a wait ends by its decision)', async () => {
    const { rt } = setup([
      agent([{ toolCalls: [{ id: 'c1', name: 'danger', input: { target: 'x' } }] }, { text: 'done' }]),
    ]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    const waiting = await rt.runs.wait(run.id);
    expect(waiting.status).toBe('waiting_approval');
    for (const attempt of [() => rt.runs.pause(run.id), () => rt.runs.resume(run.id)]) {
      const err = await attempt().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IllegalTransitionError);
      expect((err as IllegalTransitionError).from).toBe('waiting_approval');
    }
    expect(await rt.runs.get(run.id)).toEqual(waiting);
  });

  it('a running run cannot be resumed, and a queued one neither', async () => {
    const g = gated();
    const { rt } = setup([agent([{ toolCalls: [{ name: 'work', input: {} }] }, { text: 'done' }], [g.tool])]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    expect(await rt.runs.resume(run.id).catch((e: unknown) => e)).toBeInstanceOf(IllegalTransitionError);
    rt.startWorker();
    await g.started.promise;
    const err = await rt.runs.resume(run.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IllegalTransitionError);
    expect((err as IllegalTransitionError).from).toBe('running');
    expect((await rt.runs.get(run.id)).status).toBe('running');
    g.gate.resolve('ok');
    expect((await rt.runs.wait(run.id)).status).toBe('completed');
    expect(g.executions()).toBe(1);
    await expectConsistent(rt, run.id);
  });

  it('deny and input only apply to what the run waits for', async () => {
    const { rt } = setup([
      agent([
        { toolCalls: [{ id: 'q1', name: 'ask_user', input: { questions: [{ id: 'x', question: 'x?' }] } }] },
        { text: 'done' },
      ]),
    ]);
    rt.startWorker();
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_for_user');
    // A question is not an approval: refused by the run's state (409 over HTTP).
    const err = await rt.runs.approve(run.id, 'q1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IllegalTransitionError);
    expect((err as IllegalTransitionError).message).toContain('q1 is a question, not an approval');
    // An id it never asked about does not exist.
    expect(await rt.runs.approve(run.id, 'nope').catch((e: unknown) => (e as StoreError).code)).toBe('not_found');
    expect((await rt.runs.get(run.id)).status).toBe('waiting_for_user');
  });

  it('cancelling twice is a no-op that returns the same cancelled run', async () => {
    const { rt } = setup([agent([])]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'hi');
    const first = await rt.runs.cancel(run.id);
    expect(first.status).toBe('cancelled');
    const lastSeq = (await rt.sessions.get(s.id)).lastSeq;
    const second = await rt.runs.cancel(run.id);
    expect(second).toEqual(first);
    expect((await rt.sessions.get(s.id)).lastSeq).toBe(lastSeq);
    expect(await chain(rt, run)).toEqual(['queued', 'cancelled']);
  });
});
