/**
 * Every kind of problem the API answers, through real HTTP: validation, bad JSON, media types,
 * not found, body limits, idempotency keys, API keys (missing, unknown, revoked), tenant
 * isolation on every route, rate limits per key, and the refusal to bind a public address
 * without keys. Every problem is RFC 9457 problem+json with a stable type.
 */
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeyCache, createApiKey } from '../../src/server/auth.ts';
import { InsecureBindError } from '../../src/server/serve.ts';
import {
  Api,
  expectProblem,
  PROBLEM,
  startTestServer,
  type ApiResponse,
  type Json,
  type TestServer,
} from '../support/server-helpers.ts';

const ndjson = { 'content-type': 'application/x-ndjson' };

/** A body sent chunked (no content-length). */
function chunked(text: string): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream({
    start(c) {
      for (let i = 0; i < bytes.length; i += 1000) c.enqueue(bytes.slice(i, i + 1000));
      c.close();
    },
  });
}

async function postChunked(base: string, path: string, text: string, contentType: string): Promise<ApiResponse> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body: chunked(text),
    duplex: 'half',
  } as RequestInit);
  const body = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(body) : undefined,
    text: body,
  };
}

describe('problems (auth off)', () => {
  let srv: TestServer;
  let api: Api;
  beforeAll(async () => {
    srv = await startTestServer({ bodyLimitBytes: 2048, importLimitBytes: 4096 });
    api = srv.api();
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('validation: wrong types, unknown fields and bad queries are 400 validation with field errors', async () => {
    const wrongType = expectProblem(await api.post('/v1/sessions', { title: 5 }), 'validation', 400);
    expect(wrongType.errors).toEqual([{ path: 'title', message: expect.any(String) }]);
    expect(wrongType.detail).toContain('title');

    const unknown = expectProblem(await api.post('/v1/sessions', { title: 'x', owner: 'me' }), 'validation', 400);
    expect(unknown.detail).toContain('owner');
    expectProblem(await api.post('/v1/sessions', { metadata: 'not an object' }), 'validation', 400);
    expectProblem(await api.post('/v1/sessions', { title: 'x'.repeat(501) }), 'validation', 400);
    expectProblem(await api.post('/v1/sessions', [1, 2]), 'validation', 400);

    for (const q of ['limit=0', 'limit=1001', 'limit=ten', 'include_archived=yes']) {
      const p = expectProblem(await api.get(`/v1/sessions?${q}`), 'validation', 400);
      expect(p.errors.length).toBeGreaterThan(0);
    }
    // Nothing was created by the refused requests.
    expect((await api.get('/v1/sessions?limit=1000')).body.data).toEqual([]);
  });

  it('bad_json: a body that does not parse is 400 bad_json, not an internal error', async () => {
    for (const body of ['{', '{"title": }', 'not json', '']) {
      const r = await api.request('POST', '/v1/sessions', { body, headers: { 'content-type': 'application/json' } });
      expectProblem(r, 'bad_json', 400);
    }
    const s = await api.session();
    expectProblem(
      await api.request('POST', `/v1/sessions/${s.id}/messages`, {
        body: '{"content": "hi",',
        headers: { 'content-type': 'application/json' },
      }),
      'bad_json',
      400,
    );
  });

  it('unsupported_media_type: a body that is not application/json is 415 (also chunked, also without a type)', async () => {
    const p = expectProblem(
      await api.request('POST', '/v1/sessions', { body: '{}', headers: { 'content-type': 'text/plain' } }),
      'unsupported_media_type',
      415,
    );
    expect(p.detail).toContain('text/plain');
    expectProblem(
      await api.request('POST', '/v1/sessions', { body: new TextEncoder().encode('{}') }),
      'unsupported_media_type',
      415,
    );
    expectProblem(
      await api.request('POST', '/v1/sessions', {
        body: 'title=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      'unsupported_media_type',
      415,
    );
    expectProblem(await postChunked(srv.url, '/v1/sessions', '{}', 'text/plain'), 'unsupported_media_type', 415);
    // JSON with parameters is JSON; chunked JSON is JSON.
    expect(
      (
        await api.request('POST', '/v1/sessions', {
          body: '{}',
          headers: { 'content-type': 'application/json; charset=utf-8' },
        })
      ).status,
    ).toBe(201);
    expect((await postChunked(srv.url, '/v1/sessions', '{"title":"chunked"}', 'application/json')).status).toBe(201);
    // The import takes JSONL.
    expectProblem(
      await api.request('POST', '/v1/sessions/import', { body: '{"kind":"nope"}\n', headers: ndjson }),
      'invalid_import',
      422,
    );
  });

  it('not_found: unknown routes and unknown resources', async () => {
    for (const [method, path] of [
      ['GET', '/v1/nothing-here'],
      ['GET', '/nothing-here'],
      ['GET', '/v1/sessions/no-such-session'],
      ['DELETE', '/v1/sessions/no-such-session'],
      ['GET', '/v1/sessions/no-such-session/events'],
      ['GET', '/v1/sessions/no-such-session/export'],
      ['GET', '/v1/sessions/no-such-session/stream'],
      ['GET', '/v1/runs/no-such-run'],
      ['POST', '/v1/runs/no-such-run/cancel'],
      ['GET', '/v1/runs/no-such-run/stream'],
    ] as const) {
      const p = expectProblem(await api.request(method, path), 'not_found', 404);
      expect(p.instance).toBe(path);
    }
  });

  it('method_not_allowed: a known path with another method is 405 with the methods it takes', async () => {
    for (const [method, path, allow] of [
      ['PUT', '/v1/sessions', ['POST', 'GET']],
      ['PATCH', '/v1/sessions/any-id', ['GET', 'DELETE']],
      ['GET', '/v1/runs/any-run/cancel', ['POST']],
      ['DELETE', '/v1/runs/r/approvals/a', ['POST']],
    ] as const) {
      const res = await api.request(method, path);
      const p = expectProblem(res, 'method_not_allowed', 405);
      expect(p.allow, `${method} ${path}`).toEqual(allow);
      expect(res.headers.get('allow')).toBe(allow.join(', '));
    }
  });

  it('payload_too_large: bodies over bodyLimitBytes (and imports over importLimitBytes) are 413', async () => {
    const big = { title: 'big', metadata: { blob: 'x'.repeat(3000) } };
    const p = expectProblem(await api.post('/v1/sessions', big), 'payload_too_large', 413);
    expect(p.limit_bytes).toBe(2048);
    expectProblem(
      await postChunked(srv.url, '/v1/sessions', JSON.stringify(big), 'application/json'),
      'payload_too_large',
      413,
    );
    expect((await api.post('/v1/sessions', { title: 'small', metadata: { blob: 'x'.repeat(1500) } })).status).toBe(201);

    // An import has its own, larger limit.
    const under = await api.request('POST', '/v1/sessions/import', {
      body: `${'{"kind":"nope"}\n'.repeat(200)}`,
      headers: ndjson,
    });
    expectProblem(under, 'invalid_import', 422);
    const over = expectProblem(
      await api.request('POST', '/v1/sessions/import', { body: 'x'.repeat(5000), headers: ndjson }),
      'payload_too_large',
      413,
    );
    expect(over.limit_bytes).toBe(4096);
  });

  it('payload_too_large: the refused request closes its connection cleanly, so a keep-alive client goes on with a new one', async () => {
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    const send = (body: string) =>
      new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
        const req = httpRequest(
          `${srv.url}/v1/sessions`,
          {
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    try {
      const refused = await send(JSON.stringify({ metadata: { blob: 'x'.repeat(50_000) } }));
      expect(refused).toEqual({ status: 413, connection: 'close' });
      // The next request on the same client gets through.
      for (let i = 0; i < 3; i++) expect((await send(JSON.stringify({ title: `after ${i}` }))).status).toBe(201);
    } finally {
      agent.destroy();
    }
  });

  it('idempotency: the same key and body replay the first response and create nothing new', async () => {
    const key = { 'idempotency-key': 'create-once' };
    const first = await api.post('/v1/sessions', { title: 'idempotent' }, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const replay = await api.post('/v1/sessions', { title: 'idempotent' }, key);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('content-type')).toMatch(/^application\/json/);
    expect(replay.text).toBe(first.text);
    const titled = (await api.get('/v1/sessions?limit=1000')).body.data.filter((s: Json) => s.title === 'idempotent');
    expect(titled).toHaveLength(1);

    // A message: one run, however often it is retried.
    const s = await api.session();
    const send = () =>
      api.post(`/v1/sessions/${s.id}/messages`, { content: 'once' }, { 'idempotency-key': 'send-once' });
    const sent = await send();
    expect(sent.status).toBe(202);
    await api.waitForRun(sent.body.run.id, 'completed');
    const again = await send();
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.run.id).toBe(sent.body.run.id);
    expect((await api.get(`/v1/sessions/${s.id}/runs`)).body.data).toHaveLength(1);

    // A problem is replayed as the same problem.
    const refused = await api.post('/v1/sessions', { agent: 'nobody' }, { 'idempotency-key': 'refused' });
    expectProblem(refused, 'unknown_agent', 422);
    const refusedAgain = await api.post('/v1/sessions', { agent: 'nobody' }, { 'idempotency-key': 'refused' });
    expectProblem(refusedAgain, 'unknown_agent', 422);
    expect(refusedAgain.headers.get('idempotent-replayed')).toBe('true');
  });

  it("idempotency: a retry after the server failed between the effect and the key's record gets the same message and run, not a second one (nor 409)", async () => {
    const s = await api.session();
    const key = { 'idempotency-key': 'crash-between' };
    // The request's effect commits; recording the key fails (as a crash right after the effect would leave it).
    const put = srv.store.idempotency.put.bind(srv.store);
    let failing = true;
    srv.store.idempotency.put = (r) =>
      failing ? ((failing = false), Promise.reject(new Error('the process died here'))) : put(r);
    const first = await api.post(`/v1/sessions/${s.id}/messages`, { content: 'do it once', agent: 'helper' }, key);
    expect(first.status).toBe(500);
    const runs = (await api.get(`/v1/sessions/${s.id}/runs`)).body.data as Json[];
    expect(runs).toHaveLength(1);
    // The client never learned the run; it retries with the same key.
    const retry = await api.post(`/v1/sessions/${s.id}/messages`, { content: 'do it once', agent: 'helper' }, key);
    expect(retry.status).toBe(202);
    expect(retry.body.run.id).toBe(runs[0]!.id);
    expect(retry.body.message.id).toBe(runs[0]!.trigger_message_id);
    await api.waitForRun(runs[0]!.id, 'completed');
    // And once that run ended, still the same answer: no second message, no second run.
    const later = await api.post(`/v1/sessions/${s.id}/messages`, { content: 'do it once', agent: 'helper' }, key);
    expect([later.status, later.body.run.id, later.body.message.id]).toEqual([
      202,
      runs[0]!.id,
      runs[0]!.trigger_message_id,
    ]);
    expect((await api.get(`/v1/sessions/${s.id}/runs`)).body.data).toHaveLength(1);
    const users = (await api.allEvents(s.id)).filter((e) => e.type === 'user/message');
    expect(users).toHaveLength(1);
  });

  it("idempotency: a retry after the server failed between creating a session (create, fork, import) and the key's record gets that session, not a second one", async () => {
    const source = await api.session();
    const sent = (await api.post(`/v1/sessions/${source.id}/messages`, { content: 'hello', agent: 'helper' })).body;
    await api.waitForRun(sent.run.id, 'completed');
    const entry = (await api.allEvents(source.id)).find((e: Json) => e.type === 'assistant/message')!.id;
    // (A small one: this server takes small imports.)
    const exported = (await api.get(`/v1/sessions/${(await api.session()).id}/export`)).text;
    const cases: Array<{
      name: string;
      go: (key: Record<string, string>) => Promise<ApiResponse>;
      idOf: (r: ApiResponse) => string;
    }> = [
      { name: 'create', go: (key) => api.post('/v1/sessions', { title: 'once' }, key), idOf: (r) => r.body.id },
      {
        name: 'fork',
        go: (key) => api.post(`/v1/sessions/${source.id}/fork`, { entry_id: entry, into: 'session' }, key),
        idOf: (r) => r.body.session_id,
      },
      {
        name: 'import',
        go: (key) =>
          api.request('POST', '/v1/sessions/import', {
            body: exported,
            headers: { ...key, 'content-type': 'application/x-ndjson' },
          }),
        idOf: (r) => r.body.id,
      },
    ];
    for (const k of cases) {
      const key = { 'idempotency-key': `crash-${k.name}` };
      const before = (await api.get('/v1/sessions?limit=1000&include_archived=true')).body.data.length;
      const put = srv.store.idempotency.put.bind(srv.store);
      let failing = true;
      srv.store.idempotency.put = (r) =>
        failing ? ((failing = false), Promise.reject(new Error('the process died here'))) : put(r);
      const first = await k.go(key);
      srv.store.idempotency.put = put;
      expect(first.status, k.name).toBe(500);
      const created = (await api.get('/v1/sessions?limit=1000&include_archived=true')).body.data as Json[];
      expect(created.length, k.name).toBe(before + 1);
      // The client never learned which session; it retries with the same key, twice.
      for (let i = 0; i < 2; i++) {
        const retry = await k.go(key);
        expect(retry.status, k.name).toBe(201);
        expect(k.idOf(retry), k.name).toBe(created.at(-1)!.id);
      }
      expect((await api.get('/v1/sessions?limit=1000&include_archived=true')).body.data.length, k.name).toBe(
        before + 1,
      );
    }
  });

  it("idempotency: a retry after the server failed between a compaction and the key's record gets that compaction, not a second one", async () => {
    const s = await api.session();
    for (const text of ['one', 'two', 'three', 'four']) {
      const sent = (
        await api.post(`/v1/sessions/${s.id}/messages`, { content: `${text} ${'words '.repeat(200)}`, agent: 'helper' })
      ).body;
      await api.waitForRun(sent.run.id, 'completed');
    }
    const key = { 'idempotency-key': 'crash-compact' };
    const put = srv.store.idempotency.put.bind(srv.store);
    let failing = true;
    srv.store.idempotency.put = (r) =>
      failing ? ((failing = false), Promise.reject(new Error('the process died here'))) : put(r);
    const first = await api.post(`/v1/sessions/${s.id}/compact`, { keep_recent_tokens: 50 }, key);
    srv.store.idempotency.put = put;
    expect(first.status).toBe(500);
    const compactions = async () => (await api.allEvents(s.id)).filter((e: Json) => e.type === 'compaction');
    expect(await compactions()).toHaveLength(1);
    const retry = await api.post(`/v1/sessions/${s.id}/compact`, { keep_recent_tokens: 50 }, key);
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ compacted: true, event: { id: (await compactions())[0].id } });
    expect(await compactions()).toHaveLength(1);
  });

  it('idempotency: the same key with another body (or route) is 422 idempotency_mismatch; bad keys are refused', async () => {
    const key = { 'idempotency-key': 'mismatch' };
    expect((await api.post('/v1/sessions', { title: 'a' }, key)).status).toBe(201);
    const before = (await api.get('/v1/sessions?limit=1000')).body.data.length;
    const p = expectProblem(await api.post('/v1/sessions', { title: 'b' }, key), 'idempotency_mismatch', 422);
    expect(p.detail).toContain('mismatch');
    const s = await api.session();
    expectProblem(await api.post(`/v1/sessions/${s.id}/fork`, { title: 'a' }, key), 'idempotency_mismatch', 422);
    expect((await api.get('/v1/sessions?limit=1000')).body.data.length).toBe(before + 1);

    expectProblem(await api.post('/v1/sessions', {}, { 'idempotency-key': 'k'.repeat(256) }), 'validation', 400);
    // GETs ignore the header.
    expect((await api.get('/v1/sessions', { 'idempotency-key': 'mismatch' })).status).toBe(200);
  });

  it('idempotency: concurrent retries with one key create one thing (the others replay it or are told it is in progress)', async () => {
    const tries = await Promise.all(
      Array.from({ length: 6 }, () =>
        api.post('/v1/sessions', { title: 'concurrent' }, { 'idempotency-key': 'concurrent' }),
      ),
    );
    const created = tries.filter((r) => r.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(new Set(created.map((r) => r.body.id)).size).toBe(1);
    for (const r of tries.filter((x) => x.status !== 201)) expectProblem(r, 'idempotency_in_progress', 409);
    expect(
      (await api.get('/v1/sessions?limit=1000')).body.data.filter((s: Json) => s.title === 'concurrent'),
    ).toHaveLength(1);
    // Once it is done, a retry replays it.
    const later = await api.post('/v1/sessions', { title: 'concurrent' }, { 'idempotency-key': 'concurrent' });
    expect([later.status, later.headers.get('idempotent-replayed'), later.body.id]).toEqual([
      201,
      'true',
      created[0]!.body.id,
    ]);
  });

  it('every problem is application/problem+json with type, title, status, detail and instance; a type has one title', async () => {
    const s = await api.session();
    const cases: Array<[ApiResponse, string, number]> = [
      [await api.post('/v1/sessions', { nope: 1 }), 'validation', 400],
      [await api.get('/v1/sessions?limit=-5'), 'validation', 400],
      [
        await api.request('POST', '/v1/sessions', { body: '{', headers: { 'content-type': 'application/json' } }),
        'bad_json',
        400,
      ],
      [
        await api.request('POST', '/v1/sessions', { body: 'x', headers: { 'content-type': 'text/plain' } }),
        'unsupported_media_type',
        415,
      ],
      [await api.get('/v1/nope'), 'not_found', 404],
      [await api.get('/v1/runs/nope'), 'not_found', 404],
      [await api.post('/v1/sessions', { agent: 'nobody' }), 'unknown_agent', 422],
      [await api.post('/v1/sessions', { metadata: { x: 'y'.repeat(4000) } }), 'payload_too_large', 413],
      [await api.request('POST', '/v1/sessions/import', { body: 'junk\n', headers: ndjson }), 'invalid_import', 422],
      [await api.post(`/v1/sessions/${s.id}/leaf`, { entry_id: 'nope' }), 'validation', 400],
    ];
    const titles = new Map<string, string>();
    for (const [r, type, status] of cases) {
      const p = expectProblem(r, type, status);
      expect(p.type).toBe(`${PROBLEM}${type}`);
      expect(p.instance).toMatch(/^\/v1\//);
      if (titles.has(type)) expect(p.title).toBe(titles.get(type));
      titles.set(type, p.title);
    }
  });
});

describe('API keys and tenants (auth required)', () => {
  let srv: TestServer;
  let acme: Api;
  let globex: Api;
  beforeAll(async () => {
    srv = await startTestServer({
      keys: [
        { tenant: 'acme' },
        { tenant: 'acme', revoked: true },
        { tenant: 'globex' },
        { tenant: 'limited', ratePerMinute: 3 },
        { tenant: 'limited', ratePerMinute: 3 },
      ],
    });
    acme = srv.api(srv.secrets[0]);
    globex = srv.api(srv.secrets[2]);
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('unauthorized: a missing, malformed, unknown or revoked key is 401 on every /v1 route', async () => {
    expect(srv.server.auth).toBe('required');
    const anonymous = srv.api();
    for (const path of ['/v1/sessions', '/v1/sessions/x', '/v1/runs/x', '/v1/nope'])
      expectProblem(await anonymous.get(path), 'unauthorized', 401);
    expectProblem(await anonymous.post('/v1/sessions', {}), 'unauthorized', 401);
    expectProblem(
      await anonymous.get('/v1/sessions', { authorization: `Basic ${srv.secrets[0]}` }),
      'unauthorized',
      401,
    );
    const unknown = expectProblem(await srv.api('keel_not-a-real-key').get('/v1/sessions'), 'unauthorized', 401);
    expect(unknown.detail).toContain('unknown');
    const revoked = expectProblem(await srv.api(srv.secrets[1]).get('/v1/sessions'), 'unauthorized', 401);
    expect(revoked.detail).toContain('revoked');

    // The key in x-api-key, or a lower-case bearer, works too.
    expect((await anonymous.get('/v1/sessions', { 'x-api-key': srv.secrets[0]! })).status).toBe(200);
    expect((await anonymous.get('/v1/sessions', { authorization: `bearer ${srv.secrets[0]}` })).status).toBe(200);
    // Probes and the API description need no key; metrics do, once keys exist.
    for (const path of ['/healthz', '/readyz', '/openapi.json']) expect((await anonymous.get(path)).status).toBe(200);
    expectProblem(await anonymous.get('/metrics'), 'unauthorized', 401);
    expect((await srv.api(srv.secrets[0]).get('/metrics')).status).toBe(200);
    expect((await anonymous.get('/openapi.json')).body.security).toEqual([{ bearer: [] }]);
  });

  it('unauthorized: revoking a key that was in use takes effect within seconds', async () => {
    const { secret, key } = await createApiKey(srv.store, { tenant: 'acme', name: 'short-lived' });
    const client = srv.api(secret);
    expect((await client.get('/v1/sessions')).status).toBe(200);
    expect(await srv.store.keys.revoke(key.id, Date.now())).toBe(true);
    const refused = await client.until('the revocation', async () => {
      const r = await client.get('/v1/sessions');
      return r.status === 401 ? r : undefined;
    });
    expect(expectProblem(refused, 'unauthorized', 401).detail).toContain('revoked');
  });

  it('tenant isolation: another tenant’s session, run and approval ids answer 404 on every route', async () => {
    const s = await acme.session({ title: 'acme only' });
    const done = await acme.send(s.id, 'secret plans');
    await acme.waitForRun(done.run.id, 'completed');
    const waitingSession = await acme.session();
    const { run } = await acme.send(waitingSession.id, 'danger:iso');
    const waiting = await acme.waitForRun(run.id, 'waiting_approval');
    const approvalId = waiting.waiting.requests[0].approval_id;
    const entryId = (await acme.get(`/v1/sessions/${s.id}`)).body.leaf_id;
    const before = {
      s: (await acme.get(`/v1/sessions/${s.id}`)).body,
      w: (await acme.get(`/v1/sessions/${waitingSession.id}`)).body,
    };

    const routes: Array<[string, string, unknown?]> = [
      ['GET', `/v1/sessions/${s.id}`],
      ['DELETE', `/v1/sessions/${s.id}`],
      ['POST', `/v1/sessions/${s.id}/messages`, { content: 'hijack' }],
      ['POST', `/v1/sessions/${waitingSession.id}/messages`, { content: 'hijack', if_busy: 'interrupt' }],
      ['GET', `/v1/sessions/${s.id}/events`],
      ['GET', `/v1/sessions/${s.id}/transcript`],
      ['GET', `/v1/sessions/${s.id}/context`],
      ['GET', `/v1/sessions/${s.id}/runs`],
      ['POST', `/v1/sessions/${s.id}/fork`, { entry_id: entryId, into: 'session' }],
      ['POST', `/v1/sessions/${s.id}/leaf`, { entry_id: null }],
      ['POST', `/v1/sessions/${s.id}/compact`, { keep_recent_tokens: 1 }],
      ['GET', `/v1/sessions/${s.id}/export`],
      ['GET', `/v1/sessions/${s.id}/stream`],
      ['GET', `/v1/runs/${done.run.id}`],
      ['GET', `/v1/runs/${done.run.id}/steps`],
      ['GET', `/v1/runs/${done.run.id}/stream`],
      ['POST', `/v1/runs/${run.id}/cancel`],
      ['POST', `/v1/runs/${run.id}/pause`],
      ['POST', `/v1/runs/${run.id}/resume`],
      ['POST', `/v1/runs/${run.id}/steer`, { content: 'hijack' }],
      ['POST', `/v1/runs/${run.id}/input`, { answers: 'x' }],
      [
        'POST',
        `/v1/runs/${run.id}/approvals/${approvalId}`,
        { decision: 'approve', arguments: { target: 'hijacked' } },
      ],
    ];
    for (const [method, path, json] of routes) {
      const r = await globex.request(method, path, json !== undefined ? { json } : {});
      const p = expectProblem(r, 'not_found', 404);
      expect(p.detail, `${method} ${path}`).not.toContain('acme');
    }

    // Nothing changed for acme; its own requests work.
    expect((await acme.get(`/v1/sessions/${s.id}`)).body).toEqual(before.s);
    expect((await acme.get(`/v1/sessions/${waitingSession.id}`)).body).toEqual(before.w);
    expect((await acme.get(`/v1/runs/${run.id}`)).body.status).toBe('waiting_approval');
    expect(srv.dangerRuns).not.toContainEqual({ target: 'hijacked' });
    for (const path of [`/v1/sessions/${s.id}/events`, `/v1/sessions/${s.id}/export`, `/v1/runs/${done.run.id}/steps`])
      expect((await acme.get(path)).status).toBe(200);
    const stream = await fetch(`${srv.url}/v1/runs/${done.run.id}/stream`, {
      headers: { authorization: `Bearer ${srv.secrets[0]}` },
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(await stream.text()).toContain('event: end');
    const live = new AbortController();
    const sessionStream = await fetch(`${srv.url}/v1/sessions/${s.id}/stream`, {
      headers: { authorization: `Bearer ${srv.secrets[0]}` },
      signal: live.signal,
    });
    expect(sessionStream.status).toBe(200);
    live.abort();
    await sessionStream.body?.cancel().catch(() => {});

    // Listings show only the caller's sessions.
    const mine = (await acme.get('/v1/sessions?limit=1000')).body.data.map((x: Json) => x.id);
    expect(mine).toEqual(expect.arrayContaining([s.id, waitingSession.id]));
    const own = await globex.session({ title: 'globex only' });
    const theirs = (await globex.get('/v1/sessions?limit=1000&include_archived=true')).body.data.map((x: Json) => x.id);
    expect(theirs).toEqual([own.id]);
    expect((await acme.get('/v1/sessions?limit=1000')).body.data.map((x: Json) => x.id)).not.toContain(own.id);

    // A fork into a session stays with its tenant.
    const fork = await acme.post(`/v1/sessions/${s.id}/fork`, { entry_id: entryId, into: 'session' });
    expect(fork.status).toBe(201);
    expectProblem(await globex.get(`/v1/sessions/${fork.body.session_id}`), 'not_found', 404);
    expect((await acme.get(`/v1/sessions/${fork.body.session_id}`)).status).toBe(200);

    // An import belongs to the importing tenant.
    const exported = (await acme.get(`/v1/sessions/${s.id}/export`)).text;
    const otherServer = await startTestServer({ keys: [{ tenant: 'initech' }] });
    try {
      const initech = otherServer.api(otherServer.secrets[0]);
      expect(
        (await initech.request('POST', '/v1/sessions/import?ids=keep', { body: exported, headers: ndjson })).status,
      ).toBe(201);
      expect((await initech.get(`/v1/sessions/${s.id}/transcript`)).status).toBe(200);
    } finally {
      await otherServer.close();
    }

    // Idempotency keys are per tenant.
    const a = await acme.post('/v1/sessions', { title: 'same key' }, { 'idempotency-key': 'shared' });
    const g = await globex.post('/v1/sessions', { title: 'same key' }, { 'idempotency-key': 'shared' });
    expect([a.status, g.status]).toEqual([201, 201]);
    expect(g.headers.get('idempotent-replayed')).toBeNull();
    expect(g.body.id).not.toBe(a.body.id);

    await acme.post(`/v1/runs/${run.id}/cancel`);
  });

  it('rate_limited: a key over its requests a minute gets 429 with retry-after; other keys are not affected', async () => {
    const first = srv.api(srv.secrets[3]);
    const second = srv.api(srv.secrets[4]);
    for (let i = 0; i < 3; i++) expect((await first.get('/v1/sessions')).status).toBe(200);
    const limited = await first.get('/v1/sessions');
    const p = expectProblem(limited, 'rate_limited', 429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
    expect(p.retry_after).toBe(retryAfter);
    expectProblem(await first.post('/v1/sessions', {}), 'rate_limited', 429);
    // Per key: the tenant's other key and other tenants still get through; probes are not limited.
    expect((await second.get('/v1/sessions')).status).toBe(200);
    expect((await acme.get('/v1/sessions')).status).toBe(200);
    expect((await first.get('/healthz')).status).toBe(200);
  });
});

describe('default rate limit (auth off)', () => {
  it('rateLimitPerMinute applies to anonymous callers', async () => {
    const srv = await startTestServer({ rateLimitPerMinute: 2 });
    try {
      const api = srv.api();
      expect((await api.get('/v1/sessions')).status).toBe(200);
      expect((await api.get('/v1/sessions')).status).toBe(200);
      const r = await api.get('/v1/sessions');
      expectProblem(r, 'rate_limited', 429);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    } finally {
      await srv.close();
    }
  });
});

describe('binding', () => {
  it('refuses a non-loopback host without API keys (InsecureBindError) unless insecure: true', async () => {
    await expect(startTestServer({ host: '0.0.0.0' })).rejects.toBeInstanceOf(InsecureBindError);

    const open = await startTestServer({ host: '0.0.0.0', insecure: true });
    try {
      expect(open.server.auth).toBe('off');
      const r = await new Api(`http://127.0.0.1:${open.server.port}`).post('/v1/sessions', {});
      expect(r.status).toBe(201);
    } finally {
      await open.close();
    }

    const keyed = await startTestServer({ host: '0.0.0.0', keys: [{ tenant: 'acme' }] });
    try {
      expect(keyed.server.auth).toBe('required');
      const base = `http://127.0.0.1:${keyed.server.port}`;
      expectProblem(await new Api(base).get('/v1/sessions'), 'unauthorized', 401);
      expect((await new Api(base, keyed.secrets[0]).get('/v1/sessions')).status).toBe(200);
    } finally {
      await keyed.close();
    }

    // Only revoked keys is no keys.
    await expect(
      startTestServer({ host: '0.0.0.0', keys: [{ tenant: 'acme', revoked: true }] }),
    ).rejects.toBeInstanceOf(InsecureBindError);
  });
});

describe('deep JSON (default body limit)', () => {
  let srv: TestServer;
  let api: Api;
  beforeAll(async () => {
    srv = await startTestServer();
    api = srv.api();
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('validation: JSON nested deeper than 64 levels (5,000 here) is 400 validation, not a stack overflow, and the server stays well', async () => {
    const s = await api.session();
    const deep = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;
    for (const [path, body] of [
      [`/v1/sessions/${s.id}/messages`, `{"content": ${deep(5000)}}`],
      ['/v1/sessions', `{"metadata": {"x": ${deep(5000)}}}`],
      [`/v1/sessions/${s.id}/messages`, `{"content": "hi", "x": ${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`],
    ] as const) {
      const p = expectProblem(
        await api.request('POST', path, { body, headers: { 'content-type': 'application/json' } }),
        'validation',
        400,
      );
      expect(p.detail).toContain('64');
    }
    // Brackets inside strings are text, not nesting.
    expect(
      (await api.post('/v1/sessions', { title: '['.repeat(100), metadata: { note: '{'.repeat(100) } })).status,
    ).toBe(201);
    // 64 levels of metadata are fine.
    expect((await api.post('/v1/sessions', { metadata: { x: JSON.parse(deep(60)) } })).status).toBe(201);
    expect((await api.get('/healthz')).status).toBe(200);
  });

  it('validation: the documented limits on keys, string lengths and array sizes (docs/api.md), each naming its field', async () => {
    const s = await api.session();
    const many = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));
    const cases: Array<[string, unknown, string]> = [
      ['/v1/sessions', { metadata: many(65) }, 'metadata'],
      ['/v1/sessions', { metadata: { ['k'.repeat(201)]: 1 } }, 'metadata'],
      ['/v1/sessions', { metadata: { big: 'x'.repeat(20_000) } }, 'metadata'],
      ['/v1/sessions', { title: 't'.repeat(501) }, 'title'],
      ['/v1/sessions', { agent: 'a'.repeat(201) }, 'agent'],
      [
        `/v1/sessions/${s.id}/messages`,
        { content: Array.from({ length: 101 }, () => ({ type: 'text', text: 'x' })) },
        'content',
      ],
      [`/v1/sessions/${s.id}/fork`, { entry_id: 'e'.repeat(201), into: 'branch' }, 'entry_id'],
      [`/v1/sessions/${s.id}/leaf`, { entry_id: '' }, 'entry_id'],
    ];
    for (const [path, body, field] of cases) {
      const p = expectProblem(await api.post(path, body), 'validation', 400);
      expect(p.detail, `${path} ${field}`).toContain(field);
    }
    // At the limits, accepted.
    expect((await api.post('/v1/sessions', { title: 't'.repeat(500), metadata: many(64) })).status).toBe(201);
  });
});

describe('operating the server safely', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ keys: [{ tenant: 'acme' }], metricsToken: 'scrape-me' });
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('/metrics asks for its own token when one is set (an API key is not it), and counts runs by status from the store', async () => {
    const acme = srv.api(srv.secrets[0]);
    const s = (await acme.post('/v1/sessions', {})).body;
    const sent = (await acme.post(`/v1/sessions/${s.id}/messages`, { content: 'hello' })).body;
    await acme.waitForRun(sent.run.id, 'completed');
    expectProblem(await acme.get('/metrics'), 'unauthorized', 401);
    const r = await srv.api('scrape-me').get('/metrics');
    expect(r.status).toBe(200);
    const text = String(r.text ?? r.body);
    expect(text).toMatch(/keel_runs\{status="completed"\} 1\b/);
    expect(text).toMatch(/keel_runs\{status="queued"\} 0\b/);
  });

  it('a client address that fails authentication too often is refused for the rest of the minute, before its key is looked up', async () => {
    const own = await startTestServer({
      keys: [{ tenant: 'acme' }],
      metricsToken: 'scrape-me',
      authFailuresPerMinute: 5,
    });
    try {
      const bad = own.api('keel_wrong-key');
      for (let i = 0; i < 5; i++) expectProblem(await bad.get('/v1/sessions'), 'unauthorized', 401);
      const limited = await bad.get('/v1/sessions');
      expectProblem(limited, 'rate_limited', 429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
      // The same address with a good key waits too: the address is what is limited.
      expectProblem(await own.api(own.secrets[0]).get('/v1/sessions'), 'rate_limited', 429);
      expectProblem(await own.api('wrong-token').get('/metrics'), 'rate_limited', 429);
    } finally {
      await own.close();
    }
  });

  it('an Idempotency-Key is forgotten after its TTL: the record is pruned and the key can be used again', async () => {
    const fresh = await startTestServer({ idempotencyTtlMs: 200 });
    try {
      const api = fresh.api();
      const first = await api.post('/v1/sessions', { title: 'one' }, { 'idempotency-key': 'k' });
      expect(first.status).toBe(201);
      expect((await api.post('/v1/sessions', { title: 'one' }, { 'idempotency-key': 'k' })).body.id).toBe(
        first.body.id,
      );
      expectProblem(
        await api.post('/v1/sessions', { title: 'two' }, { 'idempotency-key': 'k' }),
        'idempotency_mismatch',
        422,
      );
      await new Promise((r) => setTimeout(r, 300));
      const again = await api.post('/v1/sessions', { title: 'two' }, { 'idempotency-key': 'k' });
      expect(again.status).toBe(201);
      expect(again.body.id).not.toBe(first.body.id);
      expect(await fresh.store.idempotency.get('default', 'k')).toMatchObject({
        fingerprint: expect.any(String),
        status: 201,
      });
    } finally {
      await fresh.close();
    }
  });
});

describe('ApiKeyCache', () => {
  it('keeps at most `max` keys, dropping the least recently used, and asks the store again after the TTL', async () => {
    const lookups: string[] = [];
    const cache = new ApiKeyCache(
      {
        keys: {
          find: async (hash: string) => {
            lookups.push(hash);
            return undefined;
          },
        },
      },
      { max: 3, ttlMs: 50 },
    );
    for (const s of ['a', 'b', 'c', 'a', 'd', 'e']) await cache.find(s);
    expect(cache.size).toBe(3);
    expect(lookups).toHaveLength(5);
    // 'a' was used again before 'd' and 'e' came: 'b' and 'c' went first, so 'a' is still there.
    await cache.find('a');
    expect(lookups).toHaveLength(5);
    await new Promise((r) => setTimeout(r, 60));
    await cache.find('a');
    expect(lookups).toHaveLength(6);
    for (let i = 0; i < 1000; i++) await cache.find(`random-${i}`);
    expect(cache.size).toBe(3);
  });
});
