/**
 * Operations endpoints through real HTTP: liveness, readiness, Prometheus metrics, and the
 * OpenAPI 3.1 description (checked structurally: every route, every templated parameter declared,
 * every $ref resolvable, problem responses documented).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type Api, type Json, type TestServer } from '../support/server-helpers.ts';

let srv: TestServer;
let api: Api;
beforeAll(async () => {
  srv = await startTestServer();
  api = srv.api();
});
afterAll(async () => {
  await srv?.close();
});

describe('probes', () => {
  it('/healthz and /readyz answer 200 JSON', async () => {
    const h = await api.get('/healthz');
    expect([h.status, h.headers.get('content-type'), h.body]).toEqual([
      200,
      expect.stringMatching(/^application\/json/),
      { status: 'ok' },
    ]);
    const r = await api.get('/readyz');
    expect([r.status, r.body]).toEqual([200, { status: 'ready' }]);
  });
});

describe('/metrics', () => {
  it('is Prometheus text with request counts, durations, runs, SSE and event counters', async () => {
    const s = await api.session();
    const { run } = await api.send(s.id, 'count me');
    await api.waitForRun(run.id, 'completed');
    await api.get('/v1/sessions/no-such-session');
    const waiting = await api.send((await api.session()).id, 'ask');
    await api.waitForRun(waiting.run.id, 'waiting_for_user');

    const r = await api.get('/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    // Blank lines separate metric families; every other line is a comment or a sample: name{labels} value.
    const lines = r.text
      .trimEnd()
      .split('\n')
      .filter((l) => l !== '');
    const name = '[a-zA-Z_:][a-zA-Z0-9_:]*';
    const label = '[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"';
    const sample = new RegExp(
      `^(# (HELP|TYPE) ${name} .*|${name}(\\{${label}(,${label})*\\})? (-?[0-9.e+-]+|NaN|[+-]Inf))$`,
    );
    for (const line of lines) expect(line).toMatch(sample);
    const value = (sample: string) => {
      const line = lines.find((l) => l.startsWith(`${sample} `));
      return line === undefined ? undefined : Number(line.slice(sample.length + 1));
    };
    expect(r.text).toContain('# TYPE keel_http_requests_total counter');
    expect(value('keel_http_requests_total{method="POST",route="/v1/sessions",status="201"}')).toBeGreaterThanOrEqual(
      2,
    );
    expect(
      value('keel_http_requests_total{method="POST",route="/v1/sessions/:id/messages",status="202"}'),
    ).toBeGreaterThanOrEqual(2);
    expect(value('keel_http_requests_total{method="GET",route="/v1/sessions/:id",status="404"}')).toBe(1);
    expect(value('keel_http_request_duration_seconds_count{method="GET",route="/v1/runs/:id"}')).toBeGreaterThanOrEqual(
      1,
    );
    expect(value('keel_http_request_duration_seconds_sum{method="GET",route="/v1/runs/:id"}')).toBeGreaterThan(0);
    expect(value('keel_runs{status="waiting_for_user"}')).toBe(1);
    expect(value('keel_runs{status="running"}')).toBe(0);
    expect(value('keel_runs_executing')).toBe(0);
    expect(value('keel_sse_connections')).toBe(0);
    expect(value('keel_events_committed_total')).toBeGreaterThan(10);
    expect(value('process_resident_memory_bytes')).toBeGreaterThan(0);

    // It counts itself on the next scrape.
    const next = (await api.get('/metrics')).text;
    expect(next).toContain('keel_http_requests_total{method="GET",route="/metrics",status="200"} 1');
    await api.post(`/v1/runs/${waiting.run.id}/cancel`);
  });
});

describe('/openapi.json', () => {
  let doc: Json;
  beforeAll(async () => {
    const r = await api.get('/openapi.json');
    expect(r.status).toBe(200);
    doc = r.body;
  });

  it('is OpenAPI 3.1 with info, the bearer scheme and (auth off) no global security', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: 'Keel API', version: '0.0.0-test', description: expect.any(String) });
    expect(doc.components.securitySchemes.bearer).toEqual({
      type: 'http',
      scheme: 'bearer',
      description: expect.any(String),
    });
    expect(doc.security).toEqual([]);
    for (const name of ['Session', 'Run', 'Event', 'Problem', 'Content'])
      expect(doc.components.schemas[name], name).toBeDefined();
  });

  it('describes every route, including the streams', () => {
    const expected: Array<[string, string]> = [
      ['post', '/v1/sessions'],
      ['get', '/v1/sessions'],
      ['get', '/v1/sessions/{id}'],
      ['delete', '/v1/sessions/{id}'],
      ['post', '/v1/sessions/{id}/messages'],
      ['get', '/v1/sessions/{id}/events'],
      ['get', '/v1/sessions/{id}/transcript'],
      ['get', '/v1/sessions/{id}/context'],
      ['get', '/v1/sessions/{id}/runs'],
      ['post', '/v1/sessions/{id}/fork'],
      ['post', '/v1/sessions/{id}/leaf'],
      ['post', '/v1/sessions/{id}/compact'],
      ['get', '/v1/sessions/{id}/export'],
      ['post', '/v1/sessions/import'],
      ['get', '/v1/sessions/{id}/stream'],
      ['get', '/v1/runs/{id}'],
      ['get', '/v1/runs/{id}/steps'],
      ['post', '/v1/runs/{id}/cancel'],
      ['post', '/v1/runs/{id}/pause'],
      ['post', '/v1/runs/{id}/resume'],
      ['post', '/v1/runs/{id}/steer'],
      ['post', '/v1/runs/{id}/input'],
      ['post', '/v1/runs/{id}/approvals/{approval_id}'],
      ['get', '/v1/runs/{id}/stream'],
    ];
    const missing = expected
      .filter(([method, path]) => !doc.paths[path]?.[method])
      .map(([m, p]) => `${m.toUpperCase()} ${p}`);
    expect(missing).toEqual([]);
    // No path uses Hono's `:param` syntax.
    expect(Object.keys(doc.paths).filter((p) => p.includes(':'))).toEqual([]);
    expect(
      doc.paths['/v1/sessions/{id}/messages'].post.responses['409'].content['application/problem+json'],
    ).toBeDefined();
    expect(doc.paths['/v1/sessions/import'].post.requestBody.content['application/x-ndjson']).toBeDefined();
    expect(doc.paths['/v1/runs/{id}/stream'].get.responses['200'].content['text/event-stream']).toBeDefined();
  });

  it('is structurally valid: templated parameters declared, responses present, $refs resolvable, operation bodies JSON schemas', () => {
    const problems: string[] = [];
    const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
    for (const [path, item] of Object.entries<Json>(doc.paths)) {
      if (!path.startsWith('/')) problems.push(`${path}: does not start with /`);
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const [method, op] of Object.entries<Json>(item)) {
        if (!methods.includes(method)) continue;
        const where = `${method.toUpperCase()} ${path}`;
        const params: Json[] = [...(item.parameters ?? []), ...(op.parameters ?? [])];
        for (const name of templated) {
          const p = params.find((x) => x.in === 'path' && x.name === name);
          if (!p) problems.push(`${where}: path parameter {${name}} is not declared`);
          else if (p.required !== true) problems.push(`${where}: path parameter {${name}} is not required`);
        }
        for (const p of params) {
          if (!['path', 'query', 'header', 'cookie'].includes(p.in))
            problems.push(`${where}: parameter ${p.name} in ${p.in}`);
          if (p.in === 'path' && !templated.includes(p.name))
            problems.push(`${where}: path parameter ${p.name} is not in the path`);
        }
        if (!op.responses || Object.keys(op.responses).length === 0) problems.push(`${where}: no responses`);
        for (const [code, res] of Object.entries<Json>(op.responses ?? {})) {
          if (!/^([1-5][0-9]{2}|[1-5]XX|default)$/.test(code)) problems.push(`${where}: response code ${code}`);
          if (typeof res.description !== 'string') problems.push(`${where} ${code}: no description`);
          if (Number(code) >= 400) {
            if (!res.content?.['application/problem+json'])
              problems.push(`${where} ${code}: errors are not problem+json`);
          }
        }
      }
    }
    // Every $ref points at something.
    const walk = (node: unknown, at: string) => {
      if (Array.isArray(node)) node.forEach((n, i) => walk(n, `${at}/${i}`));
      else if (node && typeof node === 'object') {
        for (const [k, v] of Object.entries(node)) {
          if (k === '$ref' && typeof v === 'string') {
            const target = v.startsWith('#/')
              ? v
                  .slice(2)
                  .split('/')
                  .reduce<Json>((o, part) => o?.[part], doc)
              : undefined;
            if (target === undefined) problems.push(`${at}: unresolved $ref ${v}`);
          } else walk(v, `${at}/${k}`);
        }
      }
    };
    walk(doc, '#');
    expect(problems).toEqual([]);
  });
});
