/**
 * SSE fan-out: 1,000 subscribers on the session stream of one run that streams many deltas.
 * The server (API and worker, in-memory store) runs in a child process, so its memory is measured
 * apart from the clients'; the subscribers are raw HTTP readers in this process.
 *
 * Latency is from append to client: each streamed text chunk carries the server's clock when the
 * model emitted it (just before it is published), each durable event its `time`; both processes
 * read the same clock. A step's events are published when the step commits (ADR-0008): for most
 * of them that is after the model call that follows their `time`, so their latency includes that
 * wait; the events emitted at the commit itself (`step/end`, `turn/end`, `run/status`) show the
 * delivery after a commit. It includes the clients' own parsing (this process is busy too).
 *
 * Run with `npm run bench:sse`. Knobs: SUBSCRIBERS (1000), STEPS (3 model calls), CHUNKS (200 a
 * call), CHUNK_DELAY_MS (10).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { z } from 'zod';
import { defineAgent, openSqliteStore, ScriptedModel, tool } from '../src/index.ts';
import { startServer } from '../src/server/serve.ts';

const SUBSCRIBERS = Number(process.env.SUBSCRIBERS ?? 1000);
const STEPS = Number(process.env.STEPS ?? 3);
const CHUNKS = Number(process.env.CHUNKS ?? 200);
const CHUNK_DELAY_MS = Number(process.env.CHUNK_DELAY_MS ?? 10);

const now = () => performance.timeOrigin + performance.now();

type ToChild = { cmd: 'memory'; gc?: boolean } | { cmd: 'exit' };
type FromChild = { type: 'ready'; url: string } | { type: 'memory'; rss: number; heapUsed: number };

// ---------------------------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------------------------

/** A scripted model whose text chunks say when they were emitted (ms since the epoch, server clock). */
class TimestampModel implements LanguageModelV4 {
  readonly specificationVersion = 'v4' as const;
  readonly provider = 'scripted';
  readonly modelId = 'bench-sse';
  readonly supportedUrls = {};
  private readonly inner = new ScriptedModel(
    [
      (call) => {
        const step = call.prompt.filter((m) => m.role === 'tool').length + 1;
        const chunks = Array.from({ length: CHUNKS }, () => 'x');
        return step < STEPS
          ? { chunks, chunkDelayMs: CHUNK_DELAY_MS, toolCalls: [{ id: `call-${step}`, name: 'next', input: { step } }] }
          : { chunks, chunkDelayMs: CHUNK_DELAY_MS };
      },
    ],
    { loop: true },
  );

  doGenerate(options: LanguageModelV4CallOptions) {
    return this.inner.doGenerate(options);
  }

  async doStream(options: LanguageModelV4CallOptions) {
    const r = await this.inner.doStream(options);
    const stamp = new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
      transform(part, controller) {
        controller.enqueue(part.type === 'text-delta' ? { ...part, delta: `${now().toFixed(3)} ` } : part);
      },
    });
    return { ...r, stream: r.stream.pipeThrough(stamp) };
  }
}

async function serveChild(): Promise<void> {
  const agent = defineAgent({
    name: 'bench-sse',
    model: new TimestampModel(),
    tools: [
      tool({
        name: 'next',
        description: 'Goes on',
        input: z.object({ step: z.number() }),
        execute: ({ step }) => `step ${step} done`,
      }),
    ],
    limits: { maxSteps: STEPS + 1 },
  });
  const store = openSqliteStore({ path: ':memory:' });
  const server = await startServer({
    store,
    config: { source: null, agents: [agent], compaction: {}, demo: false },
    port: 0,
    workers: 1,
    version: 'bench',
  });
  process.on('message', (m: ToChild) => {
    if (m.cmd === 'exit') void server.close({ graceMs: 0 }).then(() => process.exit(0));
    else {
      if (m.gc) (globalThis as { gc?: () => void }).gc?.();
      const mem = process.memoryUsage();
      process.send!({ type: 'memory', rss: mem.rss, heapUsed: mem.heapUsed } satisfies FromChild);
    }
  });
  process.send!({ type: 'ready', url: server.url } satisfies FromChild);
}

// ---------------------------------------------------------------------------------------------
// The clients
// ---------------------------------------------------------------------------------------------

interface Child {
  proc: ChildProcess;
  next(): Promise<FromChild>;
  memory(gc?: boolean): Promise<{ rss: number; heapUsed: number }>;
}

