/**
 * The session endpoints through real HTTP: create/list/get/archive, messages with every if_busy
 * policy, the views (events, transcript, context, runs), branches (fork, leaf, compact) and
 * export/import.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, startTestServer, type Api, type Json, type TestServer } from '../support/server-helpers.ts';

let srv: TestServer;
let api: Api;
beforeAll(async () => {
  srv = await startTestServer();
  api = srv.api();
});
afterAll(async () => {
  await srv?.close();
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A session with `texts` sent one after the other, each run completed. */
async function conversation(
  texts: string[],
  create: Record<string, unknown> = {},
): Promise<{ session: Json; runs: Json[] }> {
  const session = await api.session(create);
  const runs: Json[] = [];
  for (const t of texts) {
    const { run } = await api.send(session.id, t);
    runs.push(await api.waitForRun(run.id, 'completed'));
  }
  return { session: (await api.get(`/v1/sessions/${session.id}`)).body, runs };
}

const texts = (items: Json[]) => items.map((i: Json) => i.text).filter((t: unknown) => typeof t === 'string');

describe('sessions', () => {
  it('POST /v1/sessions creates a session (201) with every field', async () => {
    const r = await api.post('/v1/sessions', { title: 'First', metadata: { project: 'keel', n: 1 } });
    expect(r.status).toBe(201);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.body).toEqual({
      id: expect.any(String),
      title: 'First',
      metadata: { project: 'keel', n: 1 },
      agent: null,
      created_at: expect.stringMatching(ISO),
      last_seq: 1,
      leaf_id: null,
      origin: null,
      archived_at: null,
      erased_at: null,
      in_archive_at: null,
    });
    // An empty body is a session with defaults.
    const bare = await api.post('/v1/sessions', {});
    expect(bare.status).toBe(201);
    expect(bare.body).toMatchObject({ title: null, metadata: {}, agent: null });
    expect(bare.body.id).not.toBe(r.body.id);
  });

  it('takes a registered agent (with or without a version) and refuses an unknown one as unknown_agent', async () => {
    expect((await api.post('/v1/sessions', { agent: 'terse' })).body.agent).toBe('terse');
    expect((await api.post('/v1/sessions', { agent: 'terse@2' })).body.agent).toBe('terse@2');
    for (const agent of ['nobody', 'terse@9']) {
      const p = expectProblem(await api.post('/v1/sessions', { agent }), 'unknown_agent', 422);
      expect(p.detail).toContain(agent);
    }
  });

  it('GET /v1/sessions/{id} answers the session; an unknown id is not_found', async () => {
    const s = await api.session({ title: 'get me' });
    const r = await api.get(`/v1/sessions/${s.id}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual(s);
    expectProblem(await api.get('/v1/sessions/no-such-session'), 'not_found', 404);
  });

  it('GET /v1/sessions pages with limit/after/next_cursor; archived sessions only with include_archived=true', async () => {
    const mine: string[] = [];
    for (let i = 0; i < 5; i++) mine.push((await api.session({ title: `page ${i}` })).id);

    const all = await api.get('/v1/sessions?limit=1000');
    expect(all.status).toBe(200);
    expect(all.body.next_cursor).toBeNull();
    const ids: string[] = all.body.data.map((s: Json) => s.id);
    for (const id of mine) expect(ids).toContain(id);
    expect(new Set(ids).size).toBe(ids.length);

    // Pages of 2 give the same sessions in the same order, each page but the last with a cursor.
    const paged: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const q: string = `/v1/sessions?limit=2${after ? `&after=${after}` : ''}`;
      const page = await api.get(q);
      expect(page.status).toBe(200);
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      paged.push(...page.body.data.map((s: Json) => s.id));
      after = page.body.next_cursor;
      if (after !== null) expect(after).toBe(page.body.data.at(-1).id);
      pages++;
    } while (after !== null && pages < 100);
    expect(paged).toEqual(ids);
    expect(pages).toBe(Math.ceil(ids.length / 2));

    // The default limit applies without one.
    expect((await api.get('/v1/sessions')).body.data.length).toBe(Math.min(50, ids.length));

    // Archived: hidden by default, listed on request.
    await api.delete(`/v1/sessions/${mine[2]}`);
    const visible = (await api.get('/v1/sessions?limit=1000')).body.data.map((s: Json) => s.id);
    expect(visible).not.toContain(mine[2]);
    expect(visible).toContain(mine[1]);
    const withArchived = await api.get('/v1/sessions?limit=1000&include_archived=true');
    const archived = withArchived.body.data.find((s: Json) => s.id === mine[2]);
    expect(archived.archived_at).toMatch(ISO);
    expect((await api.get('/v1/sessions?limit=1000&include_archived=false')).body.data.map((s: Json) => s.id)).toEqual(
      visible,
    );
  });

  it('DELETE /v1/sessions/{id} archives, idempotently; the session stays readable', async () => {
    const { session } = await conversation(['keep me']);
    const first = await api.delete(`/v1/sessions/${session.id}`);
    expect(first.status).toBe(200);
    expect(first.body.archived_at).toMatch(ISO);
    expect(first.body.last_seq).toBeGreaterThan(session.last_seq);
    const again = await api.delete(`/v1/sessions/${session.id}`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect((await api.get(`/v1/sessions/${session.id}`)).body).toEqual(first.body);
    // An archived session takes no new messages: 409, and nothing is written.
    const p = expectProblem(
      await api.post(`/v1/sessions/${session.id}/messages`, { content: 'after archiving' }),
      'session_archived',
      409,
    );
    expect(p.detail).toContain(session.id);
    expect((await api.get(`/v1/sessions/${session.id}`)).body.last_seq).toBe(first.body.last_seq);
    expect(texts((await api.get(`/v1/sessions/${session.id}/transcript`)).body.items)).toContain('keep me');
    expectProblem(await api.delete('/v1/sessions/no-such-session'), 'not_found', 404);
  });
});

describe('messages', () => {
  it('POST /messages answers 202 with the message and its run, which completes (GET /v1/runs/{id})', async () => {
    const s = await api.session();
    const r = await api.post(`/v1/sessions/${s.id}/messages`, { content: 'hello keel' });
    expect(r.status).toBe(202);
    expect(r.body).toMatchObject({
      outcome: 'created',
      message: { id: expect.any(String) },
      run: { id: expect.any(String), session_id: s.id, agent: { name: 'helper', version: '1' } },
    });
    expect(r.body.run.trigger_message_id).toBe(r.body.message.id);
    expect(['queued', 'running', 'completed']).toContain(r.body.run.status);
    const run = await api.waitForRun(r.body.run.id, 'completed');
    expect(run).toMatchObject({
      id: r.body.run.id,
      status: 'completed',
      error: null,
      waiting: null,
      ended_at: expect.stringMatching(ISO),
    });
    expect(texts((await api.get(`/v1/sessions/${s.id}/transcript`)).body.items)).toEqual([
      'hello keel',
      'echo: hello keel',
    ]);
  });

  it('takes content parts, and picks the agent from the message or the session', async () => {
    const s = await api.session();
    // An empty string or no parts is no content.
    expectProblem(await api.post(`/v1/sessions/${s.id}/messages`, { content: '' }), 'validation', 400);
    expectProblem(await api.post(`/v1/sessions/${s.id}/messages`, { content: [] }), 'validation', 400);
    // Nor are blank texts: the runtime refuses a message that says nothing.
    for (const content of ['  ', [{ type: 'text', text: '' }]]) {
      const p = expectProblem(await api.post(`/v1/sessions/${s.id}/messages`, { content }), 'validation', 400);
      expect(p.detail).toContain('says nothing');
    }
    const runs = await api.get(`/v1/sessions/${s.id}/runs`);
    expect([runs.status, runs.body.data]).toEqual([200, []]);
    const r = await api.post(`/v1/sessions/${s.id}/messages`, {
      content: [
        { type: 'text', text: 'from ' },
        { type: 'text', text: 'parts' },
      ],
    });
    expect(r.status).toBe(202);
    await api.waitForRun(r.body.run.id, 'completed');
    expect(texts((await api.get(`/v1/sessions/${s.id}/transcript`)).body.items)).toContain('echo: from parts');

    const byMessage = await api.send(s.id, 'hi', { agent: 'terse' });
    expect(byMessage.run.agent).toEqual({ name: 'terse', version: '2' });
    await api.waitForRun(byMessage.run.id, 'completed');

    const terseSession = await api.session({ agent: 'terse@2' });
    const bySession = await api.send(terseSession.id, 'hi');
    expect(bySession.run.agent).toEqual({ name: 'terse', version: '2' });
    await api.waitForRun(bySession.run.id, 'completed');
    expect(texts((await api.get(`/v1/sessions/${terseSession.id}/transcript`)).body.items)).toEqual(['hi', 'ok']);

    expectProblem(
      await api.post(`/v1/sessions/${s.id}/messages`, { content: 'x', agent: 'nobody' }),
      'unknown_agent',
      422,
    );
    expectProblem(await api.post('/v1/sessions/no-such-session/messages', { content: 'x' }), 'not_found', 404);
  });

  it('if_busy: reject answers 409 run_busy with active_run_id; steer and enqueue are accepted', async () => {
    const s = await api.session();
    const first = await api.send(s.id, 'block:busy-1');
    await srv.gates.entered('busy-1');
    expect((await api.get(`/v1/runs/${first.run.id}`)).body.status).toBe('running');

    for (const body of [{ content: 'again' }, { content: 'again', if_busy: 'reject' }]) {
      const p = expectProblem(await api.post(`/v1/sessions/${s.id}/messages`, body), 'run_busy', 409);
      expect(p.active_run_id).toBe(first.run.id);
    }

    const steered = await api.send(s.id, 'steered in', { if_busy: 'steer' });
    expect(steered).toMatchObject({ outcome: 'steered', run: { id: first.run.id } });
    // An enqueued message is a run of its own at once, queued behind the active one: the 202 names it.
    const enqueued = await api.send(s.id, 'queued after', { if_busy: 'enqueue' });
    expect(enqueued).toMatchObject({
      outcome: 'enqueued',
      run: { status: 'queued', queued_behind: true, turn: null, trigger_message_id: enqueued.message.id },
    });
    expect(enqueued.run.id).not.toBe(first.run.id);
    expect((await api.get(`/v1/runs/${enqueued.run.id}`)).body).toMatchObject({
      status: 'queued',
      queued_behind: true,
    });
    const runs = (await api.get(`/v1/sessions/${s.id}/runs`)).body.data;
    expect(runs.map((r: { id: string }) => r.id)).toEqual([first.run.id, enqueued.run.id]);

    srv.gates.open('busy-1');
    await api.waitForRun(first.run.id, 'completed');
    // It starts when the active run ends.
    await api.waitForRun(enqueued.run.id, 'completed');
    expect((await api.get(`/v1/runs/${enqueued.run.id}`)).body).toMatchObject({ queued_behind: false, turn: 2 });
    const said = texts((await api.get(`/v1/sessions/${s.id}/transcript`)).body.items);
    expect(said).toEqual(
      expect.arrayContaining(['steered in', 'echo: steered in', 'queued after', 'echo: queued after']),
    );
    expect(said.indexOf('steered in')).toBeLessThan(said.indexOf('queued after'));
  });

  it('if_busy: interrupt cancels the active run and starts a new one', async () => {
    const s = await api.session();
    const first = await api.send(s.id, 'block:busy-2');
    await srv.gates.entered('busy-2');
    const next = await api.send(s.id, 'instead', { if_busy: 'interrupt' });
    expect(next.outcome).toBe('created');
    expect(next.run.id).not.toBe(first.run.id);
    expect((await api.get(`/v1/runs/${first.run.id}`)).body.status).toBe('cancelled');
    await api.waitForRun(next.run.id, 'completed');
    expect(texts((await api.get(`/v1/sessions/${s.id}/transcript`)).body.items)).toContain('echo: instead');
  });

  it('refuses an unknown if_busy policy and unknown fields', async () => {
    const s = await api.session();
    expectProblem(
      await api.post(`/v1/sessions/${s.id}/messages`, { content: 'x', if_busy: 'sometimes' }),
      'validation',
      400,
    );
    const p = expectProblem(
      await api.post(`/v1/sessions/${s.id}/messages`, { content: 'x', colour: 'red' }),
      'validation',
      400,
    );
    expect(p.detail).toContain('colour');
    expectProblem(await api.post(`/v1/sessions/${s.id}/messages`, {}), 'validation', 400);
  });
});

describe('views', () => {
  let session: Json;
  let runs: Json[];
  beforeAll(async () => {
    ({ session, runs } = await conversation(['one', 'two']));
  });

  it('/events pages with after/limit and next_after, in seq order', async () => {
    const all = await api.get(`/v1/sessions/${session.id}/events?limit=1000`);
    expect(all.status).toBe(200);
    expect(all.body.next_after).toBeNull();
    const events: Json[] = all.body.data;
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: session.last_seq }, (_, i) => i + 1));
    expect(events[0]).toMatchObject({
      type: 'session/created',
      session_id: session.id,
      seq: 1,
      v: expect.any(Number),
      time: expect.stringMatching(ISO),
      entry: false,
    });
    expect(events.filter((e) => e.type === 'user/message' && e.entry).length).toBe(2);
    expect(events.filter((e) => e.run_id === runs[1].id).length).toBeGreaterThan(0);

    const paged: Json[] = [];
    let after = 0;
    for (let i = 0; i < 100; i++) {
      const page = await api.get(`/v1/sessions/${session.id}/events?after=${after}&limit=3`);
      expect(page.status).toBe(200);
      expect(page.body.data.length).toBeLessThanOrEqual(3);
      paged.push(...page.body.data);
      if (page.body.next_after === null) break;
      expect(page.body.next_after).toBe(page.body.data.at(-1).seq);
      after = page.body.next_after;
    }
    expect(paged).toEqual(events);
    const tail = await api.get(`/v1/sessions/${session.id}/events?after=${session.last_seq}`);
    expect(tail.body).toEqual({ data: [], next_cursor: null, next_after: null });
    expect(
      (await api.get(`/v1/sessions/${session.id}/events?after=${session.last_seq - 2}`)).body.data.map(
        (e: Json) => e.seq,
      ),
    ).toEqual([session.last_seq - 1, session.last_seq]);

    expectProblem(await api.get(`/v1/sessions/${session.id}/events?after=-1`), 'validation', 400);
    expectProblem(await api.get(`/v1/sessions/${session.id}/events?limit=1001`), 'validation', 400);
    expectProblem(await api.get('/v1/sessions/no-such-session/events'), 'not_found', 404);
  });

  it('/transcript lists what people said and saw', async () => {
    const r = await api.get(`/v1/sessions/${session.id}/transcript`);
    expect(r.status).toBe(200);
    expect(r.body.items.map((i: Json) => [i.kind, i.text])).toEqual([
      ['user', 'one'],
      ['assistant', 'echo: one'],
      ['user', 'two'],
      ['assistant', 'echo: two'],
    ]);
    expectProblem(await api.get('/v1/sessions/no-such-session/transcript'), 'not_found', 404);
  });

  it('/context is the next request’s context, trimmed to budget_tokens', async () => {
    const r = await api.get(`/v1/sessions/${session.id}/context`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      tokens: expect.any(Number),
      omitted: 0,
      as_of_seq: session.last_seq,
      leaf_id: session.leaf_id,
    });
    expect(r.body.messages.map((m: Json) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(r.body.last_input_tokens).toEqual(expect.any(Number));

    const small = await api.get(`/v1/sessions/${session.id}/context?budget_tokens=1`);
    expect(small.status).toBe(200);
    expect(small.body.omitted).toBeGreaterThan(0);
    expect(small.body.messages.length).toBe(4 - small.body.omitted);
    expect(small.body.messages.length).toBeGreaterThanOrEqual(1);

    expectProblem(await api.get(`/v1/sessions/${session.id}/context?budget_tokens=0`), 'validation', 400);
    expectProblem(await api.get(`/v1/sessions/${session.id}/context?budget_tokens=lots`), 'validation', 400);
  });

  it('every list pages the same way: the next_cursor a page returns is what the next request sends as cursor', async () => {
    for (let i = 0; i < 3; i++) await api.session();
    const lists = [`/v1/sessions`, `/v1/sessions/${session.id}/runs`, `/v1/sessions/${session.id}/events`];
    for (const list of lists) {
      const all = (await api.get(`${list}?limit=1000`)).body;
      expect(all.next_cursor, list).toBeNull();
      const paged: Json[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 1000; pages++) {
        const page: { status: number; body: Json } = await api.get(
          `${list}?limit=1${cursor !== null ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        expect(page.status, list).toBe(200);
        paged.push(...page.body.data);
        expect(page.body.next_cursor === null || typeof page.body.next_cursor === 'string', list).toBe(true);
        cursor = page.body.next_cursor;
        if (cursor === null) break;
      }
      expect(cursor, `${list} pages end`).toBeNull();
      expect(paged, list).toEqual(all.data);
      expect(paged.length, list).toBeGreaterThan(1);
    }
  });

  it('an unknown query parameter is a 400 problem naming it, on every route', async () => {
    for (const path of [
      `/v1/sessions?curser=x`,
      `/v1/sessions/${session.id}/runs?after_id=x`,
      `/v1/sessions/${session.id}/events?from=3`,
      `/v1/sessions/${session.id}?verbose=1`,
      `/v1/runs/${runs[0].id}?expand=children`,
      `/v1/sessions/${session.id}/context?budget=10`,
    ]) {
      const p = expectProblem(await api.get(path), 'validation', 400);
      const name = path.split('?')[1]!.split('=')[0]!;
      expect(p.detail, path).toContain(name);
      expect(p.unknown_parameters, path).toEqual([name]);
    }
    // The older name of `cursor` still works, but not both names at odds.
    expectProblem(await api.get(`/v1/sessions?cursor=a&after=b`), 'validation', 400);
    // Known ones, and the stream's `after`, are fine.
    expect(
      (await api.get(`/v1/sessions/${session.id}/events?cursor=2&limit=1`)).body.data.map((e: Json) => e.seq),
    ).toEqual([3]);
  });

  it('/runs lists the session’s runs oldest first, with cursor pagination', async () => {
    const all = await api.get(`/v1/sessions/${session.id}/runs`);
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ next_cursor: null });
    expect(all.body.data.map((r: Json) => [r.id, r.status])).toEqual(runs.map((r) => [r.id, 'completed']));

    const p1 = await api.get(`/v1/sessions/${session.id}/runs?limit=1`);
    expect(p1.body.data.map((r: Json) => r.id)).toEqual([runs[0].id]);
    expect(p1.body.next_cursor).toBe(runs[0].id);
    const p2 = await api.get(`/v1/sessions/${session.id}/runs?limit=1&after=${p1.body.next_cursor}`);
    expect(p2.body.data.map((r: Json) => r.id)).toEqual([runs[1].id]);
    expect(p2.body.next_cursor).toBeNull();
    expectProblem(await api.get(`/v1/sessions/${session.id}/runs?limit=0`), 'validation', 400);
  });
});

