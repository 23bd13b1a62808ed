/**
 * Resumable SSE streams against a real server and a WHATWG EventSource client: clients that drop
 * the connection at many points (in the middle of streamed messages too) and resume with
 * Last-Event-ID or `?after=` receive the log exactly, and each message's deltas once; run streams
 * end; a client going away never stops its run; idle streams get heartbeats; a client that does
 * not read is dropped (and resumes from the log) instead of holding the server's memory.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  api,
  checkAgainstLog,
  expectedTexts,
  getRun,
  Gate,
  logOf,
  longAgent,
  messageText,
  metric,
  parseSse,
  rawStream,
  ResumingClient,
  startRun,
  startTestServer,
  until,
  waitForRun,
  type DeltaJson,
  type EventJson,
  type LongScript,
  type Received,
  type TestServer,
} from '../support/sse-helpers.ts';

const isStatus = (e: EventJson, to: string) => e.type === 'run/status' && (e.data as { to: string }).to === to;

/** Follows a stream to its end, dropping the connection after every `every` items (alternating Last-Event-ID and ?after=). */
async function followWithDrops(client: ResumingClient, every: number, done: () => boolean): Promise<void> {
  let reconnects = 0;
  client.open();
  while (!done()) {
    await client.waitFor(() => done() || client.count() >= every);
    if (done()) break;
    client.open(++reconnects % 2 === 0 ? 'header' : 'query');
  }
  client.close();
}

describe('SSE: reconnecting at many points', () => {
  // Four tool steps and a final answer, each streamed in 30 chunks.
  const script: LongScript = { toolSteps: 4, chunks: 30, chunkDelayMs: 8 };
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ agents: [longAgent(script)], heartbeatMs: 60_000 });
  });
  afterAll(() => t.close());

  it('a client dropping after every k items (k = 1..13, and never) receives the log exactly and every delta once, on session and run streams', async () => {
    const ks = [1, 2, 3, 4, 5, 7, 9, 13, Infinity];
    const settled = await Promise.allSettled(
      ks.flatMap((k) =>
        (['session', 'run'] as const).map(async (kind) => {
          const { sessionId, runId } = await startRun(t.url);
          const client = new ResumingClient(
            kind === 'session' ? `${t.url}/v1/sessions/${sessionId}/stream` : `${t.url}/v1/runs/${runId}/stream`,
          );
          let last = -1;
          // A session stream has no end: follow it until it delivered the log's last event after the run ended.
          const done = () => client.ended || (kind === 'session' && client.events.at(-1)?.seq === last);
          const watcher = (async () => {
            await waitForRun(t.url, runId);
            last = (await logOf(t.url, sessionId)).at(-1)!.seq;
            client.notify();
          })();
          await followWithDrops(client, k, done);
          await watcher;
          const log = await logOf(t.url, sessionId, kind === 'run' ? runId : undefined);
          const summary = checkAgainstLog(client.items, log);
          if (kind === 'run') {
            const end = client.items.at(-1)!;
            expect(end.kind).toBe('end');
            expect(end.kind === 'end' && end.data).toEqual({ run_id: runId, last_seq: log.at(-1)!.seq });
          }
          // Every message is in the log with its whole text.
          expect(log.filter((e) => e.type === 'assistant/message').map(messageText)).toEqual(expectedTexts(script));
          if (k === Infinity) {
            // One connection: every delta of every message, nothing else.
            expect(client.connections).toBe(1);
            expect(summary.messages).toBe(script.toolSteps + 1);
            expect(
              client.deltas
                .filter((d) => d.delta.type === 'text/delta')
                .map((d) => d.delta.delta)
                .join(''),
            ).toBe(expectedTexts(script).join(''));
          }
          return { k, kind, connections: client.connections, ...summary };
        }),
      ),
    );
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const results = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    // Many connections were dropped in the middle of a message that still arrived whole.
    expect(results.reduce((n, r) => n + r.connections, 0)).toBeGreaterThan(200);
    expect(results.reduce((n, r) => n + r.completedAcrossReconnects, 0)).toBeGreaterThan(0);
  }, 180_000);
});

