/**
 * Tenant isolation on every route, driven by the served OpenAPI document: tenant acme's resources
 * (sessions, a completed run, runs waiting for an approval and a question, a delivered signal, a
 * schedule, a webhook and one of its deliveries), and tenant globex (another API key) trying each
 * operation of the document on them. Every one with a path parameter answers 404 and changes
 * nothing; every one without (lists, creations, usage, the inbox, erasure) shows globex only its
 * own, and never one of acme's ids or its data. A route the tables below do not cover (a new path
 * parameter, a new operation without one) fails the test: isolation is decided for it, or it is
 * not merged. On SQLite and PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentHash } from '../../src/index.ts';
import { exampleOf, fillPath, loadOperations, type OpenApiDoc, type Operation } from '../support/openapi.ts';
import {
  BACKENDS,
  expectProblem,
  startTestServer,
  type Api,
  type ApiResponse,
  type Json,
  type TestServer,
} from '../support/server-helpers.ts';

/** Text only acme's data holds: globex must never read it. */
const MARKER = 'acme-only-marker';

interface Acme {
  session: string;
  entry: string;
  doneRun: string;
  approvalSession: string;
  approvalRun: string;
  approval: string;
  questionSession: string;
  questionRun: string;
  question: string;
  schedule: string;
  webhook: string;
  delivery: string;
  dataset: string;
  experiment: string;
  experimentItem: string;
  rerunBatch: string;
  /** A large message text of acme's, stored apart by hash (ADR-0040). */
  blob: string;
}

