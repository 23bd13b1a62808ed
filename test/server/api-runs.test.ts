/**
 * The run endpoints through real HTTP: get, steps, cancel, pause/resume, steer, ask_user input and
 * approvals, with the illegal requests each state refuses (409 illegal_transition / already_decided).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, startTestServer, type Api, type Json, type TestServer } from '../support/server-helpers.ts';

let srv: TestServer;
let api: Api;
beforeAll(async () => {
  srv = await startTestServer();
  api = srv.api();
});
afterAll(async () => {
  await srv?.close();
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const texts = (items: Json[]) => items.map((i: Json) => i.text).filter((t: unknown) => typeof t === 'string');

/** A new session with `text` sent; returns the session and the run. */
async function start(text: string): Promise<{ sessionId: string; runId: string }> {
  const s = await api.session();
  const { run } = await api.send(s.id, text);
  return { sessionId: s.id, runId: run.id };
}

/** A run that is running: its tool waits at gate `key` until the test opens it. */
async function running(key: string): Promise<{ sessionId: string; runId: string }> {
  const r = await start(`block:${key}`);
  await srv.gates.entered(key);
  return r;
}

describe('GET /v1/runs/{id} and /steps', () => {
  it('answer a completed run with every field and its steps', async () => {
    const { sessionId, runId } = await start('hi');
    const run = await api.waitForRun(runId, 'completed');
    expect(run).toMatchObject({
      id: runId,
      session_id: sessionId,
      parent_run_id: null,
      child_run_ids: [],
      agent: { name: 'helper', version: '1' },
      agent_spec: { name: 'helper', version: '1', model: { provider: 'scripted', modelId: 'helper-1' } },
      status: 'completed',
      trigger_message_id: expect.any(String),
      turn: 1,
      created_at: expect.stringMatching(ISO),
      started_at: expect.stringMatching(ISO),
      ended_at: expect.stringMatching(ISO),
      attempt: 1,
      usage: { inputTokens: 10, outputTokens: 5 },
      cost: 0,
      error: null,
      waiting: null,
      lease: null,
      cancel_requested: false,
      pause_requested: false,
      // The last checkpoint: the final step's end (one step), at the seq it committed with.
      resume_cursor: { step: 1, seq: expect.any(Number) },
    });

    const steps = await api.get(`/v1/runs/${runId}/steps`);
    expect(steps.status).toBe(200);
    expect(steps.body.data).toHaveLength(1);
    expect(steps.body.data[0]).toMatchObject({
      step: 1,
      requests: [
        expect.objectContaining({ provider: 'scripted', modelId: 'helper-1', system: 'You are a test helper.' }),
      ],
    });

    expectProblem(await api.get('/v1/runs/no-such-run'), 'not_found', 404);
    expectProblem(await api.get('/v1/runs/no-such-run/steps'), 'not_found', 404);
  });

  it('/steps shows a tool loop as two steps of the run’s own turn only', async () => {
    const { sessionId, runId } = await start('danger:steps');
    await api.waitForRun(runId, 'waiting_approval');
    await api.post(
      `/v1/runs/${runId}/approvals/${(await api.get(`/v1/runs/${runId}`)).body.waiting.requests[0].approval_id}`,
      { decision: 'approve' },
    );
    await api.waitForRun(runId, 'completed');
    const second = await api.send(sessionId, 'after');
    await api.waitForRun(second.run.id, 'completed');
    expect((await api.get(`/v1/runs/${runId}/steps`)).body.data.map((s: Json) => s.step)).toEqual([1, 2]);
    expect((await api.get(`/v1/runs/${second.run.id}/steps`)).body.data.map((s: Json) => s.step)).toEqual([1]);
  });
});

