/**
 * The API refuses bad input precisely, whatever it is: random requests on every route the served
 * OpenAPI document lists (random and real ids, declared and unknown query parameters, random and
 * schema-shaped bodies, broken JSON, odd headers, other methods) never get a 5xx; every 4xx is
 * problem+json with its `type` and `status`; and the server stays healthy and usable.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBLEM, startTestServer, type Json, type TestServer } from '../support/server-helpers.ts';

interface Operation {
  method: string;
  path: string;
  params: Array<{ in: string; name: string }>;
  /** Property names of the JSON body's schema (empty for none or an open schema). */
  bodyKeys: string[] | undefined;
  ndjson: boolean;
}

let srv: TestServer;
let ops: Operation[];
/** Real ids, so that requests reach past "not found" into the handlers. */
const real: { session: string[]; run: string[]; approval: string[] } = { session: [], run: [], approval: [] };

beforeAll(async () => {
  srv = await startTestServer();
  const api = srv.api();
  const doc = (await api.get('/openapi.json')).body as { paths: Record<string, Record<string, Json>>; components?: { schemas?: Record<string, Json> } };
  const resolve = (schema: Json): Json => (schema?.$ref ? doc.components?.schemas?.[schema.$ref.split('/').at(-1)] : schema);
  ops = Object.entries(doc.paths).flatMap(([path, byMethod]) =>
    Object.entries(byMethod).map(([method, op]) => {
      const content = op.requestBody?.content ?? {};
      const schema = resolve(content['application/json']?.schema);
      return {
        method: method.toUpperCase(),
        path,
        params: (op.parameters ?? []).map((p: Json) => ({ in: p.in, name: p.name })),
        bodyKeys: content['application/json'] ? Object.keys(schema?.properties ?? {}) : undefined,
        ndjson: content['application/x-ndjson'] !== undefined,
      };
    }),
  );
  expect(ops.length).toBeGreaterThan(20);

  // A session with a finished run, and one with a run waiting for an approval.
  const done = (await api.post('/v1/sessions', { title: 'fuzz' })).body;
  const first = (await api.post(`/v1/sessions/${done.id}/messages`, { content: 'hello' })).body;
  await api.waitForRun(first.run.id, 'completed');
  const waiting = (await api.post('/v1/sessions', {})).body;
  const asked = (await api.post(`/v1/sessions/${waiting.id}/messages`, { content: 'danger:target' })).body;
  const run = await api.waitForRun(asked.run.id, 'waiting_approval');
  real.session.push(done.id, waiting.id);
  real.run.push(first.run.id, asked.run.id);
  real.approval.push(...(run.waiting?.requests ?? []).map((r: Json) => r.approval_id));
});

afterAll(async () => {
  await srv?.close();
});

const oddString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('', ' ', '..', '%00', '%ZZ', 'null', 'undefined', '-1', '0', '1e999', 'NaN', '[]', '{}', '\u0000', '😀', 'x'.repeat(300)),
);
const jsonish = fc.oneof(fc.jsonValue({ maxDepth: 4 }), oddString, fc.integer(), fc.double(), fc.boolean(), fc.constant(null));

function pathParam(name: string): fc.Arbitrary<string> {
  const ids = name === 'approval_id' ? real.approval : name === 'id' ? [...real.session, ...real.run] : [];
  return ids.length > 0 ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...ids) }, { weight: 1, arbitrary: oddString }) : oddString;
}

interface Request {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
}

