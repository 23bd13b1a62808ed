/**
 * `keel/client` against a real server, on both backends: a whole conversation through its typed
 * methods (messages, approvals, questions, steering, pause, cancel, signals, reruns, comparison,
 * datasets), and the API's refusals as typed `KeelProblem`s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKeelClient,
  KeelNetworkError,
  KeelProblem,
  type KeelClient,
  type Run,
  type RunStatus,
} from '../../src/client/index.ts';
import { BACKENDS, startTestServer, type TestServer } from '../support/server-helpers.ts';

/** Every item of an async iterable (Array.fromAsync is not in the ES2023 library). */
async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** Awaits a rejection and returns it as a KeelProblem (fails if it is anything else). */
async function problemOf(p: Promise<unknown>): Promise<KeelProblem> {
  const e = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(e instanceof KeelProblem)) throw new Error(`expected a KeelProblem, got ${String(e)}`);
  return e;
}

/** Polls the run until its status is one of `statuses`. */
async function until(keel: KeelClient, runId: string, ...statuses: RunStatus[]): Promise<Run> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const run = await keel.runs.get(runId);
    if (statuses.includes(run.status)) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} is ${run.status}, not ${statuses.join('|')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.each(BACKENDS)('keel/client (%s)', (backend) => {
  let srv: TestServer;
  let keel: KeelClient;
  let other: KeelClient;
  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    keel = createKeelClient({ baseUrl: srv.url, apiKey: srv.secrets[0] });
    other = createKeelClient({ baseUrl: `${srv.url}/`, apiKey: srv.secrets[1] });
  });
  afterAll(() => srv?.close());

  it('drives a conversation: messages, approvals, questions, steering, pause, cancel, signals', async () => {
    const session = await keel.sessions.create({ title: 'client flow', metadata: { from: 'test' } });
    expect(session).toMatchObject({ title: 'client flow', metadata: { from: 'test' }, archived_at: null });
    expect((await keel.sessions.get(session.id)).id).toBe(session.id);
    expect((await keel.sessions.list({ limit: 1000 })).data.map((s) => s.id)).toContain(session.id);

    // A message: the run streams its answer and completes.
    const sent = await keel.sessions.send(session.id, 'hello there');
    expect(sent.outcome).toBe('created');
    const items = await collect(keel.runs.follow(sent.run.id));
    const answer = items.find((i) => i.kind === 'event' && i.event.type === 'assistant/message');
    expect(JSON.stringify(answer)).toContain('echo: hello there');
    // The deltas, when the stream caught the answer while it was made, are the same text.
    const text = items.flatMap((i) => (i.kind === 'delta' && i.delta.type === 'text/delta' ? [i.delta.delta] : []));
    if (text.length > 0) expect(text.join('')).toBe('echo: hello there');
    expect(items.at(-1)).toMatchObject({ kind: 'end', runId: sent.run.id });
    expect((await keel.runs.get(sent.run.id)).status).toBe('completed');

    // An approval, approved (with an idempotency key: the same request again is answered the same).
    const approved = (await keel.sessions.send(session.id, 'danger:prod')).run;
    const waiting = await until(keel, approved.id, 'waiting_approval');
    const approval = waiting.waiting!.requests[0]!;
    expect(approval).toMatchObject({ kind: 'approval', tool: 'danger', arguments: { target: 'prod' } });
    const decided = await keel.runs.approve(approved.id, approval.approval_id, { idempotencyKey: 'approve-prod' });
    expect(decided.id).toBe(approved.id);
    await keel.runs.approve(approved.id, approval.approval_id, { idempotencyKey: 'approve-prod' });
    await until(keel, approved.id, 'completed');
    expect(srv.dangerRuns).toEqual([{ target: 'prod' }]);

    // An approval, denied with a reason: the tool does not run.
    const denied = (await keel.sessions.send(session.id, { content: 'danger:staging', if_busy: 'reject' })).run;
    const deny = (await until(keel, denied.id, 'waiting_approval')).waiting!.requests[0]!;
    await keel.runs.deny(denied.id, deny.approval_id, { reason: 'not today' });
    await until(keel, denied.id, 'completed');
    expect(srv.dangerRuns).toEqual([{ target: 'prod' }]);

    // A question, answered.
    const asked = (await keel.sessions.send(session.id, [{ type: 'text', text: 'ask' }])).run;
    const question = (await until(keel, asked.id, 'waiting_for_user')).waiting!.requests[0]!;
    expect(question).toMatchObject({ kind: 'input', tool: 'ask_user' });
    await keel.runs.input(asked.id, { color: 'blue' }, { toolCallId: question.tool_call_id });
    await until(keel, asked.id, 'completed');

    // Steering and a signal into a running run; a message meanwhile is refused with run_busy.
    const blocked = (await keel.sessions.send(session.id, 'block:steer')).run;
    await srv.gates.entered('steer');
    const steered = await keel.runs.steer(blocked.id, 'and also this');
    expect(steered.run.id).toBe(blocked.id);
    expect(await keel.runs.signal(blocked.id, 'ping', { n: 1 })).toMatchObject({ signal: 'ping', consumed: false });
    const busy = await problemOf(keel.sessions.send(session.id, 'another'));
    expect(busy.is('run_busy') && busy.active_run_id).toBe(blocked.id);
    expect(busy).toMatchObject({ type: 'run_busy', status: 409, fields: { active_run_id: blocked.id } });
    srv.gates.open('steer');
    await until(keel, blocked.id, 'completed');
    const events = (await keel.sessions.events(session.id, { limit: 1000 })).data;
    const steer = events.find((e) => e.type === 'user/message' && (e.data as { via?: string }).via === 'steer');
    expect(JSON.stringify(steer?.data)).toContain('and also this');

    // Pause at the next step boundary, then resume.
    const paused = (await keel.sessions.send(session.id, 'block:pause')).run;
    await srv.gates.entered('pause');
    await keel.runs.pause(paused.id);
    srv.gates.open('pause');
    await until(keel, paused.id, 'paused');
    const resumed = await keel.runs.resume(paused.id);
    expect(resumed.id).toBe(paused.id);
    await until(keel, paused.id, 'completed');

    // Cancel.
    const cancelled = (await keel.sessions.send(session.id, 'block:cancel')).run;
    await srv.gates.entered('cancel');
    await keel.runs.cancel(cancelled.id);
    await until(keel, cancelled.id, 'cancelled');

    // Lists: the session's runs, the tenant's runs by status.
    const runs = (await keel.sessions.runs(session.id)).data;
    expect(runs.map((r) => r.status)).toEqual([
      'completed',
      'completed',
      'completed',
      'completed',
      'completed',
      'completed',
      'cancelled',
    ]);
    expect((await keel.runs.list({ status: 'cancelled' })).data.map((r) => r.id)).toEqual([cancelled.id]);
    const transcript = await keel.sessions.transcript(session.id);
    expect(transcript.items.length).toBeGreaterThan(0);

    // A finished run refuses a signal; another tenant sees none of it.
    const ended = await problemOf(keel.runs.signal(sent.run.id, 'late'));
    expect(ended.is('illegal_transition') && ended.from).toBe('completed');
    expect(ended).toMatchObject({ type: 'illegal_transition', status: 409, run_id: sent.run.id });
    expect((await other.runs.list()).data).toEqual([]);
  });

  it('declares client tools: the run waits for their outputs, which come back with toolResults', async () => {
    const session = await keel.sessions.create();
    const tools = [
      { name: 'get_location', description: 'Where the user is', parameters: { type: 'object', properties: {} } },
      { name: 'get_time', description: 'The user’s clock' },
    ];
    const { run } = await keel.sessions.send(session.id, {
      content: 'call:get_location,get_time',
      client_tools: tools,
    });
    const waiting = await until(keel, run.id, 'waiting_for_signal');
    expect(waiting.waiting!.requests.map((r) => [r.tool, r.arguments, r.client_tool])).toEqual([
      ['get_location', { n: 0 }, true],
      ['get_time', { n: 1 }, true],
    ]);
    const [location, time] = waiting.waiting!.requests;
    // One at a time: the run waits for the other.
    const half = await keel.runs.toolResults(run.id, [{ tool_call_id: location!.tool_call_id, output: 'Lisbon' }]);
    expect(half.status).toBe('waiting_for_signal');
    expect((await problemOf(keel.runs.toolResults(run.id, [{ tool_call_id: 'nope', output: 1 }]))).type).toBe(
      'unknown_tool_call',
    );
    await keel.runs.toolResults(run.id, [{ tool_call_id: time!.tool_call_id, output: { hour: 9 } }]);
    await until(keel, run.id, 'completed');
    const items = await collect(keel.runs.follow(run.id));
    expect(JSON.stringify(items)).toContain('got Lisbon | {\\"hour\\":9}');
    // Repeats are refused; the declarations are checked like any option.
    expect(
      (await problemOf(keel.runs.toolResults(run.id, [{ tool_call_id: time!.tool_call_id, output: 2 }]))).type,
    ).toBe('already_delivered');
    const bad = await problemOf(
      keel.sessions.send(session.id, { content: 'hi', client_tools: [{ name: 'has space' }] }),
    );
    expect(bad.type).toBe('validation');
  });

  it('reruns a run on another agent version, compares the two, and makes a dataset of them', async () => {
    const session = await keel.sessions.create();
    const { run } = await keel.sessions.send(session.id, 'hello again');
    await until(keel, run.id, 'completed');

    const rerun = await keel.runs.rerun(run.id, { agent: 'terse@2' });
    expect(rerun).toMatchObject({ rerun_of: run.id, agent: { name: 'terse', version: '2' } });
    expect(rerun.session_id).not.toBe(session.id);
    await until(keel, rerun.id, 'completed');
    expect((await keel.runs.list({ rerun_of: run.id })).data.map((r) => r.id)).toEqual([rerun.id]);

    const cmp = await keel.runs.compare(run.id, rerun.id);
    expect(cmp.a.id).toBe(run.id);
    expect(cmp.b.id).toBe(rerun.id);
    expect(cmp.finalAnswer).toMatchObject({ a: 'echo: hello again', b: 'ok', equal: false });

    const dataset = await keel.datasets.create({ name: `client-${backend}`, runs: [run.id, rerun.id] });
    expect(dataset.item_count).toBe(2);
    expect((await keel.datasets.items(dataset.id)).data.map((i) => i.source_run_id)).toEqual([run.id, rerun.id]);
    await keel.datasets.delete(dataset.id);
    expect((await problemOf(keel.datasets.get(dataset.id))).type).toBe('not_found');
  });

  it('reads the views across sessions and works on a session: summaries, inbox, leaf, compact, export, replay check', async () => {
    const session = await keel.sessions.create({ title: `views-${backend}` });
    const first = (await keel.sessions.send(session.id, 'one')).run;
    await until(keel, first.id, 'completed');

    const found = await keel.sessions.summaries({ q: `views-${backend}` });
    expect(found.data.map((s) => [s.session.id, s.runs, s.latest_run?.status])).toEqual([[session.id, 1, 'completed']]);
    expect((await other.sessions.summaries()).data).toEqual([]);

    // A run waiting for an approval is in the inbox, until it is decided.
    const waiting = (await keel.sessions.send(session.id, 'danger:inbox')).run;
    const approval = (await until(keel, waiting.id, 'waiting_approval')).waiting!.requests[0]!;
    const inbox = (await keel.inbox.list({ limit: 1000 })).data;
    expect(inbox.find((i) => i.run.id === waiting.id)?.session).toEqual({ id: session.id, title: `views-${backend}` });
    expect((await other.inbox.list()).data).toEqual([]);
    await keel.runs.approve(waiting.id, approval.approval_id);
    await until(keel, waiting.id, 'completed');
    expect((await keel.inbox.list({ limit: 1000 })).data.map((i) => i.run.id)).not.toContain(waiting.id);

    // The leaf back to the first answer; compaction (nothing to do on so short a log); the export; the replay check.
    const entries = (await keel.sessions.events(session.id, { limit: 1000 })).data.filter((e) => e.entry);
    const firstAnswer = entries.find((e) => e.type === 'assistant/message')!;
    expect((await keel.sessions.setLeaf(session.id, firstAnswer.id)).leaf_id).toBe(firstAnswer.id);
    expect((await keel.sessions.get(session.id)).leaf_id).toBe(firstAnswer.id);
    expect(await keel.sessions.compact(session.id)).toHaveProperty('compacted');
    const jsonl = await keel.sessions.export(session.id);
    expect(typeof jsonl).toBe('string');
    const lines = jsonl.trim().split('\n');
    expect(lines.length).toBeGreaterThan(entries.length);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
    const check = await keel.sessions.replayCheck(session.id);
    expect(check).toMatchObject({ ok: true, mismatches: [] });
    expect(check.requests).toBeGreaterThan(0);
  });

  it("throws the API's problems as KeelProblems: not_found, validation, unauthorized; KeelNetworkError when down", async () => {
    const session = await keel.sessions.create();
    const { run } = await keel.sessions.send(session.id, 'mine');
    await until(keel, run.id, 'completed');

    // Another tenant's run: not found (never told apart from an unknown one).
    const theirs = await problemOf(other.runs.get(run.id));
    expect(theirs).toBeInstanceOf(Error);
    expect(theirs).toMatchObject({
      name: 'KeelProblem',
      type: 'not_found',
      status: 404,
      title: 'No such resource',
      instance: `/v1/runs/${run.id}`,
    });
    expect(theirs.message).toBe(theirs.detail);
    expect(KeelProblem.is(theirs, 'not_found')).toBe(true);
    expect((await problemOf(other.runs.compare(run.id, run.id))).type).toBe('not_found');
    expect((await problemOf(other.sessions.send(session.id, 'hi'))).status).toBe(404);

    // Malformed requests: validation, naming the field.
    const limit = await problemOf(keel.sessions.list({ limit: 0 }));
    expect(limit).toMatchObject({ type: 'validation', status: 400 });
    expect(limit.is('validation') && limit.errors?.map((e) => e.path)).toEqual(['limit']);
    const empty = await problemOf(keel.sessions.send(session.id, ''));
    expect(empty).toMatchObject({ type: 'validation', status: 400 });
    const unknownAgent = await problemOf(keel.sessions.create({ agent: 'nobody' }));
    expect(unknownAgent).toMatchObject({ type: 'unknown_agent', status: 422 });

    // No key, a wrong key.
    expect(await problemOf(createKeelClient({ baseUrl: srv.url }).sessions.list())).toMatchObject({
      type: 'unauthorized',
      status: 401,
    });
    expect((await problemOf(createKeelClient({ baseUrl: srv.url, apiKey: 'keel_wrong' }).runs.get(run.id))).type).toBe(
      'unauthorized',
    );

    // Nobody there.
    const closed = createKeelClient({ baseUrl: 'http://127.0.0.1:9' });
    const down = await closed.sessions.list().catch((e: unknown) => e);
    expect(down).toBeInstanceOf(KeelNetworkError);
    expect((down as Error).message).toMatch(/^cannot reach the Keel server at http:\/\/127\.0\.0\.1:9: /);

    // An aborted call rejects with the abort, not a network error.
    const aborted = await keel.sessions.list({}, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect((aborted as Error).name).toBe('AbortError');
  });

  it('sends its own fetch and headers', async () => {
    const seen: Array<{ method: string; path: string; key: string | null; trace: string | null }> = [];
    const traced = createKeelClient({
      baseUrl: srv.url,
      apiKey: srv.secrets[0],
      headers: { 'x-trace': 't-1' },
      fetch: (request) => {
        seen.push({
          method: request.method,
          path: new URL(request.url).pathname,
          key: request.headers.get('idempotency-key'),
          trace: request.headers.get('x-trace'),
        });
        return fetch(request);
      },
    });
    const s = await traced.sessions.create({}, { idempotencyKey: 'create-once' });
    const again = await traced.sessions.create({}, { idempotencyKey: 'create-once' });
    expect(again.id).toBe(s.id);
    expect(seen).toEqual([
      { method: 'POST', path: '/v1/sessions', key: 'create-once', trace: 't-1' },
      { method: 'POST', path: '/v1/sessions', key: 'create-once', trace: 't-1' },
    ]);
  });
});