describe('SSE: in the middle of a streamed message', () => {
  const script: LongScript = { toolSteps: 2, chunks: 24, chunkDelayMs: 2 };
  const gate = new Gate();
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ agents: [longAgent(script, { gate })], heartbeatMs: 60_000 });
  });
  afterAll(async () => {
    gate.releaseAll();
    await t.close();
  });

  it('reconnects (Last-Event-ID, ?after=, from a durable event id) while a message is held mid-stream get exactly the missing deltas', async () => {
    const first = gate.hold(2, 8);
    const second = gate.hold(2, 16);
    const { sessionId, runId } = await startRun(t.url);
    const client = new ResumingClient(`${t.url}/v1/sessions/${sessionId}/stream`).open();
    const runClient = new ResumingClient(`${t.url}/v1/runs/${runId}/stream`).open();
    await first.reached;
    const step2 = (c: ResumingClient) => c.deltas.filter((d) => d.delta.step === 2 && d.delta.type === 'text/delta');
    await client.waitFor(() => step2(client).length === 8);
    await runClient.waitFor(() => step2(runClient).length === 8);
    // Step 2's events are published when it commits, after its deltas (ADR-0008): the deltas
    // count from the latest durable event, step 1's end.
    const anchor = client.events.at(-1)!;
    expect(anchor.type).toBe('step/end');
    expect(client.lastId).toBe(`${anchor.seq}.8`);

    // Reconnect at once from the last delta: nothing new yet, nothing repeated.
    client.open('header');
    runClient.open('query');
    // A new client from that event (a durable event id) gets the 8 deltas so far.
    const late = new ResumingClient(`${t.url}/v1/sessions/${sessionId}/stream`).open('query', String(anchor.seq));
    await late.waitFor(() => late.deltas.length === 8);
    expect(late.deltas.map((d) => d.id)).toEqual(Array.from({ length: 8 }, (_, i) => `${anchor.seq}.${i + 1}`));

    first.release();
    await second.reached;
    await client.waitFor(() => step2(client).length === 16);
    client.open('query');
    runClient.open('header');
    second.release();

    await waitForRun(t.url, runId);
    const log = await logOf(t.url, sessionId);
    await client.waitFor(() => client.events.at(-1)?.seq === log.at(-1)!.seq);
    await runClient.waitFor(() => runClient.ended);
    await late.waitFor(() => late.events.at(-1)?.seq === log.at(-1)!.seq);
    for (const c of [client, runClient, late]) c.close();

    for (const [c, l] of [
      [client, log],
      [late, log.filter((e) => e.seq > anchor.seq)],
      [runClient, log.filter((e) => e.run_id === runId)],
    ] as const) {
      const summary = checkAgainstLog(c.items, l);
      expect(summary.messages).toBe(c === late ? 2 : 3);
    }
    // The held message streamed over three connections and arrived whole, each delta once.
    const text2 = expectedTexts(script)[1]!;
    expect(
      step2(client)
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(text2);
    expect(new Set(step2(client).map((d) => d.conn)).size).toBe(3);
    expect(
      step2(runClient)
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(text2);
    expect(
      step2(late)
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(text2);
  });

  it('a durable event that comes while a message streams (the session is archived) is neither repeated nor makes deltas go missing on resume', async () => {
    const first = gate.hold(1, 5);
    const second = gate.hold(1, 12);
    const { sessionId, runId } = await startRun(t.url);
    const client = new ResumingClient(`${t.url}/v1/sessions/${sessionId}/stream`).open();
    const runClient = new ResumingClient(`${t.url}/v1/runs/${runId}/stream`).open();
    await first.reached;
    await client.waitFor(() => client.deltas.length === 5);
    await runClient.waitFor(() => runClient.deltas.length === 5);

    await api(t.url, `/v1/sessions/${sessionId}`, { method: 'DELETE' });
    await client.waitFor(() => client.events.some((e) => e.type === 'session/archived'));
    const archived = client.events.find((e) => e.type === 'session/archived')!;
    // Resume from the event that came mid-message: the deltas after it still come.
    expect(client.lastId).toBe(String(archived.seq));
    client.open('header');
    first.release();
    await second.reached;
    await client.waitFor(() => client.deltas.length === 12);
    await runClient.waitFor(() => runClient.deltas.length === 12);
    // Deltas after the event count from it, so resuming from one does not replay the event.
    expect(client.lastId).toBe(`${archived.seq}.7`);
    client.open('query');
    runClient.open('header');
    second.release();

    await waitForRun(t.url, runId);
    const log = await logOf(t.url, sessionId);
    await client.waitFor(() => client.events.at(-1)?.seq === log.at(-1)!.seq);
    await runClient.waitFor(() => runClient.ended);
    client.close();
    checkAgainstLog(client.items, log);
    checkAgainstLog(
      runClient.items,
      log.filter((e) => e.run_id === runId),
    );
    const text1 = expectedTexts(script)[0]!;
    expect(
      client.deltas
        .filter((d) => d.delta.step === 1 && d.delta.type === 'text/delta')
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(text1);
    expect(
      runClient.deltas
        .filter((d) => d.delta.step === 1 && d.delta.type === 'text/delta')
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(text1);
  });
});

describe('SSE: run streams end, clients come and go', () => {
  const script: LongScript = { toolSteps: 2, chunks: 12, chunkDelayMs: 2 };
  const gate = new Gate();
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ agents: [longAgent(script, { gate })], heartbeatMs: 60_000 });
  });
  afterAll(async () => {
    gate.releaseAll();
    await t.close();
  });

  it('the stream of a run that already ended sends the rest and `end`, then closes, from any position', async () => {
    const { sessionId, runId } = await startRun(t.url);
    await waitForRun(t.url, runId);
    const log = await logOf(t.url, sessionId, runId);
    const lastSeq = log.at(-1)!.seq;
    for (const from of [undefined, String(log[3]!.seq), `${log[5]!.seq}.2`, String(lastSeq)]) {
      const raw = await rawStream(
        `${t.url}/v1/runs/${runId}/stream`,
        from !== undefined ? { 'last-event-id': from } : {},
      );
      await raw.closed; // the server closes it: it never hangs
      const { blocks } = parseSse(raw.text());
      const after = from === undefined ? 0 : Number(from.split('.')[0]);
      expect(blocks.filter((b) => b.event === undefined).map((b) => Number(b.id))).toEqual(
        log.filter((e) => e.seq > after).map((e) => e.seq),
      );
      expect(blocks.filter((b) => b.event === 'delta')).toEqual([]);
      expect(blocks.at(-1)).toEqual({ event: 'end', data: JSON.stringify({ run_id: runId, last_seq: lastSeq }) });
    }
    // And an EventSource client gets its `end` too.
    const client = new ResumingClient(`${t.url}/v1/runs/${runId}/stream`).open();
    await client.waitFor(() => client.ended);
    checkAgainstLog(client.items, log);
  });

  it('a run stream that is open when the run ends gets `end` and the server closes it', async () => {
    const held = gate.hold(3, 4);
    const { runId } = await startRun(t.url);
    const raw = await rawStream(`${t.url}/v1/runs/${runId}/stream`);
    await held.reached;
    await until(() => parseSse(raw.text()).blocks.filter((b) => b.event === 'delta').length >= 4);
    held.release();
    await raw.closed;
    expect(parseSse(raw.text()).blocks.at(-1)!.event).toBe('end');
    expect((await waitForRun(t.url, runId)).status).toBe('completed');
  });

  it('clients that go away (closed, destroyed) mid-message never cancel the run', async () => {
    const held = gate.hold(2, 6);
    const { sessionId, runId } = await startRun(t.url);
    const es = new ResumingClient(`${t.url}/v1/runs/${runId}/stream`).open();
    const esSession = new ResumingClient(`${t.url}/v1/sessions/${sessionId}/stream`).open();
    const raw = await rawStream(`${t.url}/v1/sessions/${sessionId}/stream`);
    await held.reached;
    await es.waitFor(() => es.deltas.filter((d) => d.delta.step === 2).length >= 6);
    await esSession.waitFor(() => esSession.deltas.filter((d) => d.delta.step === 2).length >= 6);
    es.close();
    esSession.close();
    raw.destroy();
    await until(async () => (await metric(t.url, 'keel_sse_connections')) === 0);
    held.release();
    const run = await waitForRun(t.url, runId);
    expect(run.status).toBe('completed');
    const log = await logOf(t.url, sessionId);
    expect(log.filter((e) => e.type === 'assistant/message').map(messageText)).toEqual(expectedTexts(script));
    expect(log.filter((e) => isStatus(e, 'cancelled'))).toEqual([]);
  });
});