function request(op: Operation): fc.Arbitrary<Request> {
  const pathParams = op.params.filter((p) => p.in === 'path');
  const queryParams = op.params.filter((p) => p.in === 'query');
  const body: fc.Arbitrary<string | undefined> = op.ndjson
    ? fc.oneof(fc.constant(undefined), oddString, fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 4 }).map((lines) => lines.map((l) => JSON.stringify(l)).join('\n')))
    : op.bodyKeys !== undefined
      ? fc.oneof(
          // Shaped like the schema: its property names with random values (and sometimes one more).
          fc.record(Object.fromEntries(op.bodyKeys.map((k) => [k, jsonish])), { requiredKeys: [] }).map((o) => JSON.stringify(o)),
          fc.dictionary(fc.string({ maxLength: 10 }), jsonish, { maxKeys: 4 }).map((o) => JSON.stringify(o)),
          jsonish.map((v) => JSON.stringify(v)),
          fc.constantFrom('{', '{"a":', 'not json', '[[[[[[[[', `${'['.repeat(500)}${']'.repeat(500)}`, ''),
          fc.constant(undefined),
        )
      : fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: jsonish.map((v) => JSON.stringify(v)) });
  return fc
    .record({
      method: fc.oneof({ weight: 9, arbitrary: fc.constant(op.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE') }),
      path: fc.tuple(...pathParams.map((p) => pathParam(p.name))).map((values) => pathParams.reduce((path, p, i) => path.replace(`{${p.name}}`, encodeURIComponent(values[i]!)), op.path)),
      query: fc.tuple(
        fc.subarray(queryParams.map((p) => p.name)).chain((names) => fc.tuple(...names.map((n) => oddString.map((v) => [n, v] as const)))),
        fc.oneof({ weight: 4, arbitrary: fc.constant([] as Array<readonly [string, string]>) }, { weight: 1, arbitrary: fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), oddString).map((kv) => [kv]) }),
      ),
      body,
      contentType: fc.oneof({ weight: 6, arbitrary: fc.constant(op.ndjson ? 'application/x-ndjson' : 'application/json') }, { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/xml', '') }),
      idempotencyKey: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.string({ maxLength: 300 }) }),
    })
    .map((r) => {
      const query = new URLSearchParams([...r.query[0], ...r.query[1]].map(([k, v]) => [k, v]));
      const qs = query.toString();
      const headers: Record<string, string> = {};
      if (r.body !== undefined && r.contentType !== '') headers['content-type'] = r.contentType;
      if (r.idempotencyKey !== undefined && /^[\x20-\x7e]*$/.test(r.idempotencyKey)) headers['idempotency-key'] = r.idempotencyKey;
      return { method: r.method, url: `${r.path}${qs ? `?${qs}` : ''}`, headers, body: r.method === 'GET' ? undefined : r.body };
    });
}

async function send(r: Request): Promise<{ status: number; type: string; body: string }> {
  const controller = new AbortController();
  const res = await fetch(`${srv.url}${r.url}`, { method: r.method, headers: r.headers, ...(r.body !== undefined ? { body: r.body } : {}), signal: controller.signal });
  const type = res.headers.get('content-type') ?? '';
  // A stream stays open: its answer is its status and type.
  if (/event-stream/.test(type)) {
    controller.abort();
    return { status: res.status, type, body: '' };
  }
  return { status: res.status, type, body: await res.text() };
}

describe('API fuzz (fast-check, driven by the OpenAPI document)', () => {
  it('never answers 5xx; every 4xx is problem+json with a type and the status; the server stays healthy', async () => {
    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ops).chain((op) => request(op)),
        async (r) => {
          const res = await send(r);
          seen.set(String(res.status), (seen.get(String(res.status)) ?? 0) + 1);
          expect(res.status, `${r.method} ${r.url} ${JSON.stringify(r.headers)} ${r.body?.slice(0, 200)} → ${res.status} ${res.body.slice(0, 300)}`).toBeLessThan(500);
          if (res.status >= 400) {
            expect(res.type, `${r.method} ${r.url}`).toMatch(/^application\/problem\+json/);
            const p = JSON.parse(res.body) as { type?: unknown; status?: unknown; title?: unknown };
            expect(String(p.type), `${r.method} ${r.url}`).toMatch(new RegExp(`^${PROBLEM}[a-z_]+$`));
            expect(p.status).toBe(res.status);
            expect(typeof p.title).toBe('string');
          }
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 1000) },
    );
    if (process.env.FUZZ_VERBOSE) console.log(Object.fromEntries(seen));
    // Refusals of many kinds were exercised, and so were successes.
    expect([...seen.keys()].filter((s) => s.startsWith('4')).length).toBeGreaterThanOrEqual(4);
    expect([...seen.keys()].some((s) => s.startsWith('2'))).toBe(true);

    // Still healthy, and still working.
    const api = srv.api();
    expect((await api.get('/healthz')).status).toBe(200);
    const s = (await api.post('/v1/sessions', {})).body;
    const sent = (await api.post(`/v1/sessions/${s.id}/messages`, { content: 'still there?' })).body;
    expect((await api.waitForRun(sent.run.id, 'completed')).status).toBe('completed');
  }, 120_000);
});
