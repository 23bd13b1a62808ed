/**
 * Keel as a cluster: worker PROCESSES on one database, PostgreSQL and SQLite side by side.
 *
 * (a) throughput and live delivery: RUNS runs × TOOL_STEPS tool steps (+1 final step each), a
 *     zero-latency scripted model and a trivial tool, executed by 1, 2 and 4 worker processes
 *     (WORKERS; concurrency CONCURRENCY each). This process serves the HTTP API (no worker) and
 *     follows SSE_CLIENTS of the runs with SSE clients: steps/s, and the delivery latency of
 *     durable events (from the event's time, set in the worker before its commit, to its arrival
 *     at the client: commit, notification, read, HTTP). On PostgreSQL the notice crosses processes
 *     by LISTEN/NOTIFY; on SQLite by the file's local bus (ADR-0035; PRAGMA data_version, polled
 *     every 50 ms, before it).
 * (b) recovery: a worker process holds RECOVER_RUNS runs in flight (each blocked in an idempotent
 *     tool) and is SIGKILLed; a new worker process (lease LEASE_MS, concurrency RECOVER_CONCURRENCY)
 *     recovers them all. Reported: from the kill until every run is terminal, and the part of it
 *     that is waiting for the dead worker's leases to expire.
 *
 * (c) one PostgreSQL step against a floor on the same server: a connection that writes one row and
 *     commits per step (BEGIN, INSERT, COMMIT), and a bare round trip; Keel's durable step one run
 *     at a time (FLOOR_RUNS runs, concurrency 1), in this process.
 *
 * PostgreSQL: KEEL_BENCH_DATABASE_URL, else the machine's server on 127.0.0.1:5432 (database
 * test); each variant runs in a schema of its own, dropped after. Both backends commit durably
 * (SQLite synchronous=FULL; PostgreSQL's default synchronous_commit=on).
 *
 * Run with `npm run bench:cluster` (env RUNS, TOOL_STEPS, WORKERS, CONCURRENCY, SSE_CLIENTS,
 * RECOVER_RUNS, RECOVER_CONCURRENCY, LEASE_MS, FLOOR_RUNS, BACKENDS=postgres,sqlite).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventSource } from 'eventsource';
import pg from 'pg';
import { z } from 'zod';
import { createRuntime, defineAgent, SqliteStore, tool, type AgentDefinition, type Store } from '../src/index.ts';
import { startServer } from '../src/server/serve.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';
import { stepsModel } from './steps-model.ts';

const RUNS = Number(process.env.RUNS ?? 400);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 10);
const WORKERS = (process.env.WORKERS ?? '1,2,4').split(',').map(Number);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 32);
const SSE_CLIENTS = Number(process.env.SSE_CLIENTS ?? 40);
const RECOVER_RUNS = Number(process.env.RECOVER_RUNS ?? 1000);
const RECOVER_CONCURRENCY = Number(process.env.RECOVER_CONCURRENCY ?? 200);
const LEASE_MS = Number(process.env.LEASE_MS ?? 2000);
const FLOOR_RUNS = Number(process.env.FLOOR_RUNS ?? 20);
const BACKENDS = (process.env.BACKENDS ?? 'postgres,sqlite').split(',') as Array<'postgres' | 'sqlite'>;
const PG_URL = process.env.KEEL_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

const SELF = fileURLToPath(import.meta.url);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Where a variant's data lives: a SQLite file, or a PostgreSQL schema. */
type Place = { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string; schema: string };

async function open(place: Place): Promise<Store> {
  if (place.kind === 'sqlite') return new SqliteStore({ path: place.path, synchronous: 'FULL', busyTimeoutMs: 30_000 });
  const s = new PostgresStore({ url: place.url, schema: place.schema, poolSize: 8 });
  await s.opened();
  return s;
}