function startChild(): Child {
  const proc = fork(fileURLToPath(import.meta.url), ['--server'], {
    execArgv: ['--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env },
  });
  const inbox: FromChild[] = [];
  const waiting: Array<(m: FromChild) => void> = [];
  proc.on('message', (m: FromChild) => {
    const w = waiting.shift();
    if (w) w(m);
    else inbox.push(m);
  });
  proc.once('exit', (code) => {
    if (code !== 0 && code !== null) console.error(`server process exited with ${code}`);
  });
  const next = () =>
    inbox.length > 0 ? Promise.resolve(inbox.shift()!) : new Promise<FromChild>((resolve) => waiting.push(resolve));
  return {
    proc,
    next,
    async memory(gc = false) {
      proc.send({ cmd: 'memory', gc } satisfies ToChild);
      const m = await next();
      if (m.type !== 'memory') throw new Error(`unexpected message ${m.type}`);
      return m;
    },
  };
}

async function api<T>(url: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, {
    method: body !== undefined ? 'POST' : 'GET',
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

interface Subscriber {
  /** Resolves when the subscriber saw the first event (it is live). */
  live: Promise<void>;
  /** Resolves when it saw the run's end (or the connection ended). */
  done: Promise<{ ended: boolean }>;
  deltas: number;
  events: number;
  close(): void;
}

const eventLatency: number[] = [];
const commitLatency: number[] = [];
const deltaLatency: number[] = [];

function subscribe(url: string, agent: Agent): Subscriber {
  let resolveLive!: () => void;
  let resolveDone!: (r: { ended: boolean }) => void;
  const live = new Promise<void>((r) => (resolveLive = r));
  const done = new Promise<{ ended: boolean }>((r) => (resolveDone = r));
  const s: Subscriber = { live, done, deltas: 0, events: 0, close: () => req.destroy() };
  let buffer = '';
  const req = request(url, { agent, headers: { accept: 'text/event-stream' } }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      const t = now();
      buffer += chunk;
      let i: number;
      while ((i = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (block.startsWith(':')) continue;
        let event = 'message';
        let data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data = line.slice(6);
        }
        if (event === 'delta') {
          s.deltas++;
          const d = JSON.parse(data) as { type: string; delta: string };
          if (d.type === 'text/delta') deltaLatency.push(t - Number(d.delta));
        } else if (event === 'message') {
          s.events++;
          const e = JSON.parse(data) as { type: string; time: string; data: { to?: string } };
          if (e.type === 'session/created') resolveLive();
          else {
            eventLatency.push(t - Date.parse(e.time));
            // Emitted at a durable point: its time is (about) when its commit happened.
            if (e.type === 'step/end' || e.type === 'turn/end' || e.type === 'run/status')
              commitLatency.push(t - Date.parse(e.time));
          }
          if (e.type === 'run/status' && ['completed', 'failed', 'cancelled', 'timed_out'].includes(e.data.to ?? ''))
            resolveDone({ ended: true });
        }
      }
    });
    res.on('close', () => resolveDone({ ended: false }));
  });
  req.on('error', () => resolveDone({ ended: false }));
  req.end();
  return s;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summary(name: string, values: number[]): string {
  const sorted = Float64Array.from(values).sort();
  const f = (v: number) => `${v.toFixed(1)} ms`.padStart(10);
  return `${name.padEnd(16)} n=${String(sorted.length).padStart(8)}  p50 ${f(percentile(sorted, 50))}  p90 ${f(percentile(sorted, 90))}  p99 ${f(percentile(sorted, 99))}  max ${f(sorted.at(-1) ?? NaN)}`;
}

const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MB`;

async function main(): Promise<void> {
  const t0 = performance.now();
  console.log(
    `SSE fan-out: ${SUBSCRIBERS} subscribers, one run of ${STEPS} model calls × ${CHUNKS} chunks every ${CHUNK_DELAY_MS} ms (server in a child process, in-memory store)\n`,
  );
  const child = startChild();
  const ready = await child.next();
  if (ready.type !== 'ready') throw new Error('the server did not start');
  const { url } = ready;
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });

  const before = await child.memory(true);
  const session = await api<{ id: string }>(url, '/v1/sessions', {});

  const tc = performance.now();
  const subs = Array.from({ length: SUBSCRIBERS }, () => subscribe(`${url}/v1/sessions/${session.id}/stream`, agent));
  await Promise.all(subs.map((s) => s.live));
  const connectMs = performance.now() - tc;
  const connected = await child.memory(true);

  // Peak server memory while the run streams.
  let peak = connected.rss;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, (await child.memory()).rss);
      await new Promise((r) => setTimeout(r, 250));
    }
  })();

  const tr = performance.now();
  await api(url, `/v1/sessions/${session.id}/messages`, { content: 'Stream, please.' });
  const results = await Promise.all(subs.map((s) => s.done));
  const runMs = performance.now() - tr;
  sampling = false;
  await sampler;
  const during = peak;

  for (const s of subs) s.close();
  await new Promise((r) => setTimeout(r, 500));
  const after = await child.memory(true);
  child.proc.send({ cmd: 'exit' } satisfies ToChild);

  const totalDeltas = subs.reduce((n, s) => n + s.deltas, 0);
  const totalEvents = subs.reduce((n, s) => n + s.events, 0);
  const incomplete = results.filter((r) => !r.ended).length;
  const expectedDeltas = SUBSCRIBERS * STEPS * CHUNKS;
  console.log(`connect          ${SUBSCRIBERS} subscribers live in ${connectMs.toFixed(0)} ms`);
  console.log(
    `run              ${runMs.toFixed(0)} ms to the last subscriber's end (streaming alone: ≥ ${(STEPS * CHUNKS * CHUNK_DELAY_MS).toFixed(0)} ms)`,
  );
  console.log(
    `delivered        ${totalEvents} durable events, ${totalDeltas} deltas (text deltas expected: ${expectedDeltas}); ${((totalEvents + totalDeltas) / (runMs / 1000)).toFixed(0)} messages/s; ${incomplete} subscribers cut off`,
  );
  console.log('\nlatency, append → client (same clock):');
  console.log(summary('durable events', eventLatency));
  console.log(summary('  of which at a commit', commitLatency));
  console.log(summary('text deltas', deltaLatency));
  console.log('\nserver memory (child process; after a gc where noted):');
  console.log(`before subscribers (gc)   rss ${mb(before.rss).padStart(9)}  heap ${mb(before.heapUsed)}`);
  console.log(`subscribers idle (gc)     rss ${mb(connected.rss).padStart(9)}  heap ${mb(connected.heapUsed)}`);
  console.log(`peak while streaming      rss ${mb(during).padStart(9)}`);
  console.log(`after disconnect (gc)     rss ${mb(after.rss).padStart(9)}  heap ${mb(after.heapUsed)}`);
  console.log(`\ntotal ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  agent.destroy();
  if (incomplete > 0 || deltaLatency.length < expectedDeltas) process.exitCode = 1;
}

if (process.argv.includes('--server')) await serveChild();
else await main();