describe('SSE: events committed without a live notice', () => {
  it("a worker's claim of the run (committed, never published) still reaches clients that were following, in order", async () => {
    const script: LongScript = { toolSteps: 1, chunks: 5, chunkDelayMs: 1 };
    // No worker at first: the run waits, queued, while clients connect.
    const t = await startTestServer({ agents: [longAgent(script)], workers: 0, heartbeatMs: 60_000 });
    try {
      const { sessionId, runId } = await startRun(t.url);
      const client = new ResumingClient(`${t.url}/v1/sessions/${sessionId}/stream`).open();
      const runClient = new ResumingClient(`${t.url}/v1/runs/${runId}/stream`).open();
      await client.waitFor(() => client.events.some((e) => isStatus(e, 'queued')));
      await runClient.waitFor(() => runClient.events.some((e) => isStatus(e, 'queued')));
      const worker = t.server.runtime.startWorker({ concurrency: 1 });
      try {
        await waitForRun(t.url, runId);
      } finally {
        await worker.stop();
      }
      const log = await logOf(t.url, sessionId);
      await client.waitFor(() => client.events.at(-1)?.seq === log.at(-1)!.seq);
      await runClient.waitFor(() => runClient.ended);
      client.close();
      expect(client.connections).toBe(1);
      expect(runClient.connections).toBe(1);
      expect(client.events.filter((e) => isStatus(e, 'running'))).toHaveLength(1);
      checkAgainstLog(client.items, log);
      checkAgainstLog(
        runClient.items,
        log.filter((e) => e.run_id === runId),
      );
    } finally {
      await t.close();
    }
  });
});

