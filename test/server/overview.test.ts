/**
 * The views across sessions the inspector reads (and any client may): the inbox of waiting runs,
 * session summaries with search, and the replay check. Each sees only the caller's tenant.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectorRoutes } from '../../src/server/routes/inspector.ts';
import { expectProblem, startTestServer, type ApiResponse, type TestServer } from '../support/server-helpers.ts';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({ keys: [{ tenant: 'acme' }, { tenant: 'other' }] });
});
afterAll(() => t.close());

describe('the inbox', () => {
  it('lists the waiting runs of the caller’s tenant only, approvals and questions, with their sessions', async () => {
    const acme = t.api(t.secrets[0]);
    const other = t.api(t.secrets[1]);
    const s1 = await acme.session({ title: 'needs approval' });
    const s2 = await acme.session({ title: 'has a question' });
    const s3 = await other.session({ title: 'not yours' });
    const r1 = (await acme.send(s1.id, 'danger:prod')).run;
    const r2 = (await acme.send(s2.id, 'ask')).run;
    const r3 = (await other.send(s3.id, 'danger:x')).run;
    await acme.waitForRun(r1.id, 'waiting_approval');
    await acme.waitForRun(r2.id, 'waiting_for_user');
    await other.waitForRun(r3.id, 'waiting_approval');

    const inbox = await acme.get('/v1/inbox');
    expect(inbox.status).toBe(200);
    const items = inbox.body.data as Array<{
      session: { id: string; title: string };
      run: { id: string; status: string; waiting: { requests: Array<{ tool: string }> } };
    }>;
    expect(items.map((i) => [i.session.title, i.run.status, i.run.waiting.requests[0]!.tool])).toEqual([
      ['needs approval', 'waiting_approval', 'danger'],
      ['has a question', 'waiting_for_user', 'ask_user'],
    ]);
    expect((await other.get('/v1/inbox')).body.data.map((i: { run: { id: string } }) => i.run.id)).toEqual([r3.id]);

    // Decided: out of the inbox.
    const approval = items[0]!.run.waiting.requests[0] as unknown as { approval_id: string };
    expect(
      (await acme.post(`/v1/runs/${r1.id}/approvals/${approval.approval_id}`, { decision: 'approve' })).status,
    ).toBe(200);
    await acme.waitForRun(r1.id, 'completed');
    expect((await acme.get('/v1/inbox')).body.data.map((i: { run: { id: string } }) => i.run.id)).toEqual([r2.id]);
  });

  it('needs an API key', async () => {
    expectProblem(await t.api().get('/v1/inbox'), 'unauthorized', 401);
  });
});

describe('session summaries', () => {
  it('give each session’s latest run, run count, tokens and cost; q searches title, id and metadata; pages', async () => {
    const api = t.api(t.secrets[1]);
    const a = await api.session({ title: 'Quarterly report', metadata: { customer: 'Globex' } });
    const b = await api.session({ title: 'Weather', metadata: { customer: 'Initech' } });
    const run = (await api.send(b.id, 'hello')).run;
    await api.waitForRun(run.id, 'completed');

    const all = await api.get('/v1/session-summaries?limit=100');
    expect(all.status).toBe(200);
    const byId = new Map(all.body.data.map((s: { session: { id: string } }) => [s.session.id, s]));
    expect(byId.get(a.id)).toMatchObject({ runs: 0, cost: 0, latest_run: null });
    expect(byId.get(b.id)).toMatchObject({ runs: 1, latest_run: { id: run.id, status: 'completed' } });

    const byMetadata = await api.get('/v1/session-summaries?q=globex');
    expect(byMetadata.body.data.map((s: { session: { id: string } }) => s.session.id)).toEqual([a.id]);
    const byTitle = await api.get('/v1/session-summaries?q=WEATHER');
    expect(byTitle.body.data.map((s: { session: { id: string } }) => s.session.id)).toEqual([b.id]);
    expect((await api.get('/v1/session-summaries?q=nothing-like-this')).body).toEqual({ data: [], next_cursor: null });

    // Paging: one at a time, every session once.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: ApiResponse = await api.get(`/v1/session-summaries?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...page.body.data.map((s: { session: { id: string } }) => s.session.id));
      cursor = page.body.next_cursor;
    } while (cursor !== null);
    expect(seen).toEqual(all.body.data.map((s: { session: { id: string } }) => s.session.id));
    // Another tenant's sessions are not there.
    expect(seen).not.toContain((await t.api(t.secrets[0]).session()).id);
  });

  it('refuses an unknown parameter', async () => {
    expectProblem(await t.api(t.secrets[0]).get('/v1/session-summaries?search=x'), 'validation', 400);
  });
});

describe('the replay check', () => {
  it('says whether the log explains every model request', async () => {
    const api = t.api(t.secrets[0]);
    const s = await api.session();
    await api.waitForRun((await api.send(s.id, 'hi')).run.id, 'completed');
    const r = await api.get(`/v1/sessions/${s.id}/replay-check`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ok: true, requests: 1, mismatches: [] });
    expectProblem(await t.api(t.secrets[1]).get(`/v1/sessions/${s.id}/replay-check`), 'not_found', 404);
  });
});

describe('the inspector’s files', () => {
  it('answer a page saying to build when dist/inspector is missing', async () => {
    const app = new Hono();
    inspectorRoutes(app as never, { dir: '/nonexistent/keel-inspector' });
    const r = await app.request('/inspect/sessions/x');
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await r.text()).toContain('npm run build');
  });

  it('answer a path that is not valid percent-encoding with a 404, not a server error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-inspector-'));
    try {
      writeFileSync(join(dir, 'index.html'), '<!doctype html><title>inspector</title>');
      const app = new Hono();
      inspectorRoutes(app as never, { dir });
      expect((await app.request('/inspect/')).status).toBe(200);
      const r = await app.request('/inspect/%E0%A4%A');
      expect(r.status).toBe(404);
      expect(r.headers.get('content-type')).toMatch(/problem\+json/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