describe('branches', () => {
  const entryOf = (events: Json[], type: string, text: string) =>
    events.find((e) => e.type === type && e.entry && JSON.stringify(e.data).includes(text))?.id as string;

  it('/fork into a branch with a summary moves the leaf under the summary; new messages continue there', async () => {
    const { session } = await conversation(['alpha', 'beta']);
    const events = await api.allEvents(session.id);
    const alphaAnswer = entryOf(events, 'assistant/message', 'echo: alpha');
    const r = await api.post(`/v1/sessions/${session.id}/fork`, {
      entry_id: alphaAnswer,
      into: 'branch',
      summary: 'we also tried beta',
    });
    expect(r.status).toBe(201);
    expect(r.body.session_id).toBe(session.id);
    expect(r.body.leaf_id).not.toBe(alphaAnswer);
    const after = (await api.get(`/v1/sessions/${session.id}`)).body;
    expect(after.leaf_id).toBe(r.body.leaf_id);
    const summary = (await api.allEvents(session.id)).find((e) => e.id === r.body.leaf_id);
    expect(summary).toMatchObject({
      type: 'branch/summary',
      parent_id: alphaAnswer,
      data: { summary: 'we also tried beta' },
    });

    const { run } = await api.send(session.id, 'gamma');
    await api.waitForRun(run.id, 'completed');
    const ctx = (await api.get(`/v1/sessions/${session.id}/context`)).body;
    const shown = JSON.stringify(ctx.messages);
    expect(shown).toContain('echo: alpha');
    expect(shown).toContain('we also tried beta');
    expect(shown).toContain('echo: gamma');
    expect(shown).not.toContain('echo: beta');
  });

  it('/fork into a branch without a summary puts the leaf on the entry', async () => {
    const { session } = await conversation(['one', 'two']);
    const first = entryOf(await api.allEvents(session.id), 'assistant/message', 'echo: one');
    const r = await api.post(`/v1/sessions/${session.id}/fork`, { entry_id: first, into: 'branch' });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ session_id: session.id, leaf_id: first });
    expect((await api.get(`/v1/sessions/${session.id}`)).body.leaf_id).toBe(first);
  });

  it('/leaf and /fork into a branch are refused while a run of the session is active (409 naming it); a fork into a new session is not', async () => {
    const { session } = await conversation(['one']);
    const first = entryOf(await api.allEvents(session.id), 'assistant/message', 'echo: one');
    const { run } = await api.send(session.id, 'danger:prod');
    await api.waitForRun(run.id, 'waiting_approval');
    const before = (await api.get(`/v1/sessions/${session.id}`)).body;
    for (const r of [
      await api.post(`/v1/sessions/${session.id}/leaf`, { entry_id: first }),
      await api.post(`/v1/sessions/${session.id}/fork`, { entry_id: first, into: 'branch' }),
    ]) {
      const p = expectProblem(r, 'run_busy', 409);
      expect(p.active_run_id).toBe(run.id);
      expect(p.detail).toContain(run.id);
    }
    // Nothing moved: the run's next request is built from the path it started on.
    expect((await api.get(`/v1/sessions/${session.id}`)).body).toMatchObject({
      leaf_id: before.leaf_id,
      last_seq: before.last_seq,
    });
    expect((await api.post(`/v1/sessions/${session.id}/fork`, { entry_id: first, into: 'session' })).status).toBe(201);
  });

  it('/fork into a session makes a new session with the path and its origin', async () => {
    const { session } = await conversation(['left', 'right'], { title: 'source', metadata: { k: 'v' } });
    const at = entryOf(await api.allEvents(session.id), 'assistant/message', 'echo: left');
    const r = await api.post(`/v1/sessions/${session.id}/fork`, { entry_id: at, into: 'session', title: 'the fork' });
    expect(r.status).toBe(201);
    expect(r.body.session_id).not.toBe(session.id);
    const forked = (await api.get(`/v1/sessions/${r.body.session_id}`)).body;
    expect(forked).toMatchObject({
      title: 'the fork',
      metadata: { k: 'v' },
      origin: { session_id: session.id, entry_id: at },
      leaf_id: r.body.leaf_id,
    });
    expect(texts((await api.get(`/v1/sessions/${r.body.session_id}/transcript`)).body.items)).toEqual([
      'left',
      'echo: left',
    ]);
    // The source is untouched.
    expect(texts((await api.get(`/v1/sessions/${session.id}/transcript`)).body.items)).toEqual([
      'left',
      'echo: left',
      'right',
      'echo: right',
    ]);
    // Listed with the tenant's sessions.
    expect((await api.get('/v1/sessions?limit=1000')).body.data.map((s: Json) => s.id)).toContain(r.body.session_id);
  });

  it('/fork refuses a summary for a session fork, unknown entries and bad bodies', async () => {
    const { session } = await conversation(['x']);
    const at = entryOf(await api.allEvents(session.id), 'assistant/message', 'echo: x');
    expectProblem(
      await api.post(`/v1/sessions/${session.id}/fork`, { entry_id: at, into: 'session', summary: 'no' }),
      'validation',
      400,
    );
    expectProblem(
      await api.post(`/v1/sessions/${session.id}/fork`, { entry_id: 'no-such-entry', into: 'branch' }),
      'validation',
      400,
    );
    expectProblem(await api.post(`/v1/sessions/${session.id}/fork`, { entry_id: at, into: 'tree' }), 'validation', 400);
    expectProblem(await api.post(`/v1/sessions/${session.id}/fork`, { into: 'branch' }), 'validation', 400);
    expectProblem(
      await api.post('/v1/sessions/no-such-session/fork', { entry_id: at, into: 'branch' }),
      'not_found',
      404,
    );
  });

  it('/leaf switches the current branch to an entry (or to none)', async () => {
    const { session } = await conversation(['first', 'second']);
    const events = await api.allEvents(session.id);
    const first = entryOf(events, 'assistant/message', 'echo: first');
    const r = await api.post(`/v1/sessions/${session.id}/leaf`, { entry_id: first });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ leaf_id: first, seq: session.last_seq + 1 });
    expect((await api.get(`/v1/sessions/${session.id}`)).body.leaf_id).toBe(first);
    expect(
      texts(
        (await api.get(`/v1/sessions/${session.id}/context`)).body.messages.map((m: Json) => ({
          text: m.content?.[0]?.text,
        })),
      ),
    ).toEqual(['first', 'echo: first']);

    const back = entryOf(events, 'assistant/message', 'echo: second');
    expect((await api.post(`/v1/sessions/${session.id}/leaf`, { entry_id: back })).body.leaf_id).toBe(back);
    const none = await api.post(`/v1/sessions/${session.id}/leaf`, { entry_id: null });
    expect(none.status).toBe(200);
    expect(none.body.leaf_id).toBeNull();
    expect((await api.get(`/v1/sessions/${session.id}/context`)).body.messages).toEqual([]);

    expectProblem(await api.post(`/v1/sessions/${session.id}/leaf`, { entry_id: 'no-such-entry' }), 'validation', 400);
    expectProblem(await api.post(`/v1/sessions/${session.id}/leaf`, {}), 'validation', 400);
  });

  it('/compact summarizes the context with the session’s agent model; nothing to do is not an error', async () => {
    const fresh = await api.session();
    const nothing = await api.post(`/v1/sessions/${fresh.id}/compact`);
    expect(nothing.status).toBe(200);
    expect(nothing.body).toEqual({ compacted: false, reason: expect.any(String) });

    const { session } = await conversation(['tell me about the first thing', 'and the second thing', 'and the third']);
    const r = await api.post(`/v1/sessions/${session.id}/compact`, { keep_recent_tokens: 1 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      compacted: true,
      event: { type: 'compaction', session_id: session.id, seq: session.last_seq + 1 },
      tokens_before: expect.any(Number),
      tokens_after: expect.any(Number),
    });
    const ctx = (await api.get(`/v1/sessions/${session.id}/context`)).body;
    expect(ctx.messages[0].role).toBe('summary');
    expect(JSON.stringify(ctx.messages)).not.toContain('"tell me about the first thing"');

    expectProblem(await api.post(`/v1/sessions/${session.id}/compact`, { keep_recent_tokens: 0 }), 'validation', 400);
    expectProblem(await api.post(`/v1/sessions/${session.id}/compact`, { keep: 1 }), 'validation', 400);
  });

  it('/compact refuses while a run is running (run_busy)', async () => {
    const s = await api.session();
    const { run } = await api.send(s.id, 'block:compact');
    await srv.gates.entered('compact');
    const p = expectProblem(await api.post(`/v1/sessions/${s.id}/compact`, {}), 'run_busy', 409);
    expect(p.active_run_id).toBe(run.id);
    srv.gates.open('compact');
    await api.waitForRun(run.id, 'completed');
  });
});