/** The agent: TOOL_STEPS steps of a trivial tool; for recovery, one step whose tool blocks (`hold`). */
function agent(mode: 'throughput' | 'hold' | 'release', onStart?: () => void): AgentDefinition {
  const steps = mode === 'throughput' ? TOOL_STEPS : 1;
  return defineAgent({
    name: 'bench',
    model: stepsModel(steps),
    system: 'bench',
    tools: [
      tool({
        name: 'inc',
        description: 'increments',
        input: z.object({ n: z.number() }),
        idempotent: true,
        execute: async ({ n }) => {
          onStart?.();
          if (mode === 'hold') await new Promise(() => {});
          return n + 1;
        },
      }),
    ],
    limits: { maxSteps: steps + 1 },
  });
}

// ---------------------------------------------------------------------------------------------
// Worker processes

/** `node cluster.ts worker <place JSON> <mode> <concurrency> <id>`: 'ready', then works on 'start'. */
async function workerProcess(
  place: Place,
  mode: 'throughput' | 'hold' | 'release',
  concurrency: number,
  id: string,
): Promise<void> {
  const store = await open(place);
  let inFlight = 0;
  const rt = createRuntime({
    store,
    agents: [agent(mode, () => mode === 'hold' && ++inFlight === RECOVER_RUNS && process.send!('all-running'))],
    leaseMs: LEASE_MS,
  });
  process.on('message', (m) => {
    if (m === 'start') rt.startWorker({ id, concurrency, pollMs: 20 });
  });
  process.send!('ready');
}

function spawnWorker(
  place: Place,
  mode: 'throughput' | 'hold' | 'release',
  concurrency: number,
  id: string,
): { child: ChildProcess; ready: Promise<void>; exited: Promise<void>; message(m: string): Promise<void> } {
  const child = spawn(process.execPath, [SELF, 'worker', JSON.stringify(place), mode, String(concurrency), id], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const message = (want: string) =>
    new Promise<void>((resolve, reject) => {
      child.on('message', (m) => m === want && resolve());
      void exited.then(() => reject(new Error(`worker ${id} exited before '${want}'`)));
    });
  return { child, ready: message('ready'), exited, message };
}

async function allTerminal(store: Store, timeoutMs = 600_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const c = await store.runs.countByStatus();
    if (c.queued + c.running === 0) return;
    if (Date.now() > until) throw new Error(`runs still queued or running: ${JSON.stringify(c)}`);
    await sleep(25);
  }
}

async function createRuns(store: Store, n: number): Promise<string[]> {
  const rt = createRuntime({ store, agents: [agent('throughput')] });
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const s = await rt.sessions.create();
    ids.push((await rt.sessions.send(s.id, `task ${i}`)).run.id);
  }
  await rt.close();
  return ids;
}

const quantile = (xs: number[], q: number): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

// ---------------------------------------------------------------------------------------------
// (a) throughput and SSE delivery

interface ThroughputResult {
  backend: string;
  workers: number;
  stepsPerSec: number;
  ms: number;
  sseEvents: number;
  sseP50: number;
  sseP99: number;
}

async function throughput(place: Place, workers: number): Promise<ThroughputResult> {
  const store = await open(place);
  const ids = await createRuns(store, RUNS);
  const server = await startServer({
    store,
    config: { source: null, agents: [agent('throughput')], compaction: {}, demo: false },
    port: 0,
    workers: 0,
    version: 'bench',
  });
  const latencies: number[] = [];
  const sources: EventSource[] = [];
  const ended = new Set<string>();
  for (const id of ids.slice(0, SSE_CLIENTS)) {
    const es = new EventSource(`${server.url}/v1/runs/${id}/stream`);
    es.addEventListener('message', (m) => {
      const e = JSON.parse(m.data as string) as { time: string };
      latencies.push(Date.now() - Date.parse(e.time));
    });
    es.addEventListener('end', () => {
      ended.add(id);
      es.close();
    });
    sources.push(es);
  }
  await sleep(300); // the clients are connected and have read the (short) logs so far
  latencies.length = 0;
  const procs = Array.from({ length: workers }, (_, i) => spawnWorker(place, 'throughput', CONCURRENCY, `w${i}`));
  await Promise.all(procs.map((p) => p.ready));
  const t0 = performance.now();
  for (const p of procs) p.child.send('start');
  await allTerminal(store);
  const ms = performance.now() - t0;
  const deadline = Date.now() + 10_000;
  while (ended.size < Math.min(SSE_CLIENTS, ids.length) && Date.now() < deadline) await sleep(20);
  for (const es of sources) es.close();
  for (const p of procs) p.child.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
  await server.close({ graceMs: 0 });
  const counts = await store.runs.countByStatus();
  if (counts.completed !== RUNS) throw new Error(`only ${counts.completed} of ${RUNS} runs completed`);
  await store.close();
  const steps = RUNS * (TOOL_STEPS + 1);
  return {
    backend: place.kind,
    workers,
    stepsPerSec: steps / (ms / 1000),
    ms,
    sseEvents: latencies.length,
    sseP50: quantile(latencies, 0.5),
    sseP99: quantile(latencies, 0.99),
  };
}