/** A request whose answer may be a stream: a stream is not read (its status and type are the answer). */
async function send(
  api: Api,
  method: string,
  path: string,
  json?: unknown,
  type = 'application/json',
): Promise<ApiResponse> {
  const controller = new AbortController();
  const headers: Record<string, string> = { ...(api.secret ? { authorization: `Bearer ${api.secret}` } : {}) };
  let body: string | undefined;
  if (json !== undefined) {
    body = typeof json === 'string' ? json : JSON.stringify(json);
    headers['content-type'] = type;
  }
  const res = await fetch(`${api.base}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
    signal: controller.signal,
  });
  const contentType = res.headers.get('content-type') ?? '';
  if (/event-stream/.test(contentType)) {
    controller.abort();
    return { status: res.status, headers: res.headers, body: undefined, text: '' };
  }
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: /json/.test(contentType) && text !== '' ? JSON.parse(text) : undefined,
    text,
  };
}

describe.each(BACKENDS)('tenant isolation on every route of the OpenAPI document (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let globex: Api;
  let doc: OpenApiDoc;
  let ops: Operation[];
  const a = {} as Acme;
  /** Every id of acme's, and its marker. */
  let acmeTexts: string[];

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    globex = srv.api(srv.secrets[1]);
    ({ doc, ops } = await loadOperations(acme));

    // A webhook first, so that the completed run makes a delivery.
    a.webhook = (
      await acme.post('/v1/webhooks', { url: `http://127.0.0.1:9/${MARKER}`, events: ['run.completed'] })
    ).body.id;
    const s = await acme.session({ title: MARKER, metadata: { note: MARKER } });
    a.session = s.id;
    const done = await acme.send(s.id, `hello ${MARKER}`);
    a.doneRun = done.run.id;
    await acme.waitForRun(a.doneRun, 'completed');
    a.entry = (await acme.get(`/v1/sessions/${s.id}`)).body.leaf_id;

    // A message large enough to be stored apart: its blob is acme's alone.
    const large = `${MARKER} ${'large text '.repeat(30_000)}`;
    await acme.waitForRun((await acme.send(s.id, large)).run.id, 'completed');
    a.blob = contentHash(large);

    const approval = await acme.session({ title: MARKER });
    a.approvalSession = approval.id;
    a.approvalRun = (await acme.send(approval.id, `danger:${MARKER}`)).run.id;
    a.approval = (await acme.waitForRun(a.approvalRun, 'waiting_approval')).waiting.requests[0].approval_id;
    // A signal delivered to it (kept for a wait): another tenant's delivery of the same name would be a 409 if it got through.
    expect((await acme.post(`/v1/runs/${a.approvalRun}/signals/go`, { note: MARKER })).status).toBe(200);

    const question = await acme.session({ title: MARKER });
    a.questionSession = question.id;
    a.questionRun = (await acme.send(question.id, 'ask')).run.id;
    a.question = (await acme.waitForRun(a.questionRun, 'waiting_for_user')).waiting.requests[0].tool_call_id;

    const schedule = await acme.post('/v1/schedules', {
      name: MARKER,
      interval: { seconds: 3600 },
      message: MARKER,
      target: { session_id: a.session },
    });
    expect(schedule.status, schedule.text).toBe(201);
    a.schedule = schedule.body.id;
    a.delivery = await acme.until(
      'a delivery of the completed run',
      async () => (await acme.get(`/v1/webhooks/${a.webhook}/deliveries`)).body.data[0]?.id as string | undefined,
    );

    const dataset = await acme.post('/v1/datasets', { name: MARKER, runs: [a.doneRun] });
    expect(dataset.status, dataset.text).toBe(201);
    a.dataset = dataset.body.id;
    const experiment = await acme.post('/v1/experiments', { dataset: a.dataset, candidates: ['helper@1'] });
    expect(experiment.status, experiment.text).toBe(201);
    a.experiment = experiment.body.id;
    a.experimentItem = (await acme.get(`/v1/experiments/${a.experiment}/items`)).body.data[0].id;
    const bulk = await acme.post('/v1/reruns', { filter: { agent: 'helper', status: ['completed'] } });
    expect(bulk.status, bulk.text).toBe(201);
    a.rerunBatch = bulk.body.id;
    // Both finish before the checks: their reruns add sessions and deliveries of acme's.
    for (const path of [`/v1/experiments/${a.experiment}`, `/v1/reruns/${a.rerunBatch}`])
      await acme.until(path, async () => ((await acme.get(path)).body.status !== 'running' ? true : undefined));

    acmeTexts = [...new Set(Object.values(a)), MARKER];
    // globex has a session with a completed run of its own.
    const own = await globex.session({ title: 'globex own' });
    await globex.waitForRun((await globex.send(own.id, 'hi')).run.id, 'completed');
  }, 60_000);

  afterAll(async () => {
    await srv?.close();
  });

  /** What of acme's a response to globex holds, beyond the ids globex itself sent in `sent`. */
  const leaked = (r: ApiResponse, sent = ''): string[] =>
    acmeTexts.filter((t) => !sent.includes(t) && r.text.includes(t));

  /** Which of acme's resources fills each path parameter of the document. A name not here is a route nobody decided about: the test fails. */
  const PATH_PARAMS: Record<string, (op: Operation) => string> = {
    id: (op) => {
      if (op.path.startsWith('/v1/sessions/'))
        return op.path.includes('/chat') || op.path.endsWith('/messages') ? a.approvalSession : a.session;
      if (op.path.startsWith('/v1/runs/')) return op.path.endsWith('/input') ? a.questionRun : a.approvalRun;
      if (op.path.startsWith('/v1/schedules/')) return a.schedule;
      if (op.path.startsWith('/v1/webhooks/')) return a.webhook;
      if (op.path.startsWith('/v1/webhook-deliveries/')) return a.delivery;
      if (op.path.startsWith('/v1/datasets/')) return a.dataset;
      if (op.path.startsWith('/v1/experiments/')) return a.experiment;
      if (op.path.startsWith('/v1/reruns/')) return a.rerunBatch;
      // The tenants registry (admin scope): acme itself.
      if (op.path.startsWith('/v1/tenants/')) return 'acme';
      throw new Error(`{id} of ${op.path}: which resource is it? Add it here`);
    },
    // The two runs compared (GET /v1/runs/{a}/compare/{b}).
    a: () => a.doneRun,
    b: () => a.approvalRun,
    approval_id: () => a.approval,
    item_id: () => a.experimentItem,
    delivery_id: () => a.delivery,
    // An API key of acme's (the tenants registry's routes, admin scope).
    key_id: () => srv.keyIds[0]!,
    // The signal acme delivered: a delivery that got through would be a 409 already_delivered.
    name: () => 'go',
    chat_id: () => a.session,
    // A callback URL's token is its only credential (no API key, no tenant): one it was never given is a 404 for anyone.
    token: () => 'x'.repeat(43),
    hash: () => a.blob,
  };

  /** The 404 a route answers for another tenant's resource: `not_found`, or its own kind of not found. */
  const NOT_FOUND: Record<string, string> = { 'GET /v1/blobs/{hash}': 'blob_not_found' };

  /** Bodies worth more than the schema's minimal example (one that reaches past the first checks to the tenant's). */
  const BODIES: Record<string, unknown> = {
    'POST /v1/sessions/{id}/fork': { entry_id: 'ENTRY', into: 'session' },
    'POST /v1/sessions/{id}/leaf': { entry_id: 'ENTRY' },
    'POST /v1/sessions/{id}/messages': { content: 'hijack', if_busy: 'interrupt' },
    'POST /v1/sessions/{id}/chat': {
      messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hijack' }] }],
    },
    'POST /v1/runs/{id}/approvals/{approval_id}': { decision: 'approve', arguments: { target: 'hijacked' } },
    'POST /v1/runs/{id}/input': { answers: { color: 'hijacked' }, tool_call_id: 'QUESTION' },
    'PATCH /v1/webhooks/{id}': { url: 'http://127.0.0.1:9/hijacked', active: false },
  };

  it("every operation with a path parameter answers globex 404 for acme's resource, and changes nothing", async () => {
    const before = await acmeState();
    const covered = ops.filter((op) => op.pathParams.length > 0);
    expect(covered.length).toBeGreaterThan(30);
    for (const op of covered) {
      const values = Object.fromEntries(
        op.pathParams.map((name) => {
          const fill = PATH_PARAMS[name];
          if (!fill)
            throw new Error(
              `${op.method} ${op.path}: path parameter {${name}} has no entry in PATH_PARAMS: decide which of a tenant's resources it names`,
            );
          return [name, fill(op)];
        }),
      );
      const path = fillPath(op.path, values);
      const key = `${op.method} ${op.path}`;
      const given = BODIES[key] ?? (op.body?.type === 'application/json' ? exampleOf(doc, op.body.schema) : undefined);
      const json =
        given === undefined
          ? undefined
          : JSON.parse(
              JSON.stringify(given)
                .replace('"ENTRY"', JSON.stringify(a.entry))
                .replace('"QUESTION"', JSON.stringify(a.question)),
            );
      const r = await send(globex, op.method, path, json);
      // The tenants registry takes admin keys only: a tenant key is refused before anything is looked up.
      const p = op.path.startsWith('/v1/tenants/')
        ? expectProblem(r, 'forbidden_scope', 403)
        : expectProblem(r, NOT_FOUND[key] ?? 'not_found', 404);
      expect(leaked(r, path), `${key}: ${p.detail}`).toEqual([]);
      // (A tenants route's path names acme itself: its problem's `instance` says it back.)
      if (!op.path.startsWith('/v1/tenants/')) expect(r.text, key).not.toContain('acme');
    }
    // Nothing of acme's moved: not a run, not an event, not a schedule, not a webhook.
    expect(await acmeState()).toEqual(before);
    expect(srv.dangerRuns).not.toContainEqual({ target: 'hijacked' });
  });

  /** Each operation without a path parameter, and what globex gets from it. A new one not listed here fails the test. */
  const TENANT_WIDE: Array<[string, () => Promise<void>]> = [
    [
      'GET /v1/sessions',
      async () => expect(leaked(ok(await globex.get('/v1/sessions?limit=1000&include_archived=true')))).toEqual([]),
    ],
    [
      'GET /v1/session-summaries',
      async () => {
        expect(leaked(ok(await globex.get('/v1/session-summaries?limit=200&include_archived=true')))).toEqual([]);
        expect(ok(await globex.get(`/v1/session-summaries?q=${MARKER}`)).body.data).toEqual([]);
      },
    ],
    ['GET /v1/retention/policy', async () => expect(leaked(ok(await globex.get('/v1/retention/policy')))).toEqual([])],
    [
      'PUT /v1/retention/policy',
      async () => {
        const r = ok(await globex.request('PUT', '/v1/retention/policy', { json: { archive_after_days: null } }));
        expect(r.body.tenant).toBe('globex');
        expect((await acme.get('/v1/retention/policy')).body.policy).toBeNull();
      },
    ],
    [
      'DELETE /v1/retention/policy',
      async () => {
        expect((await globex.request('DELETE', '/v1/retention/policy')).status).toBe(204);
        expectProblem(await globex.request('DELETE', '/v1/retention/policy'), 'not_found', 404);
      },
    ],
    ['GET /v1/retention/status', async () => expect(leaked(ok(await globex.get('/v1/retention/status')))).toEqual([])],
    [
      'POST /v1/retention/run',
      async () => {
        expect(leaked(ok(await globex.post('/v1/retention/run', { dry_run: true })))).toEqual([]);
        expect(leaked(ok(await globex.post('/v1/retention/run', {})))).toEqual([]);
      },
    ],
    ['GET /v1/inbox', async () => expect(leaked(ok(await globex.get('/v1/inbox?limit=1000')))).toEqual([])],
    ['GET /v1/tenants', async () => expectProblem(await globex.get('/v1/tenants'), 'forbidden_scope', 403)],
    ['GET /v1/datasets', async () => expect(leaked(ok(await globex.get('/v1/datasets?limit=1000')))).toEqual([])],
    [
      'POST /v1/datasets',
      async () => {
        const r = await globex.post('/v1/datasets', { name: 'hijack', runs: [a.doneRun] });
        expect(leaked({ ...r, text: r.text } as ApiResponse, a.doneRun)).toEqual([]);
        expectProblem(r, 'not_found', 404);
      },
    ],
    ['GET /v1/experiments', async () => expect(leaked(ok(await globex.get('/v1/experiments?limit=1000')))).toEqual([])],
    [
      'POST /v1/experiments',
      async () => {
        const r = await globex.post('/v1/experiments', { dataset: a.dataset, candidates: ['helper@1'] });
        expect(leaked(r, a.dataset)).toEqual([]);
        expectProblem(r, 'not_found', 404);
      },
    ],
    [
      'GET /v1/runs',
      async () => {
        expect(leaked(ok(await globex.get('/v1/runs?limit=1000')))).toEqual([]);
        expect(ok(await globex.get(`/v1/runs?rerun_of=${a.doneRun}`)).body.data).toEqual([]);
      },
    ],
    [
      'GET /v1/usage',
      async () => {
        const usage = ok(await globex.get('/v1/usage?group_by=tenant,agent'));
        expect(usage.body.data.map((row: Json) => row.tenant)).toEqual(['globex']);
        expect(usage.body.totals.runs).toBe(1);
        expectProblem(await globex.get('/v1/usage?tenant=acme'), 'forbidden', 403);
      },
    ],
    ['GET /v1/schedules', async () => expect(leaked(ok(await globex.get('/v1/schedules?limit=1000')))).toEqual([])],
    [
      'POST /v1/schedules',
      async () => {
        // A schedule that would send to acme's session: that session does not exist for globex.
        const refused = expectProblem(
          await globex.post('/v1/schedules', {
            interval: { seconds: 3600 },
            message: 'hijack',
            target: { session_id: a.session },
          }),
          'validation',
          400,
        );
        expect(leaked({ ...refused, text: JSON.stringify(refused) } as ApiResponse, a.session)).toEqual([]);
        const own = ok(
          await globex.post('/v1/schedules', {
            interval: { seconds: 3600 },
            message: 'mine',
            target: { new_session: {} },
          }),
          201,
        );
        expectProblem(await acme.get(`/v1/schedules/${own.body.id}`), 'not_found', 404);
      },
    ],
    ['GET /v1/webhooks', async () => expect(leaked(ok(await globex.get('/v1/webhooks?limit=1000')))).toEqual([])],
    [
      'POST /v1/webhooks',
      async () => {
        const own = ok(
          await globex.post('/v1/webhooks', { url: 'http://127.0.0.1:9/globex', events: ['run.completed'] }),
          201,
        );
        expectProblem(await acme.get(`/v1/webhooks/${own.body.id}`), 'not_found', 404);
      },
    ],
    [
      'POST /v1/sessions',
      async () => {
        const own = ok(await globex.post('/v1/sessions', {}), 201);
        expectProblem(await acme.get(`/v1/sessions/${own.body.id}`), 'not_found', 404);
      },
    ],
    [
      'POST /v1/sessions/import',
      async () => {
        const own = (await globex.get('/v1/sessions?limit=1')).body.data[0].id;
        const exported = (await globex.get(`/v1/sessions/${own}/export`)).text;
        const imported = ok(
          await globex.request('POST', '/v1/sessions/import', {
            body: exported,
            headers: { 'content-type': 'application/x-ndjson' },
          }),
          201,
        );
        expectProblem(await acme.get(`/v1/sessions/${imported.body.id}`), 'not_found', 404);
      },
    ],
    [
      'POST /v1/erasures',
      async () => {
        // acme's session is not found for globex; erasing a tenant or by date takes an operator.
        const refused = expectProblem(
          await globex.post('/v1/erasures', { scope: 'session', session_id: a.session }),
          'not_found',
          404,
        );
        expect(leaked({ ...refused, text: JSON.stringify(refused) } as ApiResponse, a.session)).toEqual([]);
        expectProblem(
          await globex.post('/v1/erasures', { scope: 'tenant', tenant: 'acme', confirm: 'acme' }),
          'forbidden',
          403,
        );
        const when = new Date().toISOString();
        expectProblem(
          await globex.post('/v1/erasures', { scope: 'before', before: when, confirm: when }),
          'forbidden',
          403,
        );
      },
    ],
    ['GET /v1/erasures', async () => expectProblem(await globex.get('/v1/erasures'), 'forbidden', 403)],
    [
      'POST /v1/erasures/verify',
      async () => expectProblem(await globex.post('/v1/erasures/verify', { ids: [a.session] }), 'forbidden', 403),
    ],
    // Last: it erases every session of globex's.
    [
      'POST /v1/sessions/erase',
      async () => {
        expectProblem(await globex.post('/v1/sessions/erase', { confirm: 'acme' }), 'validation', 400);
        const erased = ok(await globex.post('/v1/sessions/erase', { confirm: 'globex' }));
        expect(erased.body.tenant).toBe('globex');
      },
    ],
    // Last: it adds runs of globex's own (the usage check above counts them).
    [
      'POST /v1/reruns',
      async () => {
        // globex's filter matches only globex's runs: its completed run is rerun, none of acme's.
        const own = await globex.session({ title: 'globex bulk' });
        await globex.waitForRun((await globex.send(own.id, 'hi')).run.id, 'completed');
        const r = ok(await globex.post('/v1/reruns', { filter: { status: ['completed'] } }), 201);
        expect(leaked(r)).toEqual([]);
        const items = ok(await globex.get(`/v1/reruns/${r.body.id}/items`));
        expect(items.body.data.length).toBeGreaterThan(0);
        expect(leaked(items)).toEqual([]);
        for (const i of items.body.data) ok(await globex.get(`/v1/runs/${i.source_run_id}`));
      },
    ],
  ];

  it("every operation without a path parameter shows globex only its own: never one of acme's ids, nor its data", async () => {
    const wide = ops.filter((op) => op.pathParams.length === 0).map((op) => `${op.method} ${op.path}`);
    expect(TENANT_WIDE.map(([key]) => key).sort(), 'each operation without a path parameter is in TENANT_WIDE').toEqual(
      [...wide].sort(),
    );
    const before = await acmeState();
    for (const [, check] of TENANT_WIDE) await check();
    expect(await acmeState()).toEqual(before);
  });

  /** Everything of acme's that a request from globex could change. */
  async function acmeState() {
    const get = async (path: string) => ok(await acme.get(path)).body;
    const sessions = await Promise.all(
      [a.session, a.approvalSession, a.questionSession].map((id) => get(`/v1/sessions/${id}`)),
    );
    const runs = await Promise.all([a.doneRun, a.approvalRun, a.questionRun].map((id) => get(`/v1/runs/${id}`)));
    return {
      sessions: sessions.map((s: Json) => [s.id, s.last_seq, s.leaf_id, s.archived_at, s.erased_at, s.title]),
      runs: runs.map((r: Json) => [r.id, r.status, r.waiting, r.cancel_requested, r.pause_requested]),
      schedules: (await get('/v1/schedules')).data.map((s: Json) => [s.id, s.paused]),
      webhooks: (await get('/v1/webhooks')).data.map((w: Json) => [w.id, w.url, w.active]),
      deliveries: (await get(`/v1/webhooks/${a.webhook}/deliveries`)).data.map((d: Json) => d.id),
      list: (await get('/v1/sessions?limit=1000&include_archived=true')).data.map((s: Json) => s.id),
    };
  }
});

/** The response, once it is known to be `status` (200 by default). */
function ok(r: ApiResponse, status = 200): ApiResponse {
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${r.text}`);
  return r;
}