describe('POST /v1/runs/{id}/cancel', () => {
  it('cancels a running run, idempotently', async () => {
    const { sessionId, runId } = await running('cancel-1');
    const r = await api.post(`/v1/runs/${runId}/cancel`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: runId, status: 'cancelled', ended_at: expect.stringMatching(ISO) });
    const again = await api.post(`/v1/runs/${runId}/cancel`);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe('cancelled');
    expect(again.body.ended_at).toBe(r.body.ended_at);
    const events = await api.allEvents(sessionId);
    expect(events.filter((e) => e.type === 'run/status' && e.data.to === 'cancelled')).toHaveLength(1);
    // The session takes new messages.
    const next = await api.send(sessionId, 'next');
    await api.waitForRun(next.run.id, 'completed');
  });

  it('cancels a waiting run and a paused one; a completed run stays completed', async () => {
    const waiting = await start('ask');
    await api.waitForRun(waiting.runId, 'waiting_for_user');
    expect((await api.post(`/v1/runs/${waiting.runId}/cancel`)).body.status).toBe('cancelled');
    // Its question was closed: the run takes no answer now.
    expectProblem(
      await api.post(`/v1/runs/${waiting.runId}/input`, { answers: { color: 'red' } }),
      'illegal_transition',
      409,
    );

    const paused = await running('cancel-2');
    await api.post(`/v1/runs/${paused.runId}/pause`);
    srv.gates.open('cancel-2');
    await api.waitForRun(paused.runId, 'paused');
    expect((await api.post(`/v1/runs/${paused.runId}/cancel`)).body.status).toBe('cancelled');

    const done = await start('done already');
    await api.waitForRun(done.runId, 'completed');
    const r = await api.post(`/v1/runs/${done.runId}/cancel`);
    expect(r.status).toBe(200);
    expect(r.body.status).toBe('completed');
    expectProblem(await api.post('/v1/runs/no-such-run/cancel'), 'not_found', 404);
  });
});

describe('POST /v1/runs/{id}/pause and /resume', () => {
  it('pause at the next step boundary, resume to completion; illegal ones are 409 illegal_transition', async () => {
    const { sessionId, runId } = await running('pause-1');
    // Resuming a running run (no pause requested) is refused.
    const early = expectProblem(await api.post(`/v1/runs/${runId}/resume`), 'illegal_transition', 409);
    expect(early).toMatchObject({ run_id: runId, from: 'running' });

    const r = await api.post(`/v1/runs/${runId}/pause`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'running', pause_requested: true });
    // Before the boundary, resume withdraws the request; pause asks again.
    const withdrawn = await api.post(`/v1/runs/${runId}/resume`);
    expect(withdrawn.status).toBe(200);
    expect(withdrawn.body).toMatchObject({ status: 'running', pause_requested: false });
    expect((await api.post(`/v1/runs/${runId}/pause`)).body).toMatchObject({
      status: 'running',
      pause_requested: true,
    });

    srv.gates.open('pause-1');
    const paused = await api.waitForRun(runId, 'paused');
    expect(paused.lease).toBeNull();
    expect(expectProblem(await api.post(`/v1/runs/${runId}/pause`), 'illegal_transition', 409).from).toBe('paused');

    const resumed = await api.post(`/v1/runs/${runId}/resume`);
    expect(resumed.status).toBe(200);
    expect(['queued', 'running', 'completed']).toContain(resumed.body.status);
    expect(resumed.body.pause_requested).toBe(false);
    await api.waitForRun(runId, 'completed');
    expect(texts((await api.get(`/v1/sessions/${sessionId}/transcript`)).body.items)).toContain('done');

    for (const action of ['resume', 'pause']) {
      const p = expectProblem(await api.post(`/v1/runs/${runId}/${action}`), 'illegal_transition', 409);
      expect(p).toMatchObject({ run_id: runId, from: 'completed' });
    }
  });

  it('a waiting run cannot be paused or resumed', async () => {
    const { runId } = await start('ask');
    await api.waitForRun(runId, 'waiting_for_user');
    expectProblem(await api.post(`/v1/runs/${runId}/pause`), 'illegal_transition', 409);
    expectProblem(await api.post(`/v1/runs/${runId}/resume`), 'illegal_transition', 409);
    await api.post(`/v1/runs/${runId}/cancel`);
  });
});

