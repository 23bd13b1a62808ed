/**
 * Datasets, experiments and bulk reruns through real HTTP, on both backends: a dataset of two
 * recorded runs; step replay of the recording version scores 1 on every item with every request
 * rebuilt byte for byte; terse@2 regresses, worst first; a late score merges; a bulk rerun reruns
 * what its filter matches; bad requests get precise problems.
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

describe.each(BACKENDS)('evaluations over HTTP (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  const runs: string[] = [];

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }] });
    acme = srv.api(srv.secrets[0]);
    srv.gates.open('k');
    for (const text of ['hello there', 'block:k/twice']) {
      const s = await acme.session();
      const { run } = await acme.send(s.id, text);
      await acme.waitForRun(run.id, 'completed');
      runs.push(run.id);
    }
  });
  afterAll(async () => {
    await srv?.close();
  });

  const until = async (path: string) =>
    acme.until(path, async () => {
      const r = await acme.get(path);
      return r.body.status !== 'running' ? (r.body as Json) : undefined;
    });

  it('a dataset, an experiment by step replay, its results and a late score', async () => {
    const d = await acme.post('/v1/datasets', {
      name: 'greetings',
      runs: [runs[0], { run_id: runs[1], expected: 'done twice', notes: 'the gate' }],
    });
    expect(d.status, d.text).toBe(201);
    expect(d.body).toMatchObject({ name: 'greetings', item_count: 2 });
    const items = await acme.get(`/v1/datasets/${d.body.id}/items`);
    expect(items.body.data.map((i: Json) => [i.source_run_id, i.steps, i.trigger, i.expected])).toEqual([
      [runs[0], 1, 'hello there', null],
      [runs[1], 2, 'block:k/twice', 'done twice'],
    ]);
    expect((await acme.get('/v1/datasets')).body.data.map((x: Json) => x.id)).toContain(d.body.id);

    const e = await acme.post('/v1/experiments', {
      dataset: d.body.id,
      candidates: ['helper@1', { agent: 'terse@2', label: 'terse' }],
      scorers: ['tool_calls', 'final_text', 'status'],
      concurrency: 2,
    });
    expect(e.status, e.text).toBe(201);
    expect(e.body).toMatchObject({ mode: 'step_replay', baseline: 'recorded', status: 'running' });
    expect((await until(`/v1/experiments/${e.body.id}`)).counts).toEqual({
      pending: 0,
      running: 0,
      done: 4,
      failed: 0,
    });

    const r = (await acme.get(`/v1/experiments/${e.body.id}/results`)).body;
    const helper = r.candidates.find((c: Json) => c.label === 'helper@1');
    expect(helper.scores).toMatchObject({ tool_calls: 1, status: 1 });
    // final_text compares with the expected answer where there is one ("done twice" vs "done twice").
    expect(helper.scores.final_text).toBe(1);
    expect(helper.regressions).toEqual([]);
    const terse = r.candidates.find((c: Json) => c.label === 'terse');
    expect(terse.vs_baseline).toBeLessThan(0);
    expect(terse.regressions.length).toBe(2);
    expect(terse.regressions[0].diff).toBeLessThanOrEqual(terse.regressions[1].diff);

    const list = (await acme.get(`/v1/experiments/${e.body.id}/items`)).body.data as Json[];
    const replayed = list.filter((i) => i.candidate === 'helper@1');
    expect(replayed.map((i) => i.result.requestsMatched)).toEqual([1, 2]);
    const rated = await acme.post(`/v1/experiments/${e.body.id}/items/${list[0]!.id}/scores`, {
      scores: { rating: 0.5 },
    });
    expect(rated.status).toBe(200);
    expect(rated.body.scores.rating).toBe(0.5);
    expectProblem(
      await acme.post(`/v1/experiments/${e.body.id}/items/${list[0]!.id}/scores`, { scores: { score: 1 } }),
      'validation',
      400,
    );
  });

  it('a bulk rerun of what a filter matches; bad requests', async () => {
    const b = await acme.post('/v1/reruns', {
      filter: { agent: 'helper@1', status: ['completed'], limit: 2 },
      rerun: { tools: 'reuse' },
      concurrency: 2,
    });
    expect(b.status, b.text).toBe(201);
    expect((await until(`/v1/reruns/${b.body.id}`)).counts.done).toBe(2);
    const items = (await acme.get(`/v1/reruns/${b.body.id}/items`)).body.data as Json[];
    expect(items.map((i) => i.source_run_id)).toEqual(runs);
    expect(items.map((i) => i.run_status)).toEqual(['completed', 'completed']);
    for (const i of items) expect((await acme.get(`/v1/runs/${i.run_id}`)).body.rerun_of).toBe(i.source_run_id);

    expectProblem(await acme.post('/v1/experiments', { dataset: 'nope', candidates: ['helper@1'] }), 'not_found', 404);
    const d = (await acme.post('/v1/datasets', { name: 'x', runs: [runs[0]] })).body;
    expectProblem(await acme.post('/v1/experiments', { dataset: d.id, candidates: [] }), 'validation', 400);
    expectProblem(
      await acme.post('/v1/experiments', { dataset: d.id, candidates: ['helper@1'], scorers: ['vibes'] }),
      'validation',
      400,
    );
    expectProblem(await acme.post('/v1/experiments', { dataset: d.id, candidates: ['ghost@1'] }), 'unknown_agent', 422);
    expectProblem(await acme.post('/v1/datasets', { name: 'x' }), 'validation', 400);
    expectProblem(await acme.post('/v1/reruns', { filter: { agent: 'nobody' } }), 'validation', 400);
  });
});