// ---------------------------------------------------------------------------------------------
// (b) recovery of RECOVER_RUNS in-flight runs after kill -9

interface RecoveryResult {
  backend: string;
  runs: number;
  toAllRunningMs: number;
  leaseWaitMs: number;
  recoveredMs: number;
}

async function recovery(place: Place): Promise<RecoveryResult> {
  const store = await open(place);
  const rt = createRuntime({ store, agents: [agent('hold')] });
  for (let i = 0; i < RECOVER_RUNS; i++) await rt.sessions.send((await rt.sessions.create()).id, `task ${i}`);
  await rt.close();
  const doomed = spawnWorker(place, 'hold', RECOVER_RUNS, 'doomed');
  await doomed.ready;
  const s0 = performance.now();
  const allRunning = doomed.message('all-running');
  doomed.child.send('start');
  await allRunning;
  const toAllRunningMs = performance.now() - s0;
  doomed.child.kill('SIGKILL');
  await doomed.exited;
  const killedAt = Date.now();
  const held = await store.runs.list({ statuses: ['running'], limit: RECOVER_RUNS + 1 });
  if (held.length !== RECOVER_RUNS) throw new Error(`${held.length} of ${RECOVER_RUNS} runs were running at the kill`);
  const lastExpiry = Math.max(...held.map((r) => r.lease!.expiresAt));
  const rescuer = spawnWorker(place, 'release', RECOVER_CONCURRENCY, 'rescuer');
  await rescuer.ready;
  rescuer.child.send('start');
  await allTerminal(store);
  const recoveredMs = Date.now() - killedAt;
  rescuer.child.kill('SIGKILL');
  await rescuer.exited;
  const counts = await store.runs.countByStatus();
  if (counts.completed !== RECOVER_RUNS)
    throw new Error(`only ${counts.completed} of ${RECOVER_RUNS} runs completed after recovery`);
  await store.close();
  return {
    backend: place.kind,
    runs: RECOVER_RUNS,
    toAllRunningMs,
    leaseWaitMs: Math.max(0, lastExpiry - killedAt),
    recoveredMs,
  };
}

// ---------------------------------------------------------------------------------------------
// (c) one PostgreSQL step against a floor on the same server, in this process

interface FloorResult {
  floorUs: number;
  roundTripUs: number;
  stepUs: number;
}

/**
 * The floor: one connection writing one 600-byte row and committing (BEGIN, INSERT, COMMIT) per
 * step, and a bare round trip; against Keel's durable step on the same server, one run at a time
 * (FLOOR_RUNS runs, concurrency 1), in this process.
 */
