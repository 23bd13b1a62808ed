/**
 * GET /v1/runs/{a}/compare/{b} through real HTTP, on both backends: two runs whose first step
 * makes the same tool call and whose second step answers differently, aligned by step; another
 * tenant's run and an unknown one are 404.
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

describe.each(BACKENDS)('GET /v1/runs/{a}/compare/{b} (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let globex: Api;
  let runA: string;
  let runB: string;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    globex = srv.api(srv.secrets[1]);
    // Both runs call gate {key: 'cmp'}, open already; after it, one answers `done`, the other `done twice over`.
    srv.gates.open('cmp');
    const run = async (text: string) => {
      const s = await acme.session();
      const { run } = await acme.send(s.id, text);
      await acme.waitForRun(run.id, 'completed');
      return run.id as string;
    };
    runA = await run('block:cmp');
    runB = await run('block:cmp/twice over');
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('aligns the steps: the same tool call is equal, the changed text is marked, status, tokens and cost are there', async () => {
    const r = await acme.get(`/v1/runs/${runA}/compare/${runB}`);
    expect(r.status).toBe(200);
    const c = r.body;
    expect(c.a).toMatchObject({ id: runA, status: 'completed', steps: 2, agent: { name: 'helper', version: '1' } });
    expect(c.b).toMatchObject({ id: runB, status: 'completed', steps: 2 });
    expect(c.status).toEqual({ a: 'completed', b: 'completed', equal: true });
    expect(c.tokens.input).toMatchObject({ a: expect.any(Number), b: expect.any(Number) });
    expect(c.tokens.output.equal).toBe(true);
    expect(c.cost).toEqual({ a: 0, b: 0, equal: true });
    expect(c.latencyMs.a).toEqual(expect.any(Number));
    expect(c.steps.map((s: Json) => [s.step, s.presentIn])).toEqual([
      [1, 'both'],
      [2, 'both'],
    ]);

    const [one, two] = c.steps as Json[];
    // Step 1: the same request but for the user's message, and the same call with the same result.
    expect(one.request.system).toEqual({
      hash: { a: expect.stringMatching(/^sha256:/), b: expect.stringMatching(/^sha256:/), equal: true },
      diff: null,
    });
    expect(one.request.tools.hash.equal).toBe(true);
    expect(one.request.tools.names).toMatchObject({ a: expect.arrayContaining(['gate']), equal: true });
    expect(one.request.modelId).toEqual({ a: 'helper-1', b: 'helper-1', equal: true });
    expect(one.request.fingerprint.equal).toBe(false);
    expect(one.text.equal).toBe(true);
    expect(one.endReason).toEqual({ a: 'tool-calls', b: 'tool-calls', equal: true });
    expect(one.toolCalls).toHaveLength(1);
    expect(one.toolCalls[0]).toMatchObject({
      index: 0,
      presentIn: 'both',
      name: true,
      arguments: true,
      result: true,
      equal: true,
      a: { name: 'gate', arguments: { key: 'cmp' }, result: { type: 'text', value: 'passed cmp' }, source: 'executed' },
      b: { name: 'gate', arguments: { key: 'cmp' }, result: { type: 'text', value: 'passed cmp' }, source: 'executed' },
    });

    // Step 2: the text changed, and the diff marks what was added.
    expect(two.text).toEqual({
      a: 'done',
      b: 'done twice over',
      equal: false,
      parts: [
        { op: 'equal', text: 'done' },
        { op: 'insert', text: ' twice over' },
      ],
    });
    expect(two.toolCalls).toEqual([]);
    expect(c.finalAnswer).toMatchObject({ a: 'done', b: 'done twice over', equal: false });
  });

  it('compares a run with itself as equal everywhere', async () => {
    const c = (await acme.get(`/v1/runs/${runA}/compare/${runA}`)).body;
    expect(c.finalAnswer.equal).toBe(true);
    expect(c.steps.every((s: Json) => s.text.equal && s.request.fingerprint.equal)).toBe(true);
  });

  it("answers 404 for another tenant's run and for an unknown one", async () => {
    expectProblem(await globex.get(`/v1/runs/${runA}/compare/${runB}`), 'not_found', 404);
    const own = await globex.session();
    const { run } = await globex.send(own.id, 'hi');
    await globex.waitForRun(run.id, 'completed');
    expectProblem(await globex.get(`/v1/runs/${run.id}/compare/${runB}`), 'not_found', 404);
    expectProblem(await acme.get(`/v1/runs/${runA}/compare/nope`), 'not_found', 404);
    expectProblem(await acme.get(`/v1/runs/nope/compare/${runA}`), 'not_found', 404);
  });
});
