/**
 * The NUL character (U+0000) gets the same answer on SQLite and PostgreSQL, whose text and jsonb
 * cannot hold it (docs/api.md): in an id, a name, a title, a URL or a secret (text a store keeps
 * as text) it is a 400 `validation` naming the field; in content (messages, metadata, payloads,
 * answers, arguments, tool results: JSON, kept JSON-escaped) it is stored and returned intact. The
 * library answers the same on both backends too.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  ScriptedModel,
  StoreError,
  tool,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import { openSqliteStore } from '../../src/store/sqlite/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import {
  BACKENDS,
  expectProblem,
  startTestServer,
  type Api,
  type Backend,
  type Json,
  type TestServer,
} from '../support/server-helpers.ts';

const NUL = '\u0000';

describe.each(BACKENDS)('NUL over HTTP (%s)', (backend) => {
  let srv: TestServer;
  let api: Api;
  beforeAll(async () => {
    srv = await startTestServer({ backend });
    api = srv.api();
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('in an id, a name, a title, a URL or a secret, in the path, the query or the body: 400 validation naming the field', async () => {
    const s = await api.session({ title: 'fine' });
    const asked = await api.send((await api.session()).id, 'ask');
    const run = await api.waitForRun(asked.run.id, 'waiting_for_user');
    const hook = (await api.post('/v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['run.completed'] })).body;
    const message = (id: string) => ({ messages: [{ id, role: 'user', parts: [{ type: 'text', text: 'hi' }] }] });
    const cases: Array<[string, string, unknown, string]> = [
      ['POST', '/v1/sessions', { title: `a${NUL}b` }, 'title'],
      ['POST', '/v1/sessions', { agent: `helper${NUL}` }, 'agent'],
      ['GET', `/v1/sessions/a%00b`, undefined, 'id'],
      ['GET', `/v1/sessions/${s.id}%00/events`, undefined, 'id'],
      ['GET', `/v1/runs/a%00b`, undefined, 'id'],
      ['GET', `/v1/sessions?cursor=a%00`, undefined, 'cursor'],
      ['GET', `/v1/inbox?cursor=a%00`, undefined, 'cursor'],
      ['GET', `/v1/session-summaries?q=a%00`, undefined, 'q'],
      ['POST', `/v1/sessions/${s.id}/leaf`, { entry_id: `e${NUL}` }, 'entry_id'],
      ['POST', `/v1/sessions/${s.id}/fork`, { entry_id: `e${NUL}`, into: 'branch' }, 'entry_id'],
      ['POST', `/v1/sessions/${s.id}/fork`, { entry_id: s.leaf_id ?? 'x', into: 'session', title: `t${NUL}` }, 'title'],
      ['POST', `/v1/sessions/${s.id}/messages`, { content: 'hi', agent: `a${NUL}` }, 'agent'],
      ['POST', `/v1/runs/${run.id}/input`, { answers: 'red', tool_call_id: `c${NUL}` }, 'tool_call_id'],
      ['POST', `/v1/runs/${run.id}/approvals/c%00`, { decision: 'approve' }, 'approval_id'],
      ['POST', `/v1/runs/${run.id}/signals/s%00`, { ok: true }, 'name'],
      ['POST', `/v1/callbacks/t%00`, { ok: true }, 'token'],
      [
        'POST',
        '/v1/schedules',
        { name: `n${NUL}`, interval: { seconds: 60 }, message: 'hi', target: { new_session: {} } },
        'name',
      ],
      [
        'POST',
        '/v1/schedules',
        { interval: { seconds: 60 }, message: 'hi', target: { new_session: { title: `t${NUL}` } } },
        'target.new_session.title',
      ],
      [
        'POST',
        '/v1/schedules',
        { interval: { seconds: 60 }, message: 'hi', target: { session_id: `s${NUL}` } },
        'target.session_id',
      ],
      ['GET', `/v1/schedules/x%00`, undefined, 'id'],
      ['POST', '/v1/webhooks', { url: `http://127.0.0.1:9/${NUL}`, events: ['run.completed'] }, 'url'],
      [
        'POST',
        '/v1/webhooks',
        { url: 'http://127.0.0.1:9/', events: ['run.completed'], secret: `${'s'.repeat(20)}${NUL}` },
        'secret',
      ],
      ['PATCH', `/v1/webhooks/${hook.id}`, { url: `http://127.0.0.1:9/${NUL}` }, 'url'],
      ['POST', `/v1/webhooks/${hook.id}/deliveries/d%00/redeliver`, undefined, 'delivery_id'],
      ['POST', `/v1/sessions/${s.id}/chat`, message(`m${NUL}`), 'messages.0.id'],
    ];
    for (const [method, path, json, field] of cases) {
      const p = expectProblem(await api.request(method, path, json !== undefined ? { json } : {}), 'validation', 400);
      expect(p.errors, `${method} ${path}`).toEqual(
        expect.arrayContaining([expect.objectContaining({ path: field, message: expect.stringContaining('U+0000') })]),
      );
    }
    // An import whose header has one: refused as a whole, naming the line.
    const exported = (await api.get(`/v1/sessions/${s.id}/export`)).text.replace(
      '"title":"fine"',
      '"title":"fi\\u0000ne"',
    );
    const refused = expectProblem(
      await api.request('POST', '/v1/sessions/import', {
        body: exported,
        headers: { 'content-type': 'application/x-ndjson' },
      }),
      'invalid_import',
      422,
    );
    expect(refused.problems[0]).toMatchObject({ line: 1, message: expect.stringContaining('U+0000') });
    // Nothing was created by the refused requests; the run still waits.
    expect((await api.get('/v1/sessions?limit=1000')).body.data.filter((x: Json) => x.title?.includes(NUL))).toEqual(
      [],
    );
    expect((await api.get('/v1/schedules')).body.data).toEqual([]);
    expect((await api.get(`/v1/runs/${run.id}`)).body.status).toBe('waiting_for_user');
    await api.post(`/v1/runs/${run.id}/cancel`);
  });

  it('in content (a message, metadata, an answer, arguments, a reason, a steer, a signal payload): stored and returned intact', async () => {
    const text = `before${NUL}after`;
    const s = await api.session({ metadata: { [`k${NUL}`]: `v${NUL}`, nested: { list: [NUL] } } });
    expect(s.metadata).toEqual({ [`k${NUL}`]: `v${NUL}`, nested: { list: [NUL] } });
    expect((await api.get(`/v1/sessions/${s.id}`)).body.metadata).toEqual(s.metadata);

    const sent = await api.send(s.id, text);
    await api.waitForRun(sent.run.id, 'completed');
    const transcript = (await api.get(`/v1/sessions/${s.id}/transcript`)).body.items.map((i: Json) => i.text);
    expect(transcript).toEqual(expect.arrayContaining([text, `echo: ${text}`]));

    // An answer, edited arguments and a denial's reason.
    const q = await api.send((await api.session()).id, 'ask');
    await api.waitForRun(q.run.id, 'waiting_for_user');
    expect((await api.post(`/v1/runs/${q.run.id}/input`, { answers: { color: `r${NUL}d` } })).status).toBe(200);
    await api.waitForRun(q.run.id, 'completed');
    const d = await api.send((await api.session()).id, 'danger2:a,b');
    const waiting = await api.waitForRun(d.run.id, 'waiting_approval');
    const [a, b] = waiting.waiting.requests;
    expect(
      (
        await api.post(`/v1/runs/${d.run.id}/approvals/${a.approval_id}`, {
          decision: 'approve',
          arguments: { target: `t${NUL}` },
        })
      ).status,
    ).toBe(200);
    expect(
      (await api.post(`/v1/runs/${d.run.id}/approvals/${b.approval_id}`, { decision: 'deny', reason: `no${NUL}` }))
        .status,
    ).toBe(200);
    await api.waitForRun(d.run.id, 'completed');
    expect(srv.dangerRuns).toContainEqual({ target: `t${NUL}` });

    // A steer and a signal payload (kept for a wait that never comes), to a running run.
    const blocked = await api.send((await api.session()).id, 'block:nul');
    await srv.gates.entered('nul');
    expect((await api.post(`/v1/runs/${blocked.run.id}/steer`, { content: `steer${NUL}` })).status).toBe(202);
    expect((await api.post(`/v1/runs/${blocked.run.id}/signals/later`, { payload: `p${NUL}` })).status).toBe(200);
    srv.gates.open('nul');
    await api.waitForRun(blocked.run.id, 'completed');

    const events = [
      ...(await api.allEvents(q.run.session_id)),
      ...(await api.allEvents(d.run.session_id)),
      ...(await api.allEvents(blocked.run.session_id)),
    ];
    const data = (type: string) => events.filter((e) => e.type === type).map((e) => e.data);
    expect(data('user/answer')).toContainEqual(expect.objectContaining({ answer: { color: `r${NUL}d` } }));
    expect(data('tool/decision')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ editedInput: { target: `t${NUL}` } }),
        expect.objectContaining({ reason: `no${NUL}` }),
      ]),
    );
    expect(data('user/message').map((m) => m.message.content[0].text)).toContain(`steer${NUL}`);
  });
});

describe.each(BACKENDS)('NUL through the library (%s)', (backend: Backend) => {
  let store: Store;
  let rt: Runtime;
  let cleanup: () => Promise<void>;
  const outputs = {
    text: `tool${NUL}text`,
    json: { [`key${NUL}`]: [`value${NUL}`, 1] },
  };
  afterEach(async () => {
    await rt?.close({ graceMs: 0 });
    await cleanup?.();
  });

  async function open(system?: string): Promise<void> {
    if (backend === 'postgres') {
      const pg = await openTestPostgres();
      store = pg.store;
      cleanup = pg.cleanup;
    } else {
      const dir = mkdtempSync(join(tmpdir(), 'keel-nul-'));
      const sqlite = openSqliteStore({ path: join(dir, 'keel.db') });
      store = sqlite;
      cleanup = async () => {
        await sqlite.close();
        rmSync(dir, { recursive: true, force: true });
      };
    }
    const produce = tool({
      name: 'produce',
      description: 'Returns NUL characters',
      input: z.object({ kind: z.enum(['text', 'json']) }),
      execute: ({ kind }) => outputs[kind],
    });
    const model = new ScriptedModel(
      [
        {
          toolCalls: [
            { name: 'produce', input: { kind: 'text' } },
            { name: 'produce', input: { kind: 'json' } },
          ],
        },
        { text: `the model says${NUL}this` },
      ],
      { modelId: 'nul-1' },
    );
    rt = createRuntime({
      store,
      agents: [defineAgent({ name: 'nul', model, tools: [produce], ...(system !== undefined ? { system } : {}) })],
    });
    rt.startWorker({ concurrency: 1 });
  }

  it('a tool result and a model answer with NUL, produced inside a run: the run completes and they read back intact', async () => {
    await open();
    const s = await rt.sessions.create();
    const sent = await rt.sessions.send(s.id, 'go');
    const done = await rt.runs.wait(sent.run.id, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    const events = await rt.sessions.events(s.id, { limit: 1000 });
    const results = events.filter((e) => e.type === 'tool/result').map((e) => (e.data as { output: unknown }).output);
    expect(results).toEqual([
      { type: 'text', value: outputs.text },
      { type: 'json', value: outputs.json },
    ]);
    const transcript = await rt.sessions.transcript(s.id);
    expect(transcript.map((i) => (i as { text?: string }).text)).toContain(`the model says${NUL}this`);
  });

  it('an agent whose prompt holds NUL: its runs run, and the usage report counts them', async () => {
    await open(`be brief${NUL}`);
    const s = await rt.sessions.create({ tenant: 'acme' });
    const sent = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(sent.run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
    const usage = await rt.runs.usage({ from: 0, to: Date.now() + 1000, groupBy: ['model'], tenant: 'acme' });
    expect(usage).toEqual([expect.objectContaining({ model: 'scripted:nul-1', runs: 1 })]);
    // Erasing keeps the model of its runs, for billing.
    await rt.sessions.erase(s.id);
    expect(await rt.runs.usage({ from: 0, to: Date.now() + 1000, groupBy: ['model'], tenant: 'acme' })).toEqual([
      expect.objectContaining({ model: 'scripted:nul-1', runs: 1 }),
    ]);
  });

  it('refuses it where a store keeps text (a validation error naming the field), and finds nothing by an id holding it', async () => {
    await open();
    const refused = async (p: Promise<unknown>, field: string) => {
      const e = await p.then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e, field).toBeInstanceOf(StoreError);
      expect((e as StoreError).code, field).toBe('validation');
      expect((e as Error).message, field).toMatch(new RegExp(`^${field.replace('.', '\\.')}: .*U\\+0000`));
    };
    await refused(rt.sessions.create({ title: `t${NUL}` }), 'title');
    await refused(rt.sessions.create({ id: `id${NUL}` }), 'id');
    await refused(rt.sessions.create({ tenant: `t${NUL}` }), 'tenant');
    const s = await rt.sessions.create({ title: 'fine' });
    await refused(rt.sessions.update(s.id, { title: `t${NUL}` }), 'title');
    await refused(
      rt.schedules.create({ name: `n${NUL}`, interval: { seconds: 60 }, message: 'hi', target: { sessionId: s.id } }),
      'name',
    );
    await refused(
      rt.schedules.create({ interval: { seconds: 60 }, message: 'hi', target: { newSession: { title: `t${NUL}` } } }),
      'target.new_session.title',
    );
    await refused(
      rt.webhooks.create('default', {
        url: 'http://127.0.0.1:9/',
        events: ['run.completed'],
        secret: `${'s'.repeat(20)}${NUL}`,
      }),
      'secret',
    );
    const sent = await rt.sessions.send(s.id, 'go');
    await refused(rt.runs.signal(sent.run.id, `s${NUL}`, null), 'name');
    // Nothing can have such an id: not found, on both backends.
    expect(await rt.sessions.find(`x${NUL}`)).toBeUndefined();
    expect(await rt.runs.find(`x${NUL}`)).toBeUndefined();
    expect(await rt.schedules.find(`x${NUL}`)).toBeUndefined();
    await expect(rt.sessions.get(`x${NUL}`)).rejects.toMatchObject({ code: 'not_found' });
    await expect(rt.webhooks.get('default', `x${NUL}`)).rejects.toMatchObject({ code: 'not_found' });
    expect(await rt.sessions.entries(s.id, [`x${NUL}`])).toEqual([]);
    expect((await rt.sessions.get(s.id)).title).toBe('fine');
  });
});
