/**
 * `follow()` across dropped connections, on both backends: the items it yields are the session
 * log's events, each once and in order (checked against `GET /v1/sessions/{id}/events`), with the
 * deltas between them at most once each and without a gap, whether the connection is cut mid-stream again and again (a fetch
 * that errors the body after a few chunks) or the server goes away and comes back (a restart on
 * the same port and store). It resumes by itself, with the id of the last item as Last-Event-ID.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKeelClient,
  KeelProblem,
  type FollowConnection,
  type FollowItem,
  type KeelClient,
  type KeelEvent,
  type KeelFollow,
  type Run,
  type RunStatus,
} from '../../src/client/index.ts';
import { comparePositions, parsePosition } from '../../src/session/feed-position.ts';
import { BACKENDS, startTestServer, type TestServer } from '../support/server-helpers.ts';

/** Every item of an async iterable (Array.fromAsync is not in the ES2023 library). */
async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** Every event of the session's log, paged. */
async function logOf(keel: KeelClient, sessionId: string): Promise<KeelEvent[]> {
  const out: KeelEvent[] = [];
  for (let cursor: string | undefined; ;) {
    const page = await keel.sessions.events(sessionId, { limit: 1000, ...(cursor ? { cursor } : {}) });
    out.push(...page.data);
    if (page.next_cursor === null) return out;
    cursor = page.next_cursor;
  }
}