describe('export and import', () => {
  let other: TestServer;
  beforeAll(async () => {
    other = await startTestServer();
  });
  afterAll(async () => {
    await other?.close();
  });

  it('/export is versioned JSONL; POST /v1/sessions/import?ids=keep round-trips it; a second import with the same ids is a conflict', async () => {
    const { session } = await conversation(['export me'], { title: 'exported', metadata: { a: 1 } });
    // A second run that waits for the user, cancelled: the session is at rest with a closed call.
    const { run } = await api.send(session.id, 'ask');
    await api.waitForRun(run.id, 'waiting_for_user');
    expect((await api.post(`/v1/runs/${run.id}/cancel`)).body.status).toBe('cancelled');
    const exported = await api.get(`/v1/sessions/${session.id}/export`);
    expect(exported.status).toBe(200);
    expect(exported.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(exported.headers.get('content-disposition')).toContain(`${session.id}.jsonl`);
    const lines = exported.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    const final = (await api.get(`/v1/sessions/${session.id}`)).body;
    expect(lines[0]).toMatchObject({
      kind: 'keel.session',
      version: expect.any(Number),
      session: { id: session.id, title: 'exported', lastSeq: final.last_seq },
    });
    expect(lines.filter((l) => l.kind === 'event').length).toBe(final.last_seq);

    const target = other.api();
    const imported = await target.request('POST', '/v1/sessions/import?ids=keep', {
      body: exported.text,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expect(imported.status).toBe(201);
    expect(imported.body).toEqual(final);
    expect(await target.allEvents(session.id)).toEqual(await api.allEvents(session.id));
    expect((await target.get(`/v1/sessions/${session.id}/transcript`)).body).toEqual(
      (await api.get(`/v1/sessions/${session.id}/transcript`)).body,
    );
    expect((await target.get(`/v1/sessions/${session.id}/context`)).body).toEqual(
      (await api.get(`/v1/sessions/${session.id}/context`)).body,
    );

    const twice = await target.request('POST', '/v1/sessions/import?ids=keep', {
      body: exported.text,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    expectProblem(twice, 'conflict', 409);
    // Into the server it came from, too.
    expectProblem(
      await api.request('POST', '/v1/sessions/import?ids=keep', {
        body: exported.text,
        headers: { 'content-type': 'application/x-ndjson' },
      }),
      'conflict',
      409,
    );
  });

  it('an import under a new session id (the default) works where the export came from: the same conversation, its origin the session it came from', async () => {
    const { session } = await conversation(['copy me', 'and me']);
    // A branch switch and a fork in the log: references to entries must follow the new ids.
    const events = await api.allEvents(session.id);
    const firstAnswer = events.find((e: Json) => e.type === 'assistant/message')!;
    expect((await api.post(`/v1/sessions/${session.id}/leaf`, { entry_id: firstAnswer.id })).status).toBe(200);
    await api.waitForRun((await api.send(session.id, 'on a branch')).run.id, 'completed');
    const source = (await api.get(`/v1/sessions/${session.id}`)).body;
    const exported = (await api.get(`/v1/sessions/${session.id}/export`)).text;

    const copies = [];
    for (let i = 0; i < 2; i++) {
      const r = await api.request('POST', '/v1/sessions/import', {
        body: exported,
        headers: { 'content-type': 'application/x-ndjson' },
      });
      expect(r.status).toBe(201);
      copies.push(r.body);
    }
    expect(copies[0].id).not.toBe(session.id);
    expect(copies[1].id).not.toBe(copies[0].id);
    for (const copy of copies) {
      expect(copy).toMatchObject({
        title: source.title,
        last_seq: source.last_seq,
        leaf_id: source.leaf_id,
        origin: { session_id: session.id, entry_id: source.leaf_id },
      });
      const original = await api.allEvents(session.id);
      const copied = await api.allEvents(copy.id);
      expect(copied.map(({ session_id: _s, ...e }: Json) => e)).toEqual(
        original.map(({ session_id: _s, ...e }: Json) => e),
      );
      // Same conversation on the same branch: what the model sees next, and what people see.
      expect((await api.get(`/v1/sessions/${copy.id}/context`)).body.messages).toEqual(
        (await api.get(`/v1/sessions/${session.id}/context`)).body.messages,
      );
      expect((await api.get(`/v1/sessions/${copy.id}/transcript`)).body).toEqual(
        (await api.get(`/v1/sessions/${session.id}/transcript`)).body,
      );
      // And the log still explains every request.
      expect(await srv.runtime.sessions.verifyReplay(copy.id)).toMatchObject({ ok: true, mismatches: [] });
    }
  });

  it('a corrupted import is refused as invalid_import with line-numbered problems, and writes nothing', async () => {
    const { session } = await conversation(['corrupt me']);
    const text = (await api.get(`/v1/sessions/${session.id}/export`)).text;
    const lines = text.trimEnd().split('\n');
    lines[2] = lines[2]!.slice(0, 20);
    const target = other.api();
    const r = await target.request('POST', '/v1/sessions/import', {
      body: `${lines.join('\n')}\n`,
      headers: { 'content-type': 'application/x-ndjson' },
    });
    const p = expectProblem(r, 'invalid_import', 422);
    expect(p.problems).toEqual(expect.arrayContaining([{ line: 3, message: expect.any(String) }]));
    expectProblem(await target.get(`/v1/sessions/${session.id}`), 'not_found', 404);

    // Not JSONL at all, and an empty body.
    const junk = expectProblem(
      await target.request('POST', '/v1/sessions/import', {
        body: 'hello\nworld\n',
        headers: { 'content-type': 'application/x-ndjson' },
      }),
      'invalid_import',
      422,
    );
    expect(junk.problems[0].line).toBe(1);
    expectProblem(
      await target.request('POST', '/v1/sessions/import', {
        body: '',
        headers: { 'content-type': 'application/x-ndjson' },
      }),
      'validation',
      400,
    );

    // The intact export still imports.
    expect(
      (
        await target.request('POST', '/v1/sessions/import', {
          body: text,
          headers: { 'content-type': 'application/x-ndjson' },
        })
      ).status,
    ).toBe(201);
  });
});

describe('erasure', () => {
  it('erases a session: its runs cancelled, then log, content and payloads gone; a tombstone with its totals remains, and everything about it answers 410', async () => {
    const api = srv.api();
    const s = (await api.post('/v1/sessions', { title: 'private matters', metadata: { ssn: '123' } })).body;
    const done = (await api.post(`/v1/sessions/${s.id}/messages`, { content: 'my secret is 42' })).body;
    await api.waitForRun(done.run.id, 'completed');
    const blocked = (await api.post(`/v1/sessions/${s.id}/messages`, { content: 'block:erase-me' })).body;
    await srv.gates.entered('erase-me');
    const exported = (await api.get(`/v1/sessions/${s.id}/export`)).text;
    expect(exported).toContain('my secret is 42');

    const erased = await api.post(`/v1/sessions/${s.id}/erase`);
    expect(erased.status).toBe(200);
    expect(erased.body).toMatchObject({
      id: s.id,
      tenant: 'default',
      erased_at: expect.any(String),
      totals: { runs: 2, cost: expect.any(Number), usage: expect.any(Object) },
    });
    // The running run was cancelled first.
    expect((await srv.store.runs.get(blocked.run.id))!.status).toBe('cancelled');

    for (const path of [
      `/v1/sessions/${s.id}`,
      `/v1/sessions/${s.id}/events`,
      `/v1/sessions/${s.id}/transcript`,
      `/v1/sessions/${s.id}/context`,
      `/v1/sessions/${s.id}/export`,
      `/v1/runs/${done.run.id}`,
      `/v1/runs/${done.run.id}/steps`,
    ]) {
      expectProblem(await api.get(path), 'gone', 410);
    }
    expectProblem(await api.post(`/v1/sessions/${s.id}/messages`, { content: 'hello again' }), 'gone', 410);
    expectProblem(await api.post(`/v1/sessions/${s.id}/erase`), 'gone', 410);
    // Nothing of its content is left in the database.
    expect(await srv.store.events.read(s.id)).toEqual([]);
    const tomb = (await srv.store.sessions.get(s.id))!;
    expect(tomb).toMatchObject({ title: null, metadata: {}, erasedAt: expect.any(Number) });
    // Of what the run executed with, only its model is kept (usage by model, for billing): no prompt, no tools.
    expect((await srv.store.runs.get(done.run.id))!.agentSpec).toEqual({
      model: { provider: 'scripted', modelId: 'helper-1' },
    });
    // Listed only with the archived ones, as a tombstone.
    const listed = (await api.get('/v1/sessions?include_archived=true&limit=1000')).body.data.find(
      (x: Json) => x.id === s.id,
    );
    expect(listed).toMatchObject({ erased_at: expect.any(String), title: null });
    expect((await api.get('/v1/sessions?limit=1000')).body.data.some((x: Json) => x.id === s.id)).toBe(false);
  });

  it("erases every session of the caller's tenant, once confirmed with the tenant's name, and no other tenant's", async () => {
    const own = await startTestServer({ keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    try {
      const acme = own.api(own.secrets[0]);
      const globex = own.api(own.secrets[1]);
      const mine = [(await acme.post('/v1/sessions', {})).body.id, (await acme.post('/v1/sessions', {})).body.id];
      await acme.delete(`/v1/sessions/${mine[1]}`);
      const theirs = (await globex.post('/v1/sessions', { title: 'keep me' })).body.id;
      expectProblem(await acme.post('/v1/sessions/erase', { confirm: 'globex' }), 'validation', 400);
      expect((await acme.post('/v1/sessions/erase', { confirm: 'acme' })).body).toEqual({ tenant: 'acme', erased: 2 });
      for (const id of mine) expectProblem(await acme.get(`/v1/sessions/${id}`), 'gone', 410);
      expect((await globex.get(`/v1/sessions/${theirs}`)).body.title).toBe('keep me');
      expect((await acme.post('/v1/sessions/erase', { confirm: 'acme' })).body).toEqual({ tenant: 'acme', erased: 0 });
    } finally {
      await own.close();
    }
  });
});
