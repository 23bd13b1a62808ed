/**
 * GET /v1/usage: tokens and cost of a tenant's runs, each run's own usage once (a parent's recorded
 * usage includes its subagent's), erased sessions included, as JSON and as CSV; bad parameters are
 * validation problems naming each one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent, ScriptedModel, subagent, type Pricing } from '../../src/index.ts';
import { createApiKey } from '../../src/server/auth.ts';
import { startServer, type RunningServer } from '../../src/server/serve.ts';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/index.ts';
import { Api, expectProblem } from '../support/server-helpers.ts';

// A dollar an input token and two an output token: costs are whole numbers.
const pricing: Pricing = { inputPerMTok: 1_000_000, outputPerMTok: 2_000_000 };

let dir: string;
let store: SqliteStore;
let server: RunningServer;
let acme: Api;
let globex: Api;
let parentRun: { id: string; usage: Record<string, number>; cost: number };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-usage-'));
  store = openSqliteStore({ path: join(dir, 'keel.db') });
  const keys = [await createApiKey(store, { tenant: 'acme' }), await createApiKey(store, { tenant: 'globex' })];
  const agents = [
    defineAgent({
      name: 'parent',
      model: new ScriptedModel(
        [
          {
            toolCalls: [{ id: 'd1', name: 'delegate', input: { task: 'look it up' } }],
            usage: { input: 100, output: 10, cached: 20, reasoning: 3 },
          },
          { text: 'parent done', usage: { input: 200, output: 20 } },
        ],
        { modelId: 'parent-1' },
      ),
      tools: [subagent({ name: 'delegate', description: 'Hands a task to the child agent', agent: 'child' })],
      pricing,
    }),
    defineAgent({
      name: 'child',
      model: new ScriptedModel([{ text: 'child done', usage: { input: 30, output: 3, reasoning: 1 } }], {
        modelId: 'child-1',
      }),
      pricing,
    }),
    defineAgent({
      name: 'plain',
      model: new ScriptedModel([{ text: 'hi', usage: { input: 7, output: 3 } }], { loop: true, modelId: 'plain-1' }),
      pricing,
    }),
  ];
  server = await startServer({
    store,
    config: { source: null, agents, compaction: {}, demo: false },
    port: 0,
    host: '127.0.0.1',
    workers: 2,
    version: '0.0.0-test',
    leaseMs: 10_000,
  });
  acme = new Api(server.url, keys[0]!.secret);
  globex = new Api(server.url, keys[1]!.secret);

  // acme: a parent run that hands a task to a subagent (a child run in a child session)...
  const a = await acme.session({ agent: 'parent' });
  const sent = await acme.send(a.id, 'go');
  parentRun = await acme.waitForRun(sent.run.id, 'completed');
  // ...and a plain run whose session is then erased.
  const b = await acme.session({ agent: 'plain' });
  await acme.waitForRun((await acme.send(b.id, 'hello')).run.id, 'completed');
  expect((await acme.post(`/v1/sessions/${b.id}/erase`, {})).status).toBe(200);
  // globex: one plain run.
  const g = await globex.session({ agent: 'plain' });
  await globex.waitForRun((await globex.send(g.id, 'hello')).run.id, 'completed');
}, 30_000);

afterAll(async () => {
  await server?.close({ graceMs: 200 });
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const today = () => new Date().toISOString().slice(0, 10);
const zero = { cached_input_tokens: 0, reasoning_tokens: 0 };

describe('GET /v1/usage', () => {
  it("counts each run's own usage once: the parent's recorded usage includes its subagent's, which counts under the child's agent and model", async () => {
    // What the parent run records: its own and its child's.
    expect(parentRun.usage).toMatchObject({ inputTokens: 330, outputTokens: 33 });
    const r = await acme.get('/v1/usage?group_by=agent,model');
    expect(r.status).toBe(200);
    expect(r.body.group_by).toEqual(['agent', 'model']);
    expect(r.body.data).toEqual([
      {
        agent: 'child',
        model: 'scripted:child-1',
        runs: 1,
        input_tokens: 30,
        output_tokens: 3,
        cached_input_tokens: 0,
        reasoning_tokens: 1,
        cost: 30 + 6,
      },
      {
        agent: 'parent',
        model: 'scripted:parent-1',
        runs: 1,
        input_tokens: 300,
        output_tokens: 30,
        cached_input_tokens: 20,
        reasoning_tokens: 3,
        cost: 300 + 60,
      },
      // The erased session's run is still counted.
      { agent: 'plain', model: 'scripted:plain-1', runs: 1, input_tokens: 7, output_tokens: 3, ...zero, cost: 7 + 6 },
    ]);
    // Not 330 + 30 + 7, as a naive sum of the runs' recorded usage would say.
    expect(r.body.totals).toEqual({
      runs: 3,
      input_tokens: 337,
      output_tokens: 36,
      cached_input_tokens: 20,
      reasoning_tokens: 4,
      cost: 409,
    });
  });

  it("a key sees only its own tenant's usage: grouped by tenant, filtered, and refused (403) for another tenant", async () => {
    const mine = await globex.get('/v1/usage?group_by=tenant');
    expect(mine.body.data).toEqual([
      { tenant: 'globex', runs: 1, input_tokens: 7, output_tokens: 3, ...zero, cost: 13 },
    ]);
    expect(
      (await acme.get('/v1/usage?group_by=tenant')).body.data.map((d: { tenant: string; runs: number }) => [
        d.tenant,
        d.runs,
      ]),
    ).toEqual([['acme', 3]]);
    expect((await acme.get('/v1/usage?group_by=&tenant=acme')).body.data).toEqual([
      { runs: 3, input_tokens: 337, output_tokens: 36, cached_input_tokens: 20, reasoning_tokens: 4, cost: 409 },
    ]);
    expectProblem(await globex.get('/v1/usage?tenant=acme'), 'forbidden', 403);
  });

  it('groups by the UTC day (the default) or hour the runs ended, and filters by agent and model', async () => {
    const days = await acme.get('/v1/usage');
    expect(days.body.group_by).toEqual(['day']);
    expect(days.body.data).toEqual([
      {
        day: today(),
        runs: 3,
        input_tokens: 337,
        output_tokens: 36,
        cached_input_tokens: 20,
        reasoning_tokens: 4,
        cost: 409,
      },
    ]);
    const hours = await acme.get(`/v1/usage?group_by=hour,agent&agent=child&from=${today()}`);
    expect(hours.body.data).toHaveLength(1);
    expect(hours.body.data[0]).toMatchObject({ agent: 'child', runs: 1, input_tokens: 30 });
    expect(hours.body.data[0].hour).toMatch(new RegExp(`^${today()}T\\d\\d:00:00Z$`));
    expect((await acme.get('/v1/usage?group_by=&model=scripted:plain-1')).body.totals).toMatchObject({
      runs: 1,
      input_tokens: 7,
    });
    // A range that ended before today holds nothing.
    const before = await acme.get('/v1/usage?from=2020-01-01&to=2020-01-31');
    expect(before.body).toMatchObject({
      from: '2020-01-01T00:00:00.000Z',
      to: '2020-02-01T00:00:00.000Z',
      data: [],
      totals: { runs: 0, cost: 0 },
    });
  });

  it('answers CSV for ?format=csv or Accept: text/csv', async () => {
    const r = await acme.get('/v1/usage?group_by=agent&format=csv');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(r.text).toBe(
      'agent,runs,input_tokens,output_tokens,cached_input_tokens,reasoning_tokens,cost\r\n' +
        'child,1,30,3,0,1,36\r\n' +
        'parent,1,300,30,20,3,360\r\n' +
        'plain,1,7,3,0,0,13\r\n',
    );
    const accepted = await acme.get('/v1/usage?group_by=model', { accept: 'text/csv' });
    expect(accepted.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(accepted.text.split('\r\n')[0]).toBe(
      'model,runs,input_tokens,output_tokens,cached_input_tokens,reasoning_tokens,cost',
    );
    expect((await acme.get('/v1/usage?format=json', { accept: 'text/csv' })).body.data).toHaveLength(1);
  });

  it('refuses bad parameters with a validation problem naming each one', async () => {
    const bad = async (query: string, path: string, message: RegExp) => {
      const p = expectProblem(await acme.get(`/v1/usage?${query}`), 'validation', 400);
      expect(p.errors).toEqual(
        expect.arrayContaining([expect.objectContaining({ path, message: expect.stringMatching(message) })]),
      );
    };
    await bad('from=2025-02-30', 'from', /not a date of the calendar/);
    await bad('from=yesterday', 'from', /neither a date/);
    await bad('to=2025-01-01T10:00:00', 'to', /with an offset/);
    await bad('from=2025-03-01&to=2025-02-01', 'from', /must be before to/);
    await bad('from=2024-01-01&to=2025-12-31', 'to', /at most 366 days/);
    await bad('from=2025-01-01&to=2025-03-01&group_by=hour', 'to', /at most 31 days grouped by hour/);
    await bad('group_by=day,hour', 'group_by', /exclude each other/);
    await bad('group_by=agent,week', 'group_by', /unknown "week"/);
    await bad('format=xml', 'format', /./);
    const both = expectProblem(await acme.get('/v1/usage?from=nope&group_by=week'), 'validation', 400);
    expect(both.errors.map((e: { path: string }) => e.path)).toEqual(['from', 'group_by']);
    const unknown = expectProblem(await acme.get('/v1/usage?bucket=day'), 'validation', 400);
    expect(unknown.unknown_parameters).toEqual(['bucket']);
  });

  it('is described in /openapi.json', async () => {
    const doc = (await acme.get('/openapi.json')).body;
    expect(doc.paths['/v1/usage'].get.parameters.map((p: { name: string }) => p.name)).toEqual([
      'from',
      'to',
      'group_by',
      'tenant',
      'agent',
      'model',
      'format',
    ]);
    expect(Object.keys(doc.paths['/v1/usage'].get.responses['200'].content)).toEqual(['application/json', 'text/csv']);
  });
});
