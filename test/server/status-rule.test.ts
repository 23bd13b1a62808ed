/**
 * The rule of refusals for a run's actions (docs/api.md), on SQLite and PostgreSQL, in every state
 * a run can be in: a path id that does not exist is 404 whatever state its parent is in; a request
 * the run's state refuses is 409 naming that status (`illegal_transition`, `from`); a malformed one
 * is 400.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  BACKENDS,
  expectProblem,
  startTestServer,
  type Api,
  type Json,
  type TestServer,
} from '../support/server-helpers.ts';

describe.each(BACKENDS)('404 for what does not exist, 409 for what the state refuses (%s)', (backend) => {
  let srv: TestServer;
  let api: Api;
  beforeAll(async () => {
    srv = await startTestServer({ backend });
    api = srv.api();
  });
  afterAll(async () => {
    await srv?.close();
  });
  // A test that failed midway must not leave workers held at a gate for the next.
  afterEach(() => srv.gates.openAll());

  /** A run in `status`: its id, and the approval or question it asked (if it asked one). */
  async function runIn(
    status: 'running' | 'waiting_approval' | 'waiting_for_user' | 'paused' | 'completed' | 'cancelled',
    key: string,
  ): Promise<{ id: string; asked?: string }> {
    const s = await api.session();
    if (status === 'running' || status === 'paused') {
      const { run } = await api.send(s.id, `block:${key}`);
      await srv.gates.entered(key);
      if (status === 'paused') {
        await api.post(`/v1/runs/${run.id}/pause`);
        srv.gates.open(key);
        await api.waitForRun(run.id, 'paused');
      }
      return { id: run.id };
    }
    if (status === 'completed') {
      // It asked for an approval, was approved, and completed.
      const { run } = await api.send(s.id, `danger:${key}`);
      const asked = (await api.waitForRun(run.id, 'waiting_approval')).waiting.requests[0].approval_id;
      await api.post(`/v1/runs/${run.id}/approvals/${asked}`, { decision: 'approve' });
      await api.waitForRun(run.id, 'completed');
      return { id: run.id, asked };
    }
    const { run } = await api.send(s.id, status === 'waiting_for_user' ? 'ask' : `danger:${key}`);
    const waiting = await api.waitForRun(run.id, status === 'cancelled' ? 'waiting_approval' : status);
    const asked = waiting.waiting.requests[0].approval_id;
    if (status === 'cancelled') await api.post(`/v1/runs/${run.id}/cancel`);
    return { id: run.id, asked };
  }

  const STATES = ['running', 'waiting_approval', 'waiting_for_user', 'paused', 'completed', 'cancelled'] as const;

  it('an approval or question id the run never asked about is 404, whatever state the run is in', async () => {
    for (const status of STATES) {
      const run = await runIn(status, `unknown-${status}`);
      for (const [path, body] of [
        [`/v1/runs/${run.id}/approvals/no-such-call`, { decision: 'approve' }],
        [`/v1/runs/${run.id}/approvals/no-such-call`, { decision: 'deny', reason: 'no' }],
        [`/v1/runs/${run.id}/input`, { answers: 'x', tool_call_id: 'no-such-call' }],
      ] as const) {
        const p = expectProblem(await api.post(path, body), 'not_found', 404);
        expect(p.detail, `${status} ${path}`).toContain('no-such-call');
      }
      // The run was not touched.
      expect((await api.get(`/v1/runs/${run.id}`)).body.status, status).toBe(status);
      srv.gates.open(`unknown-${status}`);
    }
  });

  it('an approval or question the run did ask about, once the run no longer waits for it, is 409 naming the status', async () => {
    for (const status of ['completed', 'cancelled'] as const) {
      const run = await runIn(status, `asked-${status}`);
      const p = expectProblem(
        await api.post(`/v1/runs/${run.id}/approvals/${run.asked}`, { decision: 'approve' }),
        'illegal_transition',
        409,
      );
      expect(p).toMatchObject({ run_id: run.id, from: status });
      expect(p.detail).toContain(status);
      expect(
        expectProblem(
          await api.post(`/v1/runs/${run.id}/input`, { answers: 'x', tool_call_id: run.asked }),
          'illegal_transition',
          409,
        ).from,
      ).toBe(status);
    }
    // A question answered as an approval (and the other way round): the run waits, but not for that.
    const question = await runIn('waiting_for_user', 'kind-q');
    expect(
      expectProblem(
        await api.post(`/v1/runs/${question.id}/approvals/${question.asked}`, { decision: 'approve' }),
        'illegal_transition',
        409,
      ).from,
    ).toBe('waiting_for_user');
    const approval = await runIn('waiting_approval', 'kind-a');
    expect(
      expectProblem(
        await api.post(`/v1/runs/${approval.id}/input`, { answers: 'x', tool_call_id: approval.asked }),
        'illegal_transition',
        409,
      ).from,
    ).toBe('waiting_approval');
    await api.post(`/v1/runs/${question.id}/cancel`);
    await api.post(`/v1/runs/${approval.id}/cancel`);
  });

  it('an answer to a run that waits for no answer is 409 naming its status, in every state', async () => {
    for (const status of STATES.filter((s) => s !== 'waiting_for_user')) {
      const run = await runIn(status, `answer-${status}`);
      const p = expectProblem(await api.post(`/v1/runs/${run.id}/input`, { answers: 'x' }), 'illegal_transition', 409);
      expect(p, status).toMatchObject({ run_id: run.id, from: status });
      expect(p.detail, status).toContain(status);
      srv.gates.open(`answer-${status}`);
      if (status === 'paused' || status === 'waiting_approval') await api.post(`/v1/runs/${run.id}/cancel`);
    }
  });

  it('a delivery id that does not exist is 404, whether its webhook is active or not', async () => {
    const hook = (await api.post('/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['run.completed'] })).body;
    for (const active of [true, false]) {
      expect((await api.request('PATCH', `/v1/webhooks/${hook.id}`, { json: { active } })).status).toBe(200);
      const p = expectProblem(
        await api.post(`/v1/webhooks/${hook.id}/deliveries/no-such-delivery/redeliver`),
        'not_found',
        404,
      );
      expect(p.detail).toContain('no-such-delivery');
    }
  });

  it('the other actions: each state that refuses one says so with 409 and its status; a malformed request is 400 first', async () => {
    const states: Record<string, { id: string }> = {};
    for (const status of STATES) states[status] = await runIn(status, `actions-${status}`);
    const refusals: Array<[string, string, unknown?]> = [
      ['completed', 'pause'],
      ['completed', 'resume'],
      ['completed', 'steer', { content: 'too late' }],
      ['completed', 'signals/ready', { ok: true }],
      ['cancelled', 'pause'],
      ['cancelled', 'resume'],
      ['cancelled', 'steer', { content: 'too late' }],
      ['cancelled', 'signals/ready', { ok: true }],
      ['waiting_approval', 'pause'],
      ['waiting_approval', 'resume'],
      ['waiting_for_user', 'pause'],
      ['waiting_for_user', 'resume'],
      ['paused', 'pause'],
      ['running', 'resume'],
    ];
    for (const [status, action, body] of refusals) {
      const p = expectProblem(
        await api.post(`/v1/runs/${states[status]!.id}/${action}`, body),
        'illegal_transition',
        409,
      );
      expect(p, `${action} on ${status}`).toMatchObject({ run_id: states[status]!.id, from: status });
      expect(p.detail, `${action} on ${status}`).toContain(status);
    }
    // Malformed: 400 whatever the state.
    for (const status of STATES) {
      const id = states[status]!.id;
      expectProblem(await api.post(`/v1/runs/${id}/approvals/any`, { decision: 'maybe' }), 'validation', 400);
      expectProblem(await api.post(`/v1/runs/${id}/input`, {}), 'validation', 400);
      expectProblem(await api.post(`/v1/runs/${id}/steer`, { content: '' }), 'validation', 400);
    }
    // An unknown run is 404 for every action.
    for (const [action, body] of [
      ['cancel'],
      ['pause'],
      ['resume'],
      ['steer', { content: 'x' }],
      ['input', { answers: 'x' }],
      ['approvals/a', { decision: 'approve' }],
      ['signals/s', {}],
    ] as Array<[string, Json?]>) {
      expectProblem(await api.post(`/v1/runs/no-such-run/${action}`, body), 'not_found', 404);
    }
    srv.gates.openAll();
    for (const status of ['running', 'paused', 'waiting_approval', 'waiting_for_user'] as const)
      await api.post(`/v1/runs/${states[status]!.id}/cancel`);
  });
});