describe('POST /v1/runs/{id}/steer', () => {
  it('sends input into the run’s next step (202); a finished run refuses it', async () => {
    const { sessionId, runId } = await running('steer-1');
    const r = await api.post(`/v1/runs/${runId}/steer`, { content: 'mind the gap' });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({ message: { id: expect.any(String) }, run: { id: runId } });
    srv.gates.open('steer-1');
    await api.waitForRun(runId, 'completed');
    const said = texts((await api.get(`/v1/sessions/${sessionId}/transcript`)).body.items);
    expect(said).toEqual(expect.arrayContaining(['mind the gap', 'echo: mind the gap']));
    // Steered into the same run: the session still has one.
    expect((await api.get(`/v1/sessions/${sessionId}/runs`)).body.data).toHaveLength(1);

    expectProblem(await api.post(`/v1/runs/${runId}/steer`, { content: 'too late' }), 'illegal_transition', 409);
    expectProblem(await api.post(`/v1/runs/${runId}/steer`, { content: '' }), 'validation', 400);
    expectProblem(await api.post(`/v1/runs/${runId}/steer`, { content: 'x', urgent: true }), 'validation', 400);
  });

  it('with an Idempotency-Key: a retry after the server failed between the steer and its answer gets the same message, steered once', async () => {
    const { sessionId, runId } = await running('steer-idem');
    const key = { 'idempotency-key': 'steer-crash-between' };
    // The steer commits; recording its answer fails (as a crash right after the effect would leave it).
    const put = srv.store.idempotency.put.bind(srv.store);
    let failing = true;
    srv.store.idempotency.put = (r) =>
      failing ? ((failing = false), Promise.reject(new Error('the process died here'))) : put(r);
    expect((await api.post(`/v1/runs/${runId}/steer`, { content: 'only once' }, key)).status).toBe(500);
    const retry = await api.post(`/v1/runs/${runId}/steer`, { content: 'only once' }, key);
    expect(retry.status).toBe(202);
    expect(retry.body.run.id).toBe(runId);
    const again = await api.post(`/v1/runs/${runId}/steer`, { content: 'only once' }, key);
    expect([again.status, again.headers.get('idempotent-replayed'), again.body.message.id]).toEqual([
      202,
      'true',
      retry.body.message.id,
    ]);
    srv.gates.open('steer-idem');
    await api.waitForRun(runId, 'completed');
    const said = texts((await api.get(`/v1/sessions/${sessionId}/transcript`)).body.items);
    expect(said.filter((t) => t === 'only once')).toHaveLength(1);
    // The message the retry named is the one in the log.
    const users = (await api.allEvents(sessionId))
      .filter((e) => e.type === 'user/message')
      .map((e) => (e.data as Json).message.id);
    expect(users).toContain(retry.body.message.id);
  });
});

describe('POST /v1/runs/{id}/input (ask_user)', () => {
  it('answers the question; the run resumes and completes', async () => {
    const { sessionId, runId } = await start('ask');
    const waiting = await api.waitForRun(runId, 'waiting_for_user');
    expect(waiting.waiting).toEqual({
      kind: 'input',
      requests: [
        {
          approval_id: expect.any(String),
          tool_call_id: expect.any(String),
          tool: 'ask_user',
          arguments: { questions: [{ id: 'color', question: 'Which color?', choices: ['red', 'blue'] }] },
          kind: 'input',
          decided: false,
        },
      ],
      expires_at: null,
    });
    expectProblem(await api.post(`/v1/runs/${runId}/input`, {}), 'validation', 400);
    expectProblem(
      await api.post(`/v1/runs/${runId}/input`, { answers: { color: 'red' }, tool_call_id: 'no-such-call' }),
      'not_found',
      404,
    );

    const r = await api.post(`/v1/runs/${runId}/input`, { answers: { color: 'red' } });
    expect(r.status).toBe(200);
    expect(r.body.id).toBe(runId);
    expect(['queued', 'running', 'completed']).toContain(r.body.status);
    await api.waitForRun(runId, 'completed');
    const answer = (await api.allEvents(sessionId)).find((e) => e.type === 'user/answer');
    expect(answer).toMatchObject({
      run_id: runId,
      data: { toolCallId: waiting.waiting.requests[0].tool_call_id, answer: { color: 'red' } },
    });
    expect(texts((await api.get(`/v1/sessions/${sessionId}/transcript`)).body.items)).toContain('done');

    expectProblem(await api.post(`/v1/runs/${runId}/input`, { answers: { color: 'blue' } }), 'illegal_transition', 409);
  });

  it('takes an explicit tool_call_id', async () => {
    const { runId } = await start('ask');
    const waiting = await api.waitForRun(runId, 'waiting_for_user');
    const r = await api.post(`/v1/runs/${runId}/input`, {
      answers: 'blue',
      tool_call_id: waiting.waiting.requests[0].tool_call_id,
    });
    expect(r.status).toBe(200);
    await api.waitForRun(runId, 'completed');
  });

  it('a run that waits for no answer refuses one: 409 with its status', async () => {
    const { runId } = await running('input-1');
    expect(
      expectProblem(await api.post(`/v1/runs/${runId}/input`, { answers: 'x' }), 'illegal_transition', 409).from,
    ).toBe('running');
    srv.gates.open('input-1');
    await api.waitForRun(runId, 'completed');
  });
});