async function postgresFloor(place: Extract<Place, { kind: 'postgres' }>): Promise<FloorResult> {
  const client = new pg.Client({ connectionString: place.url });
  await client.connect();
  const n = 500;
  const table = `"${place.schema}_floor"`;
  await client.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, data text NOT NULL)`);
  const row = 'x'.repeat(600);
  let t = performance.now();
  for (let i = 0; i < n; i++) {
    await client.query('BEGIN');
    await client.query({ name: 'floor', text: `INSERT INTO ${table} (data) VALUES ($1)`, values: [row] });
    await client.query('COMMIT');
  }
  const floorUs = ((performance.now() - t) * 1000) / n;
  t = performance.now();
  for (let i = 0; i < n; i++) await client.query({ name: 'one', text: 'SELECT 1' });
  const roundTripUs = ((performance.now() - t) * 1000) / n;
  await client.query(`DROP TABLE ${table}`);
  await client.end();

  const store = await open(place);
  await createRuns(store, FLOOR_RUNS);
  const rt = createRuntime({ store, agents: [agent('throughput')] });
  const s0 = performance.now();
  const worker = rt.startWorker({ id: 'floor', concurrency: 1, pollMs: 5 });
  await allTerminal(store);
  const stepUs = ((performance.now() - s0) * 1000) / (FLOOR_RUNS * (TOOL_STEPS + 1));
  await worker.stop();
  await rt.close();
  await store.close();
  return { floorUs, roundTripUs, stepUs };
}

// ---------------------------------------------------------------------------------------------

async function withPlace<T>(kind: 'postgres' | 'sqlite', fn: (place: Place) => Promise<T>): Promise<T> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'keel-bench-cluster-'));
    try {
      return await fn({ kind, path: join(dir, 'keel.db') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const schema = `keel_bench_${randomBytes(4).toString('hex')}`;
  try {
    return await fn({ kind, url: PG_URL, schema });
  } finally {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  }
}

if (process.argv[2] === 'worker') {
  await workerProcess(
    JSON.parse(process.argv[3]!) as Place,
    process.argv[4] as 'throughput' | 'hold' | 'release',
    Number(process.argv[5]),
    process.argv[6]!,
  );
} else {
  console.log(
    `keel cluster benchmark — node ${process.version}, ${cpus().length} CPUs; PostgreSQL ${PG_URL.replace(/:[^:@/]*@/, ':***@')}`,
  );
  console.log(
    `(a) ${fmt(RUNS)} runs × ${TOOL_STEPS} tool steps (+1) = ${fmt(RUNS * (TOOL_STEPS + 1))} steps; worker processes × concurrency ${CONCURRENCY}; ${SSE_CLIENTS} SSE clients on this process's API`,
  );
  const rows: ThroughputResult[] = [];
  for (const workers of WORKERS) {
    for (const backend of BACKENDS) {
      const r = await withPlace(backend, (place) => throughput(place, workers));
      rows.push(r);
      console.log(
        `    ${backend.padEnd(8)} ${workers} worker${workers > 1 ? 's' : ' '}: ${fmt(r.stepsPerSec).padStart(6)} steps/s (${fmt(r.ms)} ms); SSE delivery p50 ${fmt(r.sseP50)} ms, p99 ${fmt(r.sseP99)} ms (${fmt(r.sseEvents)} events)`,
      );
    }
  }
  console.log(
    `(b) recovery: ${fmt(RECOVER_RUNS)} runs in flight, their worker process SIGKILLed; a new worker process (lease ${fmt(LEASE_MS)} ms, concurrency ${RECOVER_CONCURRENCY})`,
  );
  for (const backend of BACKENDS) {
    const r = await withPlace(backend, recovery);
    console.log(
      `    ${backend.padEnd(8)}: all ${fmt(r.runs)} running after ${fmt(r.toAllRunningMs)} ms; after the kill, leases expired within ${fmt(r.leaseWaitMs)} ms, all terminal after ${fmt(r.recoveredMs)} ms (${fmt(r.recoveredMs - r.leaseWaitMs)} ms after the last expiry)`,
    );
  }
  if (BACKENDS.includes('postgres')) {
    const f = await withPlace('postgres', (place) => postgresFloor(place as Extract<Place, { kind: 'postgres' }>));
    console.log(
      `(c) one run at a time on PostgreSQL, in this process (${FLOOR_RUNS} runs × ${TOOL_STEPS + 1} steps, concurrency 1):`,
    );
    console.log(
      `    durable step ${fmt(f.stepUs)} µs; floor (BEGIN, one 600-byte INSERT, COMMIT) ${fmt(f.floorUs)} µs: ${fmt(f.stepUs / f.floorUs, 1)}× the floor; a round trip (SELECT 1) ${fmt(f.roundTripUs)} µs`,
    );
  }
  if (process.argv.includes('--json')) console.log(JSON.stringify(rows));
}
