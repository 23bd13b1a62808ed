/**
 * What each protocol's encoder costs over Keel's own SSE, on the same runs (ADR-0038): every
 * protocol stream is an encoder of the one feed, so the difference is the encoder and its bytes.
 *
 * A server (SQLite file, one worker) runs RUNS runs of a scripted agent whose answers stream in
 * many chunks over several steps. Once they have ended, each run is streamed again from its start
 * through each endpoint, in turns (endpoint A, B, … for run 1, then B, …, A for run 2, …): the
 * feed replays the log and each encoder turns it into its protocol's events. Reported per endpoint:
 * ms to stream a whole run (median), events and bytes a run, µs an event, and the ratio of its
 * time to Keel's own stream (`/v1/runs/{id}/stream`) of the same runs, the floor of the same
 * work. A live run is also timed per endpoint (LIVE of each, in turns), from its first request to
 * its last event: for Keel's own API, creating a session, sending the message and streaming the
 * run; for each protocol, its one streaming request. (A2A cannot stream an ended task again, and MCP
 * has no event stream of a run: they have no replay figure.) Last, per endpoint, STREAMS streams
 * (100) opened at once on one running run (one model call of CHUNKS chunks, one every
 * CHUNK_DELAY_MS): time to first token of each (from its request to its first text event, p50 and
 * p99) and the CPU of this process (server and clients alike) per event delivered, against Keel's
 * own SSE.
 *
 * Run with `npm run bench:protocols`. Knobs: RUNS (30), STEPS (3 model calls a run), CHUNKS (200 a
 * call).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { defineAgent, openSqliteStore, ScriptedModel, tool } from '../src/index.ts';
import { startServer } from '../src/server/serve.ts';

const RUNS = Number(process.env.RUNS ?? 30);
const STEPS = Number(process.env.STEPS ?? 3);
const CHUNKS = Number(process.env.CHUNKS ?? 200);
const LIVE = Number(process.env.LIVE ?? 10);
const STREAMS = Number(process.env.STREAMS ?? 100);
const CHUNK_DELAY_MS = Number(process.env.CHUNK_DELAY_MS ?? 2);

const model = new ScriptedModel(
  [
    (call) => {
      const step = call.prompt.filter((m) => m.role === 'tool').length + 1;
      const chunks = Array.from({ length: CHUNKS }, (_, i) => `w${i} `);
      return step < STEPS ? { chunks, toolCalls: [{ id: `call-${step}`, name: 'next', input: { step } }] } : { chunks };
    },
  ],
  { loop: true },
);
const agent = defineAgent({
  name: 'bench',
  model,
  tools: [
    tool({
      name: 'next',
      description: 'Goes on',
      input: z.object({ step: z.number() }),
      effect: 'read-only',
      execute: ({ step }) => `step ${step} done`,
    }),
  ],
  limits: { maxSteps: STEPS + 1 },
});

// The agent the concurrent streams follow: one model call of CHUNKS chunks, one every 2 ms.
const slow = defineAgent({
  name: 'slow',
  model: new ScriptedModel(
    [() => ({ chunks: Array.from({ length: CHUNKS }, (_, i) => `w${i} `), chunkDelayMs: CHUNK_DELAY_MS })],
    { loop: true },
  ),
});

/** An endpoint that streams a run: its path for a run, and how a request starts a live run there. */
interface Endpoint {
  name: string;
  replay(runId: string): { url: string; init?: RequestInit };
  /** A new run made and streamed to its end, as this protocol's client does it. */
  live(): Promise<{ ms: number; events: number; bytes: number }>;
  /** A stream of a running run (made with Keel's API), and how to tell its text events. */
  attach(runId: string): { url: string; init?: RequestInit };
  isText: (event: string) => boolean;
}

const dir = mkdtempSync(join(tmpdir(), 'keel-bench-protocols-'));
const store = openSqliteStore({ path: join(dir, 'keel.db') });
const server = await startServer({
  store,
  config: { source: null, agents: [agent, slow], compaction: {}, demo: false },
  port: 0,
  workers: 1,
  version: 'bench',
});
const base = server.url;
const json = (body: unknown): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