describe('POST /v1/runs/{id}/approvals/{approval_id}', () => {
  it('approves with edited arguments and denies with a reason; a second, different decision is already_decided', async () => {
    const { sessionId, runId } = await start('danger2:apple,banana');
    const waiting = await api.waitForRun(runId, 'waiting_approval');
    expect(waiting.waiting.kind).toBe('approval');
    const [a, b] = waiting.waiting.requests as Json[];
    expect([a.tool, a.arguments, a.decided, b.arguments]).toEqual([
      'danger',
      { target: 'apple' },
      false,
      { target: 'banana' },
    ]);

    const approved = await api.post(`/v1/runs/${runId}/approvals/${a.approval_id}`, {
      decision: 'approve',
      arguments: { target: 'apricot' },
    });
    expect(approved.status).toBe(200);
    expect(approved.body.status).toBe('waiting_approval');
    expect(approved.body.waiting.requests.map((q: Json) => q.decided)).toEqual([true, false]);
    // The same decision again is a no-op; a different one is refused.
    const same = await api.post(`/v1/runs/${runId}/approvals/${a.approval_id}`, {
      decision: 'approve',
      arguments: { target: 'apricot' },
    });
    expect(same.status).toBe(200);
    expect(same.body.waiting).toEqual(approved.body.waiting);
    expectProblem(
      await api.post(`/v1/runs/${runId}/approvals/${a.approval_id}`, { decision: 'deny', reason: 'changed my mind' }),
      'already_decided',
      409,
    );
    expectProblem(
      await api.post(`/v1/runs/${runId}/approvals/${a.approval_id}`, { decision: 'approve' }),
      'already_decided',
      409,
    );

    const denied = await api.post(`/v1/runs/${runId}/approvals/${b.approval_id}`, {
      decision: 'deny',
      reason: 'not bananas',
    });
    expect(denied.status).toBe(200);
    await api.waitForRun(runId, 'completed');

    // Only the approved call ran, with the edited arguments.
    expect(srv.dangerRuns.filter((d) => ['apple', 'apricot', 'banana'].includes(d.target))).toEqual([
      { target: 'apricot' },
    ]);
    const decisions = (await api.allEvents(sessionId)).filter((e) => e.type === 'tool/decision');
    expect(decisions.map((e) => e.data)).toEqual([
      { toolCallId: a.tool_call_id, approved: true, editedInput: { target: 'apricot' } },
      { toolCallId: b.tool_call_id, approved: false, reason: 'not bananas' },
    ]);
    const results = (await api.allEvents(sessionId)).filter((e) => e.type === 'tool/result');
    expect(JSON.stringify(results.find((e) => e.data.toolCallId === b.tool_call_id))).toContain('not bananas');

    // The run is over: any decision now is an illegal transition.
    expectProblem(
      await api.post(`/v1/runs/${runId}/approvals/${b.approval_id}`, { decision: 'approve' }),
      'illegal_transition',
      409,
    );
  });

  it('approves as proposed', async () => {
    const { runId } = await start('danger:plain');
    const waiting = await api.waitForRun(runId, 'waiting_approval');
    const r = await api.post(`/v1/runs/${runId}/approvals/${waiting.waiting.requests[0].approval_id}`, {
      decision: 'approve',
    });
    expect(r.status).toBe(200);
    await api.waitForRun(runId, 'completed');
    expect(srv.dangerRuns).toContainEqual({ target: 'plain' });
  });

  it('refuses unknown approvals, arguments with a denial, and bad decisions', async () => {
    const { runId } = await start('danger:never');
    const waiting = await api.waitForRun(runId, 'waiting_approval');
    const id = waiting.waiting.requests[0].approval_id;
    expectProblem(
      await api.post(`/v1/runs/${runId}/approvals/no-such-call`, { decision: 'approve' }),
      'not_found',
      404,
    );
    expectProblem(
      await api.post(`/v1/runs/${runId}/approvals/${id}`, { decision: 'deny', arguments: { target: 'x' } }),
      'validation',
      400,
    );
    expectProblem(await api.post(`/v1/runs/${runId}/approvals/${id}`, { decision: 'maybe' }), 'validation', 400);
    expectProblem(
      await api.post(`/v1/runs/${runId}/approvals/${id}`, { decision: 'approve', note: 'hi' }),
      'validation',
      400,
    );
    // An answer is not an approval: the run's state refuses it (409, with its status).
    const wrongKind = expectProblem(
      await api.post(`/v1/runs/${runId}/input`, { answers: 'x', tool_call_id: id }),
      'illegal_transition',
      409,
    );
    expect(wrongKind.from).toBe('waiting_approval');
    expectProblem(await api.post(`/v1/runs/no-such-run/approvals/${id}`, { decision: 'approve' }), 'not_found', 404);
    expect((await api.get(`/v1/runs/${runId}`)).body.status).toBe('waiting_approval');
    await api.post(`/v1/runs/${runId}/approvals/${id}`, { decision: 'deny' });
    await api.waitForRun(runId, 'completed');
    expect(srv.dangerRuns).not.toContainEqual({ target: 'never' });
  });
});
