/**
 * POST /v1/runs/{id}/rerun and GET /v1/runs?rerun_of= through real HTTP, on both backends: a run
 * whose effectful call was approved and ran is rerun with the recorded result reused (no approval
 * asked, the tool not run again, the comparison marks the call reused); with `execute` the rerun
 * waits for the approval like any run; on another agent version the comparison shows the new
 * answer. Another tenant gets 404; bad requests get precise problems.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BACKENDS,
  expectProblem,
  startTestServer,
  type Api,
  type Json,
  type TestServer,
} from '../support/server-helpers.ts';

describe.each(BACKENDS)('reruns over HTTP (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let globex: Api;
  let source: Json;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    globex = srv.api(srv.secrets[1]);
    const s = await acme.session({ title: 'ops' });
    const { run } = await acme.send(s.id, 'danger:prod');
    await acme.waitForRun(run.id, 'waiting_approval');
    const approved = await acme.post(
      `/v1/runs/${run.id}/approvals/${(await acme.get(`/v1/runs/${run.id}`)).body.waiting.requests[0].approval_id}`,
      {
        decision: 'approve',
      },
    );
    expect(approved.status).toBe(200);
    source = await acme.waitForRun(run.id, 'completed');
    expect(srv.dangerRuns).toEqual([{ target: 'prod' }]);
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('reuses the recorded result of the effectful call: no approval, not run again, marked reused in the comparison', async () => {
    const r = await acme.post(`/v1/runs/${source.id}/rerun`, {});
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      status: 'queued',
      rerun_of: source.id,
      agent: { name: 'helper', version: '1' },
      rerun: {
        of: { session_id: source.session_id, run_id: source.id, step: 1 },
        agent: { name: 'helper', version: '1' },
        overrides: null,
        message_replaced: false,
      },
    });
    expect(r.body.session_id).not.toBe(source.session_id);
    const done = await acme.waitForRun(r.body.id, 'completed');
    expect(done.rerun_of).toBe(source.id);
    expect(srv.dangerRuns).toHaveLength(1);

    const cmp = await acme.get(`/v1/runs/${source.id}/compare/${r.body.id}`);
    expect(cmp.status).toBe(200);
    const call = cmp.body.steps[0].toolCalls[0];
    expect(call).toMatchObject({
      arguments: true,
      result: true,
      a: { name: 'danger', source: 'executed' },
      b: { name: 'danger', source: 'reused', result: { type: 'text', value: 'did prod' } },
    });
    expect(cmp.body.finalAnswer.equal).toBe(true);

    const listed = await acme.get(`/v1/runs?rerun_of=${source.id}`);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((x: Json) => x.id)).toContain(r.body.id);
  });

  it('with tools executed the rerun waits for the approval like any run, then runs the tool', async () => {
    const r = await acme.post(`/v1/runs/${source.id}/rerun`, { tools: 'execute' });
    expect(r.status).toBe(201);
    const waiting = await acme.waitForRun(r.body.id, 'waiting_approval');
    const decided = await acme.post(`/v1/runs/${r.body.id}/approvals/${waiting.waiting.requests[0].approval_id}`, {
      decision: 'approve',
    });
    expect(decided.status).toBe(200);
    await acme.waitForRun(r.body.id, 'completed');
    expect(srv.dangerRuns).toHaveLength(2);
  });

  it('on another agent version from a later step: the comparison shows the changed answer', async () => {
    const r = await acme.post(`/v1/runs/${source.id}/rerun`, {
      from: 2,
      agent: 'terse@2',
      tools: { by_tool: { danger: { mode: 'mock', value: 'mocked' } } },
    });
    // terse has no `danger`; the source run's spec has, so a policy may name it (it applies to nothing here).
    expect(r.status).toBe(201);
    await acme.waitForRun(r.body.id, 'completed');
    const cmp = await acme.get(`/v1/runs/${source.id}/compare/${r.body.id}`);
    expect(cmp.body.finalAnswer).toMatchObject({ a: 'done', b: 'ok', equal: false });
    expect(cmp.body.steps.find((s: Json) => s.step === 2).request.modelId).toEqual({
      a: 'helper-1',
      b: 'terse-1',
      equal: false,
    });
    const filtered = await acme.get(`/v1/runs?agent=terse@2&status=completed`);
    expect(filtered.body.data.map((x: Json) => x.id)).toEqual([r.body.id]);
  });

  it('another tenant sees none of it; bad requests get precise problems', async () => {
    expectProblem(await globex.post(`/v1/runs/${source.id}/rerun`, {}), 'not_found', 404);
    const theirs = await globex.get(`/v1/runs?rerun_of=${source.id}`);
    expect(theirs.status).toBe(200);
    expect(theirs.body.data).toEqual([]);

    const late = expectProblem(await acme.post(`/v1/runs/${source.id}/rerun`, { from: 9 }), 'invalid_rerun', 422);
    expect(late).toMatchObject({ field: 'from', detail: expect.stringContaining('recorded steps 1 to 2') });
    expectProblem(await acme.post(`/v1/runs/${source.id}/rerun`, { tools: 'sometimes' }), 'validation', 400);
    expectProblem(await acme.post(`/v1/runs/${source.id}/rerun`, { agent: 'ghost@1' }), 'unknown_agent', 422);
    const tool = expectProblem(
      await acme.post(`/v1/runs/${source.id}/rerun`, { tools: { by_tool: { nuke: 'execute' } } }),
      'invalid_rerun',
      422,
    );
    expect(tool.field).toBe('tools');
    const model = expectProblem(
      await acme.post(`/v1/runs/${source.id}/rerun`, { overrides: { model: 'nope' } }),
      'invalid_rerun',
      422,
    );
    expect(model.detail).toContain('expected <provider>:<model>');
    expectProblem(await acme.get('/v1/runs?status=snoozing'), 'validation', 400);
    expectProblem(await acme.post('/v1/runs/nope/rerun', {}), 'not_found', 404);
  });
});
