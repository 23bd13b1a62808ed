/**
 * Streams across a server restart, on a database file: the server goes away in the middle of a
 * streamed message (closed gracefully, or its process killed), a new server on the same file (and
 * port) recovers the run, and clients resume with Last-Event-ID (an EventSource on its own). The
 * durable events they received are exactly the log; the deltas lost with the old server are
 * replaced by the durable message, whose text is complete.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { tempDbPath } from '../support/session-helpers.ts';
import {
  checkAgainstLog,
  expectedTexts,
  Gate,
  logOf,
  longAgent,
  messageText,
  ResumingClient,
  spawnServer,
  startRun,
  startTestServer,
  stepChunks,
  waitForRun,
  type ChildServer,
  type LongScript,
  type TestServer,
} from '../support/sse-helpers.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A server on `path`, on `port` if it is free again, else on another one. */
async function restart(
  o: Parameters<typeof startTestServer>[0] & { port: number },
): Promise<{ t: TestServer; samePort: boolean }> {
  try {
    return { t: await startTestServer(o), samePort: true };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
    return { t: await startTestServer({ ...o, port: 0 }), samePort: false };
  }
}

/** Points clients at the new server: an EventSource reconnects by itself to the same address; to a new one, from its last id. */
function follow(clients: ResumingClient[], from: string, to: string): void {
  if (from === to) return;
  for (const c of clients) {
    c.streamUrl = c.streamUrl.replace(from, to);
    c.open('header');
  }
}

const textDeltas = (c: ResumingClient, step: number) =>
  c.deltas.filter((d) => d.delta.step === step && d.delta.type === 'text/delta');

describe('SSE across a server restart', () => {
  it('server.close() mid-message; a new server on the same file and port finishes the run; clients resume from Last-Event-ID', async () => {
    const db = tempDbPath();
    cleanups.push(db.cleanup);
    const script: LongScript = { toolSteps: 3, chunks: 20, chunkDelayMs: 2 };
    const gate = new Gate();
    const held = gate.hold(2, 8);
    const t1 = await startTestServer({ agents: [longAgent(script, { gate })], path: db.path, leaseMs: 1000 });
    cleanups.push(() => t1.close());
    const { sessionId, runId } = await startRun(t1.url);
    // The session client's EventSource reconnects by itself; the run client is reopened by the test.
    const client = new ResumingClient(`${t1.url}/v1/sessions/${sessionId}/stream`).open();
    const runClient = new ResumingClient(`${t1.url}/v1/runs/${runId}/stream`).open();
    cleanups.push(
      () => client.close(),
      () => runClient.close(),
    );
    await held.reached;
    await client.waitFor(() => textDeltas(client, 2).length === 8);
    await runClient.waitFor(() => textDeltas(runClient, 2).length === 8);

    // Close: connections end at once; the worker finishes the step it is in (no one sees its
    // remaining deltas) and hands the run back.
    const closing = t1.close(30_000);
    held.release();
    await closing;

    const { t: t2 } = await restart({
      agents: [longAgent(script)],
      path: db.path,
      port: t1.server.port,
      leaseMs: 1000,
    });
    cleanups.push(() => t2.close());
    follow([client], t1.url, t2.url);
    runClient.streamUrl = runClient.streamUrl.replace(t1.url, t2.url);
    runClient.open('header');

    const run = await waitForRun(t2.url, runId);
    expect(run.status).toBe('completed');
    const log = await logOf(t2.url, sessionId);
    await client.waitFor(() => client.events.at(-1)?.seq === log.at(-1)!.seq);
    await runClient.waitFor(() => runClient.ended);

    const texts = expectedTexts(script);
    expect(log.filter((e) => e.type === 'assistant/message').map(messageText)).toEqual(texts);
    // The old worker handed the run back at a step boundary; the new server's worker took it over.
    const statuses = log.filter((e) => e.type === 'run/status').map((e) => (e.data as { to: string }).to);
    expect(statuses).toEqual(['queued', 'running', 'queued', 'running', 'completed']);
    for (const [c, l] of [
      [client, log],
      [runClient, log.filter((e) => e.run_id === runId)],
    ] as const) {
      const summary = checkAgainstLog(c.items, l);
      expect(summary.messages).toBe(texts.length);
      // The held message: only its first deltas arrived, its durable version is whole.
      expect(
        textDeltas(c, 2)
          .map((d) => d.delta.delta)
          .join(''),
      ).toBe(stepChunks(2, script).slice(0, 8).join(''));
      expect(c.events.filter((e) => e.type === 'assistant/message').map(messageText)[1]).toBe(texts[1]);
      expect(c.connections).toBeGreaterThanOrEqual(2);
    }
  }, 90_000);

  it('the server process is killed mid-message; a new server recovers the run after its lease; an EventSource resumes by itself', async () => {
    const db = tempDbPath();
    cleanups.push(db.cleanup);
    const script: LongScript = { toolSteps: 3, chunks: 30, chunkDelayMs: 3 };
    // The old process streams step 2 up to its 6th chunk and stops there: it dies mid-message.
    let child: ChildServer | undefined = await spawnServer({
      path: db.path,
      script,
      leaseMs: 1000,
      hold: { step: 2, chunk: 6 },
    });
    cleanups.push(() => {
      child?.child.kill('SIGKILL');
    });
    const url1 = child.url;
    const { sessionId, runId } = await startRun(url1);
    const client = new ResumingClient(`${url1}/v1/sessions/${sessionId}/stream`).open();
    const runClient = new ResumingClient(`${url1}/v1/runs/${runId}/stream`).open();
    cleanups.push(
      () => client.close(),
      () => runClient.close(),
    );
    await client.waitFor(() => textDeltas(client, 2).length === 6);
    await runClient.waitFor(() => textDeltas(runClient, 2).length === 6);

    child.child.kill('SIGKILL');
    await child.exited;
    child = undefined;

    const { t } = await restart({
      agents: [longAgent(script)],
      path: db.path,
      port: Number(new URL(url1).port),
      leaseMs: 1000,
    });
    cleanups.push(() => t.close());
    // Same address: both EventSources reconnect on their own, with their Last-Event-ID.
    follow([client, runClient], url1, t.url);

    const run = await waitForRun(t.url, runId);
    expect(run.status).toBe('completed');
    const log = await logOf(t.url, sessionId);
    await client.waitFor(() => client.events.at(-1)?.seq === log.at(-1)!.seq);
    await runClient.waitFor(() => runClient.ended);
    client.close();

    const texts = expectedTexts(script);
    // Recovered after the lease expired: the step the process died in ran again, whole.
    expect(log.filter((e) => e.type === 'run/interrupted')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'assistant/message').map(messageText)).toEqual(texts);
    for (const [c, l] of [
      [client, log],
      [runClient, log.filter((e) => e.run_id === runId)],
    ] as const) {
      const summary = checkAgainstLog(c.items, l);
      expect(summary.messages).toBe(texts.length);
      // The message the old process was streaming never became durable: its deltas (a prefix)
      // are all the client has of it; the step's durable message, streamed again, is complete.
      expect(summary.abandoned.map((a) => a.text)).toEqual([stepChunks(2, script).slice(0, 6).join('')]);
      expect(c.events.filter((e) => e.type === 'assistant/message').map(messageText)[1]).toBe(texts[1]);
      expect(c.connections).toBeGreaterThanOrEqual(2);
    }
  }, 90_000);
});