const endpoints: Endpoint[] = [
  {
    name: 'keel sse',
    replay: (id) => ({ url: `${base}/v1/runs/${id}/stream` }),
    attach: (id) => ({ url: `${base}/v1/runs/${id}/stream` }),
    isText: (e) => /^event: delta$/m.test(e) && e.includes('text/delta'),
    live: async () => {
      // As Keel's own clients do: follow the session, then send the message; until the run's end.
      const t0 = performance.now();
      const session = (await (await fetch(`${base}/v1/sessions`, json({}))).json()) as { id: string };
      const done = new AbortController();
      const following = stream(
        `${base}/v1/sessions/${session.id}/stream`,
        { signal: done.signal },
        (event) => /"type":"run\/status"/.test(event) && /"to":"(completed|failed|cancelled)"/.test(event),
      );
      await fetch(`${base}/v1/sessions/${session.id}/messages`, json({ content: 'go' }));
      const r = await following;
      done.abort();
      return { ...r, ms: performance.now() - t0 };
    },
  },
  {
    // SubscribeToTask refuses a finished task: A2A has no replay of an ended run to time.
    name: 'a2a',
    replay: () => ({ url: '' }),
    attach: (id) => ({
      url: `${base}/a2a/slow`,
      init: json({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id } }),
    }),
    isText: (e) => e.includes('"artifactUpdate"'),
    live: () =>
      stream(
        `${base}/a2a/bench`,
        json({
          jsonrpc: '2.0',
          id: 1,
          method: 'SendStreamingMessage',
          params: { message: { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts: [{ text: 'go' }] } },
        }),
      ),
  },
  {
    name: 'openai responses',
    replay: (id) => ({ url: `${base}/openai/v1/responses/${id}?stream=true` }),
    attach: (id) => ({ url: `${base}/openai/v1/responses/${id}?stream=true` }),
    isText: (e) => e.includes('response.output_text.delta'),
    live: () => stream(`${base}/openai/v1/responses`, json({ model: 'bench', input: 'go', stream: true })),
  },
  {
    name: 'ag-ui',
    replay: (id) => ({ url: `${base}/agui/bench/runs/${id}` }),
    attach: (id) => ({ url: `${base}/agui/slow/runs/${id}` }),
    isText: (e) => e.includes('TEXT_MESSAGE_CONTENT'),
    live: () =>
      stream(
        `${base}/agui/bench`,
        json({
          threadId: crypto.randomUUID(),
          runId: crypto.randomUUID(),
          messages: [{ id: crypto.randomUUID(), role: 'user', content: 'go' }],
        }),
      ),
  },
];

