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
 * work. A live run is also timed per endpoint, from the request to its last event.
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

/** An endpoint that streams a run: its path for a run, and how a request starts a live run there. */
interface Endpoint {
  name: string;
  replay(runId: string): { url: string; init?: RequestInit };
  live(): { url: string; init: RequestInit };
}

const dir = mkdtempSync(join(tmpdir(), 'keel-bench-protocols-'));
const store = openSqliteStore({ path: join(dir, 'keel.db') });
const server = await startServer({
  store,
  config: { source: null, agents: [agent], compaction: {}, demo: false },
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
    live: () => ({ url: '', init: {} }),
  },
  {
    name: 'openai responses',
    replay: (id) => ({ url: `${base}/openai/v1/responses/${id}?stream=true` }),
    live: () => ({ url: `${base}/openai/v1/responses`, init: json({ model: 'bench', input: 'go', stream: true }) }),
  },
  {
    name: 'ag-ui',
    replay: (id) => ({ url: `${base}/agui/bench/runs/${id}` }),
    live: () => ({
      url: `${base}/agui/bench`,
      init: json({
        threadId: crypto.randomUUID(),
        runId: crypto.randomUUID(),
        messages: [{ id: crypto.randomUUID(), role: 'user', content: 'go' }],
      }),
    }),
  },
];

/** Reads a whole SSE response: its events and bytes, and the time to its end. */
async function stream(url: string, init?: RequestInit): Promise<{ ms: number; events: number; bytes: number }> {
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
  }
  return { ms: performance.now() - t0, events, bytes };
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

// Warm-up: each endpoint once.
for (const e of endpoints) await stream(e.replay(runs[0]!).url);

const results = new Map(endpoints.map((e) => [e.name, [] as Array<{ ms: number; events: number; bytes: number }>]));
for (let i = 0; i < runs.length; i++) {
  const order = i % 2 === 0 ? endpoints : [...endpoints].reverse();
  for (const e of order) {
    const r = e.replay(runs[i]!);
    results.get(e.name)!.push(await stream(r.url, r.init));
  }
}

// Live: a run made and streamed by one request, where the protocol has one.
const live = new Map<string, number[]>();
for (let i = 0; i < 5; i++)
  for (const e of endpoints) {
    const l = e.live();
    if (!l.url) continue;
    const r = await stream(l.url, l.init);
    live.set(e.name, [...(live.get(e.name) ?? []), r.ms]);
  }

const floor = median(results.get('keel sse')!.map((r) => r.ms));
const rows = endpoints.map((e) => {
  const rs = results.get(e.name)!;
  const ms = median(rs.map((r) => r.ms));
  const events = median(rs.map((r) => r.events));
  const bytes = median(rs.map((r) => r.bytes));
  return {
    endpoint: e.name,
    msPerRun: Number(ms.toFixed(2)),
    eventsPerRun: events,
    bytesPerRun: bytes,
    usPerEvent: Number(((ms * 1000) / events).toFixed(1)),
    ratioToKeelSse: Number((ms / floor).toFixed(2)),
    liveMsPerRun: live.has(e.name) ? Number(median(live.get(e.name)!).toFixed(1)) : null,
  };
});
console.table(rows);
console.log(JSON.stringify({ runs: RUNS, steps: STEPS, chunks: CHUNKS, rows }));

await server.close({ graceMs: 0 });
await store.close();
rmSync(dir, { recursive: true, force: true });