async function until(keel: KeelClient, runId: string, ...statuses: RunStatus[]): Promise<Run> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const run = await keel.runs.get(runId);
    if (statuses.includes(run.status)) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} is ${run.status}, not ${statuses.join('|')}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function eventually(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The ids of the items, in order, are strictly increasing feed positions: no item twice, none out of order. */
function expectIncreasing(items: FollowItem[]): void {
  const ids = items.flatMap((i) => (i.kind === 'end' ? [] : [i.id]));
  for (let k = 1; k < ids.length; k++) {
    const [a, b] = [parsePosition(ids[k - 1]), parsePosition(ids[k])];
    expect(a && b && comparePositions(a, b) < 0, `${ids[k - 1]} then ${ids[k]}`).toBe(true);
  }
}

/** Every delta of each event's run of deltas, `seq.1` to `seq.n` without a gap. */
function expectDeltasWithoutGaps(items: FollowItem[]): void {
  const bySeq = new Map<number, number[]>();
  for (const i of items) {
    if (i.kind !== 'delta') continue;
    const p = parsePosition(i.id)!;
    bySeq.set(p.seq, [...(bySeq.get(p.seq) ?? []), p.n]);
  }
  for (const [seq, ns] of bySeq) expect(ns, `the deltas after ${seq}`).toEqual(ns.map((_, k) => k + 1));
}

/**
 * A fetch whose stream bodies break after a number of bytes (`cuts`, in turn), often in the middle
 * of a message, as a connection that drops mid-stream: the body errors, as undici's does when the
 * socket closes.
 */
function cuttingFetch(cuts: number[]) {
  const connections: Array<{ lastEventId: string | null }> = [];
  const f = async (request: Request): Promise<Response> => {
    const res = await fetch(request);
    if (!new URL(request.url).pathname.endsWith('/stream') || !res.body || !res.ok) return res;
    let left = cuts[connections.length % cuts.length]!;
    connections.push({ lastEventId: request.headers.get('last-event-id') });
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (left <= 0) {
          await reader.cancel();
          controller.error(new TypeError('terminated: the test cut the connection'));
          return;
        }
        const { value, done } = await reader.read();
        if (done) return controller.close();
        controller.enqueue(value.subarray(0, left));
        left -= value.length;
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { fetch: f, connections };
}

const WORDS = Array.from({ length: 40 }, (_, k) => `w${k + 1}`).join(' ');
const FAST = { initialDelayMs: 1, maxDelayMs: 20 };

describe.each(BACKENDS)('follow() (%s)', (backend) => {
  let srv: TestServer;
  let keel: KeelClient;
  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }] });
    keel = createKeelClient({ baseUrl: srv.url, apiKey: srv.secrets[0] });
  });
  afterAll(() => srv?.close());

  it('a run cut mid-stream again and again: every event of the run once, in order; every delta once', async () => {
    const cutting = cuttingFetch([300, 120, 4096, 200, 500]);
    const flaky = createKeelClient({ baseUrl: srv.url, apiKey: srv.secrets[0], fetch: cutting.fetch });
    const session = await keel.sessions.create();
    const { run } = await keel.sessions.send(session.id, `slow:${WORDS}`);

    // Each reconnect sends the id of the last item yielded before it.
    const expectedIds: Array<string | null> = [];
    const lost: FollowConnection[] = [];
    const follower: KeelFollow = flaky.runs.follow(run.id, {
      retry: FAST,
      onConnection: (c) => {
        if (c.state !== 'lost') return;
        lost.push(c);
        expectedIds.push(follower.lastEventId ?? null);
      },
    });
    const items = await collect(follower);

    expect(items.at(-1)).toMatchObject({ kind: 'end', runId: run.id });
    const log = (await logOf(keel, session.id)).filter((e) => e.run_id === run.id);
    const events = items.flatMap((i) => (i.kind === 'event' ? [i.event] : []));
    expect(events.map((e) => e.seq)).toEqual(log.map((e) => e.seq));
    expect(events).toEqual(log);
    expectIncreasing(items);
    expectDeltasWithoutGaps(items);
    // The answer's deltas, as far as they came before its durable message (the server sends none
    // after it: a reconnect past the message gets the message, which holds the whole text).
    const answer = events.findLast((e) => e.type === 'assistant/message')!;
    expect(JSON.stringify(answer.data)).toContain(WORDS);
    const text = items.flatMap((i) => (i.kind === 'delta' && i.delta.type === 'text/delta' ? [i.delta.delta] : []));
    expect(text.length).toBeGreaterThan(0);
    expect(WORDS.startsWith(text.join(''))).toBe(true);

    // It was cut many times, and each time resumed from where it was.
    expect(lost.length).toBeGreaterThanOrEqual(5);
    expect(lost.every((c) => c.state === 'lost' && c.error instanceof Error)).toBe(true);
    expect(cutting.connections.length).toBe(lost.length + 1);
    expect(cutting.connections.map((c) => c.lastEventId)).toEqual([null, ...expectedIds]);
    expect(follower.lastEventId).toBe(items.findLast((i) => i.kind !== 'end')!.id);
  });

  it('a session across a server restart: it reconnects by itself, and its events are the log', async () => {
    const session = await keel.sessions.create();
    const stop = new AbortController();
    const states: string[] = [];
    const items: FollowItem[] = [];
    const follower = keel.sessions.follow(session.id, {
      signal: stop.signal,
      retry: { initialDelayMs: 50, maxDelayMs: 500 },
      onConnection: (c) => states.push(c.state),
    });
    const done = (async () => {
      for await (const item of follower) items.push(item);
    })();
    const statusOf = (runId: string) =>
      items.findLast(
        (i): i is Extract<FollowItem, { kind: 'event' }> =>
          i.kind === 'event' && i.event.type === 'run/status' && i.event.run_id === runId,
      )?.event.data as { to?: string } | undefined;

    const { run } = await keel.sessions.send(session.id, 'danger:restart');
    await eventually('the approval on the stream', () => statusOf(run.id)?.to === 'waiting_approval');

    // The server goes away while the run waits, and comes back on the same port and store.
    await srv.restart();
    const approval = (await until(keel, run.id, 'waiting_approval')).waiting!.requests[0]!;
    await keel.runs.approve(run.id, approval.approval_id);
    await eventually('the end of the run on the stream', () => statusOf(run.id)?.to === 'completed');

    // More of the session after the restart: a second run.
    const second = (await keel.sessions.send(session.id, 'after the restart')).run;
    await eventually('the second run on the stream', () => statusOf(second.id)?.to === 'completed');
    stop.abort();
    await done; // an abort ends it without an error

    const events = items.flatMap((i) => (i.kind === 'event' ? [i.event] : []));
    const log = await logOf(keel, session.id);
    expect(events.map((e) => e.seq)).toEqual(log.map((e) => e.seq));
    expect(events.map((e) => e.seq)).toEqual(log.map((_, k) => k + 1));
    expectIncreasing(items);
    expect(states[0]).toBe('open');
    expect(states.indexOf('lost')).toBeGreaterThan(0);
    expect(states.at(-1)).toBe('open');
    expect(srv.dangerRuns).toContainEqual({ target: 'restart' });
  });

  it('starts after a given id, ends with a 4xx problem, stops when aborted or left, drops a stalled connection', async () => {
    const session = await keel.sessions.create();
    const { run } = await keel.sessions.send(session.id, 'hello');
    await until(keel, run.id, 'completed');
    const log = await logOf(keel, session.id);

    // After an id: only what comes after it.
    const rest = await collect(keel.runs.follow(run.id, { after: '3' }));
    expect(rest.flatMap((i) => (i.kind === 'event' ? [i.event.seq] : []))).toEqual(
      log.filter((e) => e.seq > 3 && e.run_id === run.id).map((e) => e.seq),
    );
    expect(() => keel.runs.follow(run.id, { after: 'yesterday' })).toThrow(/after must be an event id/);

    // An unknown run, another tenant's key: final, no retry.
    const missing = await collect(keel.runs.follow('run_nope', { retry: FAST })).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(KeelProblem);
    expect(missing).toMatchObject({ type: 'not_found', status: 404 });
    const anonymous = createKeelClient({ baseUrl: srv.url });
    const refused = await collect(anonymous.sessions.follow(session.id)).catch((e: unknown) => e);
    expect(refused).toMatchObject({ type: 'unauthorized', status: 401 });

    // A session stream does not end by itself: the caller's break or abort ends it.
    const seen: number[] = [];
    for await (const item of keel.sessions.follow(session.id, { onEvent: (i) => i.kind === 'event' && seen.push(1) }))
      if (item.kind === 'event' && item.event.seq === log.length) break;
    expect(seen.length).toBe(log.length);
    const stop = new AbortController();
    const aborted = collect(keel.sessions.follow(session.id, { signal: stop.signal }));
    setTimeout(() => stop.abort(), 50);
    expect((await aborted).filter((i) => i.kind === 'event').length).toBe(log.length);

    // A connection that stalls (no byte, not even a keep-alive) counts as dropped after idleTimeoutMs.
    let streams = 0;
    const stalling = createKeelClient({
      baseUrl: srv.url,
      apiKey: srv.secrets[0],
      fetch: async (request) => {
        if (!new URL(request.url).pathname.endsWith('/stream') || streams++ > 0) return fetch(request);
        return new Response(new ReadableStream<Uint8Array>(), { headers: { 'content-type': 'text/event-stream' } });
      },
    });
    const states: string[] = [];
    const resumed = await collect(
      stalling.runs.follow(run.id, {
        idleTimeoutMs: 200,
        retry: FAST,
        onConnection: (c) => states.push(c.state === 'lost' ? `lost: ${(c.error as Error).message}` : c.state),
      }),
    );
    expect(states).toEqual(['open', 'lost: no data for 200 ms', 'open']);
    expect(resumed.flatMap((i) => (i.kind === 'event' ? [i.event.seq] : []))).toEqual(
      log.filter((e) => e.run_id === run.id).map((e) => e.seq),
    );

    // Nobody there: it keeps trying (reporting each loss) until its attempts run out.
    const down = createKeelClient({ baseUrl: 'http://127.0.0.1:9' });
    const losses: FollowConnection[] = [];
    const failed = await collect(
      down.sessions.follow('x', { retry: { ...FAST, maxAttempts: 3 }, onConnection: (c) => losses.push(c) }),
    ).catch((e: unknown) => e);
    expect((failed as Error).name).toBe('KeelNetworkError');
    expect(losses.map((c) => c.state)).toEqual(['lost', 'lost']);
  });
});