/** Reads a whole SSE response: its events and bytes, and the time to its end (a JSON-RPC error fails). */
async function stream(
  url: string,
  init?: RequestInit,
  last?: (event: string) => boolean,
  first?: (event: string) => boolean,
): Promise<{ ms: number; events: number; bytes: number; firstMs?: number }> {
  let firstMs: number | undefined;
  const t0 = performance.now();
  const res = await fetch(url, init);
  if (!res.ok || !res.body) throw new Error(`${url}: HTTP ${res.status} ${await res.text()}`);
  let bytes = 0;
  let events = 0;
  let tail = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    bytes += chunk.byteLength;
    const text = tail + decoder.decode(chunk, { stream: true });
    const parts = text.split('\n\n');
    tail = parts.pop()!;
    events += parts.filter((p) => /^data:/m.test(p)).length;
    if (first && firstMs === undefined && parts.some(first)) firstMs = performance.now() - t0;
    if (last && parts.some(last)) return { ms: performance.now() - t0, events, bytes, firstMs };
    if (parts.some((p) => /^data: ?\{"jsonrpc":"2.0","id":[^,]*,"error"/m.test(p))) throw new Error(`${url}: ${text}`);
  }
  return { ms: performance.now() - t0, events, bytes, firstMs };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

// The runs, each ended before any is streamed again.
const runs: string[] = [];
for (let i = 0; i < RUNS; i++) {
  const session = (await (await fetch(`${base}/v1/sessions`, json({}))).json()) as { id: string };
  const sent = (await (await fetch(`${base}/v1/sessions/${session.id}/messages`, json({ content: 'go' }))).json()) as {
    run: { id: string };
  };
  await server.runtime.runs.wait(sent.run.id, { until: 'terminal' });
  runs.push(sent.run.id);
}

const replayed = endpoints.filter((e) => e.replay(runs[0]!).url !== '');
// Warm-up: each endpoint once.
for (const e of replayed) await stream(e.replay(runs[0]!).url);

const results = new Map(endpoints.map((e) => [e.name, [] as Array<{ ms: number; events: number; bytes: number }>]));
for (let i = 0; i < runs.length; i++) {
  const order = i % 2 === 0 ? replayed : [...replayed].reverse();
  for (const e of order) {
    const r = e.replay(runs[i]!);
    results.get(e.name)!.push(await stream(r.url, r.init));
  }
}

// Live: a new run made and streamed to its end, in turns.
const live = new Map<string, Array<{ ms: number; events: number }>>();
for (let i = 0; i < LIVE; i++)
  for (const e of i % 2 === 0 ? endpoints : [...endpoints].reverse()) {
    const r = await e.live();
    live.set(e.name, [...(live.get(e.name) ?? []), r]);
  }
const liveFloor = median(live.get('keel sse')!.map((r) => r.ms));

// STREAMS concurrent streams of one running run per endpoint (the run made with Keel's API, streams
// opened at once): time to first token per stream, and the process's CPU per event delivered.
const fanOut = new Map<string, { ttft: number[]; cpuUs: number; events: number }>();
/** STREAMS streams of one new run of `slow` through endpoint `e`, opened at once. */
const fan = async (e: Endpoint, streams: number) => {
  const session = (await (await fetch(`${base}/v1/sessions`, json({ agent: 'slow' }))).json()) as { id: string };
  const cpu0 = process.cpuUsage();
  const sent = (await (await fetch(`${base}/v1/sessions/${session.id}/messages`, json({ content: 'go' }))).json()) as {
    run: { id: string };
  };
  const rs = await Promise.all(
    Array.from({ length: streams }, () => {
      const a = e.attach(sent.run.id);
      return stream(a.url, a.init, undefined, e.isText);
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return { rs, cpuUs: cpu.user + cpu.system };
};
// A round first, not counted: the first runs of `slow` warm up, and the client's connection pool
// opens its STREAMS connections (else the first endpoint measured pays for them). Then two measured
// rounds, the second in the reverse order.
for (const e of endpoints) await fan(e, STREAMS);
for (const round of [endpoints, [...endpoints].reverse()])
  for (const e of round) {
    const { rs, cpuUs } = await fan(e, STREAMS);
    const f = fanOut.get(e.name) ?? { ttft: [], cpuUs: 0, events: 0 };
    f.ttft.push(...rs.map((r) => r.firstMs ?? NaN).filter((x) => !Number.isNaN(x)));
    f.cpuUs += cpuUs;
    f.events += rs.reduce((n, r) => n + r.events, 0);
    fanOut.set(e.name, f);
  }
const pct = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
const cpuPerEvent = (name: string) => fanOut.get(name)!.cpuUs / fanOut.get(name)!.events;
const cpuFloor = cpuPerEvent('keel sse');

const floor = median(results.get('keel sse')!.map((r) => r.ms));
const rows = endpoints.map((e) => {
  const rs = results.get(e.name)!;
  const ms = rs.length ? median(rs.map((r) => r.ms)) : NaN;
  const events = rs.length ? median(rs.map((r) => r.events)) : NaN;
  const bytes = rs.length ? median(rs.map((r) => r.bytes)) : NaN;
  return {
    endpoint: e.name,
    msPerRun: Number(ms.toFixed(2)),
    eventsPerRun: events,
    bytesPerRun: bytes,
    usPerEvent: Number(((ms * 1000) / events).toFixed(1)),
    ratioToKeelSse: Number((ms / floor).toFixed(2)),
    liveMsPerRun: Number(median(live.get(e.name)!.map((r) => r.ms)).toFixed(1)),
    liveEventsPerRun: median(live.get(e.name)!.map((r) => r.events)),
    liveRatioToKeelSse: Number((median(live.get(e.name)!.map((r) => r.ms)) / liveFloor).toFixed(2)),
    [`ttftP50Ms@${STREAMS}`]: Number(pct(fanOut.get(e.name)!.ttft, 0.5).toFixed(1)),
    [`ttftP99Ms@${STREAMS}`]: Number(pct(fanOut.get(e.name)!.ttft, 0.99).toFixed(1)),
    [`eventsPerStream@${STREAMS}`]: Math.round(fanOut.get(e.name)!.events / (2 * STREAMS)),
    [`cpuUsPerEvent@${STREAMS}`]: Number(cpuPerEvent(e.name).toFixed(1)),
    [`cpuRatioToKeelSse@${STREAMS}`]: Number((cpuPerEvent(e.name) / cpuFloor).toFixed(2)),
  };
});
console.table(rows);
console.log(JSON.stringify({ runs: RUNS, steps: STEPS, chunks: CHUNKS, live: LIVE, streams: STREAMS, rows }));

await server.close({ graceMs: 0 });
await store.close();
rmSync(dir, { recursive: true, force: true });
