/**
 * `keel serve --workers 0` and a `keel worker` elsewhere: the API process streams what the worker
 * process writes. Its session log notices other processes' commits (the file's local bus, and
 * SQLite's data_version for processes off it) and publishes them, so a run's SSE stream goes on
 * past `queued` and ends with `end`; and the worker's token deltas reach it live, through the
 * local bus, before the commit of their message (ADR-0035).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defineAgent, ScriptedModel } from '../../src/index.ts';
import type { StreamingWorkerMessage } from '../runs/fixtures/streaming-worker.ts';
import {
  api,
  checkAgainstLog,
  expectedTexts,
  logOf,
  longAgent,
  rawStream,
  ResumingClient,
  startRun,
  startTestServer,
  waitForRun,
  type LongScript,
  type RunJson,
  type TestServer,
} from '../support/sse-helpers.ts';

const WORKER = join(import.meta.dirname, '..', 'runs', 'fixtures', 'remote-worker.ts');
const STREAMING_WORKER = join(import.meta.dirname, '..', 'runs', 'fixtures', 'streaming-worker.ts');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('an API process without workers streams what a worker process writes', () => {
  it("GET /v1/runs/{id}/stream follows the run through another process's steps and ends with `end`", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-xproc-'));
    const path = join(dir, 'keel.db');
    // The API: no worker. Its agent `a` has the worker's name (it only sends to it).
    const srv: TestServer = await startTestServer({
      agents: [defineAgent({ name: 'a', model: new ScriptedModel([]) })],
      path,
      workers: 0,
    });
    const child: ChildProcess = spawn(process.execPath, [WORKER, path], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    cleanups.push(async () => {
      child.send('stop');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
      await srv.close(0);
      rmSync(dir, { recursive: true, force: true });
    });
    await new Promise<void>((resolve) => child.once('message', () => resolve()));

    const s = await api<{ id: string }>(srv.url, '/v1/sessions', { body: {} });
    const sent = await api<{ run: RunJson }>(srv.url, `/v1/sessions/${s.id}/messages`, {
      body: { content: 'go', agent: 'a' },
    });
    const res = await fetch(`${srv.url}/v1/runs/${sent.run.id}/stream`, { signal: AbortSignal.timeout(20_000) });
    expect(res.status).toBe(200);
    const text = await res.text();
    const types = [...text.matchAll(/"type":"([a-z_/-]+)"/g)].map((m) => m[1]);
    // Everything the worker process wrote, in order, then the end.
    expect(types).toContain('turn/start');
    expect(types.filter((t) => t === 'tool/result')).toHaveLength(2);
    expect(text).toMatch(/"to":"completed"/);
    expect(text).toMatch(/event: end\n/);
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
  }, 40_000);
});

describe('token deltas across processes on one SQLite file', () => {
  /** An API process without workers, and a worker process on the same file whose model streams slowly and holds at `hold`. */
  async function apiAndWorker(script: LongScript, hold: { step: number; chunk: number }) {
    const dir = mkdtempSync(join(tmpdir(), 'keel-xproc-'));
    const path = join(dir, 'keel.db');
    // The API has the agent (it sends to it) but no worker: the model runs in the worker process only.
    const srv = await startTestServer({ agents: [longAgent(script)], path, workers: 0, heartbeatMs: 60_000 });
    const child: ChildProcess = spawn(process.execPath, [STREAMING_WORKER, path, JSON.stringify({ script, hold })], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const messages: StreamingWorkerMessage[] = [];
    const heard = (m: StreamingWorkerMessage) =>
      new Promise<void>((resolve, reject) => {
        if (messages.includes(m)) return resolve();
        child.on('message', (got: StreamingWorkerMessage) => got === m && resolve());
        void exited.then(() => reject(new Error(`the worker process exited before it said ${m}`)));
      });
    child.on('message', (m: StreamingWorkerMessage) => messages.push(m));
    cleanups.push(async () => {
      child.send('stop');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
      await srv.close(0);
      rmSync(dir, { recursive: true, force: true });
    });
    await heard('ready');
    return { srv, held: heard('held'), release: () => child.send('release') };
  }

  it("an SSE client of the API process gets the worker process's deltas live, before their message commits; reconnecting mid-message resumes without a gap or a duplicate", async () => {
    // A tool step and a final answer, each streamed in 16 chunks; the answer held after 8.
    const script: LongScript = { toolSteps: 1, chunks: 16, chunkDelayMs: 3 };
    const { srv, held, release } = await apiAndWorker(script, { step: 2, chunk: 8 });
    const { sessionId, runId } = await startRun(srv.url);
    const session = new ResumingClient(`${srv.url}/v1/sessions/${sessionId}/stream`).open();
    const run = new ResumingClient(`${srv.url}/v1/runs/${runId}/stream`).open();
    await held;
    const answer = (c: ResumingClient) => c.deltas.filter((d) => d.delta.step === 2 && d.delta.type === 'text/delta');
    // Live: the first 8 chunks of the answer, which the worker process holds: it is not committed.
    await vi.waitFor(() => expect(answer(session)).toHaveLength(8), { timeout: 20_000, interval: 10 });
    await vi.waitFor(() => expect(answer(run)).toHaveLength(8), { timeout: 20_000, interval: 10 });
    const texts = expectedTexts(script);
    expect((await logOf(srv.url, sessionId)).filter((e) => e.type === 'assistant/message')).toHaveLength(1);
    expect(
      answer(session)
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(
      texts[1]!
        .split(' ')
        .slice(0, 8)
        .map((w) => `${w} `)
        .join(''),
    );
    // The first message's deltas all came, before its durable version.
    const firstMessage = session.items.findIndex((i) => i.kind === 'event' && i.event.type === 'assistant/message');
    const firstDeltas = session.items
      .slice(0, firstMessage)
      .flatMap((i) => (i.kind === 'delta' && i.delta.type === 'text/delta' ? [i.delta.delta] : []));
    expect(firstDeltas.join('')).toBe(texts[0]);
    // The deltas count from the latest durable event, the tool step's end.
    const anchor = session.events.at(-1)!;
    expect(session.lastId).toBe(`${anchor.seq}.8`);

    // Reconnect mid-message: from the last delta (Last-Event-ID, ?after=); a new client from the
    // durable event gets the 8 deltas so far, which the API process keeps from the worker's.
    session.open('header');
    run.open('query');
    const late = new ResumingClient(`${srv.url}/v1/sessions/${sessionId}/stream`).open('query', String(anchor.seq));
    await late.waitFor(() => late.deltas.length === 8);
    expect(late.deltas.map((d) => d.id)).toEqual(Array.from({ length: 8 }, (_, i) => `${anchor.seq}.${i + 1}`));
    // The AI SDK chat stream of the session replays the run, the deltas so far included.
    const chat = await rawStream(`${srv.url}/v1/sessions/${sessionId}/chat/stream`);
    const chatText = () =>
      [...chat.text().matchAll(/"type":"text-delta","id":"[^"]*","delta":"([^"]*)"/g)].map((m) => m[1]).join('');
    await new Promise<void>((resolve) => {
      const check = () =>
        chatText().endsWith(
          answer(session)
            .map((d) => d.delta.delta)
            .join(''),
        )
          ? resolve()
          : setTimeout(check, 10);
      check();
    });

    release();
    await waitForRun(srv.url, runId);
    const log = await logOf(srv.url, sessionId);
    await session.waitFor(() => session.events.at(-1)?.seq === log.at(-1)!.seq);
    await run.waitFor(() => run.ended);
    await late.waitFor(() => late.events.at(-1)?.seq === log.at(-1)!.seq);
    await chat.closed;
    for (const c of [session, run, late]) c.close();

    // Each client: the log exactly, ids only growing, every message's deltas once, whole.
    for (const [c, l, messages] of [
      [session, log, 2],
      [run, log.filter((e) => e.run_id === runId), 2],
      [late, log.filter((e) => e.seq > anchor.seq), 1],
    ] as const) {
      expect(checkAgainstLog(c.items, l).messages).toBe(messages);
    }
    expect(
      answer(session)
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(texts[1]);
    expect(new Set(answer(session).map((d) => d.conn)).size).toBe(2);
    expect(
      answer(run)
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(texts[1]);
    expect(
      answer(late)
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(texts[1]);
    expect(
      session.deltas
        .filter((d) => d.delta.type === 'text/delta')
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe(texts.join(''));
    expect(chatText()).toBe(texts.join(''));
  }, 60_000);

  it('a message sent to the API process while the worker process streams (enqueued mid-message): its session stream still gets every delta, before each message, ids only growing', async () => {
    const script: LongScript = { toolSteps: 1, chunks: 16, chunkDelayMs: 3 };
    const { srv, held, release } = await apiAndWorker(script, { step: 2, chunk: 8 });
    const { sessionId, runId } = await startRun(srv.url);
    const session = new ResumingClient(`${srv.url}/v1/sessions/${sessionId}/stream`).open();
    await held;
    await vi.waitFor(() => expect(session.deltas.filter((d) => d.delta.step === 2)).toHaveLength(8), {
      timeout: 20_000,
      interval: 10,
    });
    // The API process commits to the session while the worker's message streams: the worker
    // numbers its next deltas after that commit once it hears of it.
    const queued = await api<{ run: RunJson }>(srv.url, `/v1/sessions/${sessionId}/messages`, {
      body: { content: 'and then', if_busy: 'enqueue' },
    });
    expect(queued.run.status).toBe('queued');
    release();
    await waitForRun(srv.url, runId);
    await waitForRun(srv.url, queued.run.id);
    const log = await logOf(srv.url, sessionId);
    await session.waitFor(() => session.events.at(-1)?.seq === log.at(-1)!.seq);
    session.close();
    // The first run's two messages, then the second run's answer (the script goes on from the
    // conversation's tool results: one already), every one streamed whole before its durable version.
    expect(checkAgainstLog(session.items, log).messages).toBe(3);
    const texts = expectedTexts(script);
    expect(
      session.deltas
        .filter((d) => d.delta.type === 'text/delta')
        .map((d) => d.delta.delta)
        .join(''),
    ).toBe([...texts, texts[1]].join(''));
  }, 60_000);
});