describe('SSE: heartbeats and slow clients', () => {
  it('an idle stream gets heartbeat comments (which an EventSource ignores)', async () => {
    const t = await startTestServer({
      agents: [longAgent({ toolSteps: 0, chunks: 1, chunkDelayMs: 0 })],
      heartbeatMs: 20,
    });
    try {
      const s = await api<{ id: string }>(t.url, '/v1/sessions', { body: {} });
      const raw = await rawStream(`${t.url}/v1/sessions/${s.id}/stream`);
      const client = new ResumingClient(`${t.url}/v1/sessions/${s.id}/stream`).open();
      await until(() => parseSse(raw.text()).comments.filter((c) => c === 'keep-alive').length >= 3);
      const { blocks, comments } = parseSse(raw.text());
      // Only the session's creation event, then heartbeats.
      expect(blocks.map((b) => b.id)).toEqual(['1']);
      expect(new Set(comments)).toEqual(new Set(['keep-alive']));
      expect(client.events.map((e) => e.type)).toEqual(['session/created']);
      expect(client.errors).toBe(0);
      raw.destroy();
      client.close();
    } finally {
      await t.close();
    }
  });

  it('a client that does not read is dropped when it falls sseQueueLimit items behind (its queue freed), and resumes from the log', async () => {
    // Steps of 200 chunks of 2 KB go on until the test saw the drop: enough to fill the socket
    // buffers, after which the server's writes to the client block and its queue fills.
    let dropped = false;
    let stepsAfterDrop = 0;
    const script: LongScript = { toolSteps: 0, chunks: 200, chunkDelayMs: 1, chunkChars: 2000 };
    const more = (step: number) => {
      if (dropped) stepsAfterDrop++;
      return step < 80 && stepsAfterDrop < 3;
    };
    const t = await startTestServer({ agents: [longAgent(script, { more })], heartbeatMs: 10, sseQueueLimit: 16 });
    try {
      const { sessionId, runId } = await startRun(t.url);
      const raw = await rawStream(`${t.url}/v1/sessions/${sessionId}/stream`, {}, { read: false });
      await until(
        async () =>
          (await metric(t.url, 'keel_sse_connections')) === 0 ||
          ['completed', 'failed'].includes((await getRun(t.url, runId)).status),
        25,
      );
      dropped = true;
      expect(await metric(t.url, 'keel_sse_connections')).toBe(0);
      // The run goes on (three more steps after the test saw the drop) without the server holding anything for the client.
      const run = await waitForRun(t.url, runId);
      expect(run.status).toBe('completed');
      expect(stepsAfterDrop).toBeGreaterThanOrEqual(3);
      expect(await metric(t.url, 'keel_sse_connections')).toBe(0);

      // The client reads what reached it, sees the connection end, and resumes from its last id.
      let text = '';
      raw.res.on('data', (c: string) => (text += c));
      raw.res.resume();
      await raw.closed;
      const got = parseSse(text).blocks.map((b): Exclude<Received, { kind: 'end' }> =>
        b.event === 'delta'
          ? { kind: 'delta', id: b.id!, conn: 1, delta: JSON.parse(b.data) as DeltaJson }
          : { kind: 'event', id: b.id!, conn: 1, event: JSON.parse(b.data) as EventJson },
      );
      // What reached the client before the drop is a gap-free start of the log (its last block may be cut).
      expect(got.length).toBeGreaterThan(16);
      expect(got.filter((i) => i.kind === 'event').map((i) => Number(i.id))).toEqual(
        Array.from({ length: got.filter((i) => i.kind === 'event').length }, (_, i) => i + 1),
      );
      const log = await logOf(t.url, sessionId);
      const client = new ResumingClient(`${t.url}/v1/sessions/${sessionId}/stream`);
      client.items.push(...got);
      client.connections = 1;
      client.open('header', got.at(-1)!.id);
      await client.waitFor(() => client.events.at(-1)?.seq === log.at(-1)!.seq);
      client.close();
      const summary = checkAgainstLog(client.items, log);
      expect(summary.messages).toBe(log.filter((e) => e.type === 'assistant/message').length);
    } finally {
      await t.close();
    }
  }, 120_000);
});
