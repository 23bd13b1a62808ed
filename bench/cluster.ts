/**
 * Keel as a cluster: worker PROCESSES on one database, PostgreSQL and SQLite side by side, and
 * what a step costs the PostgreSQL server.
 *
 * (a) throughput and live delivery: RUNS runs × TOOL_STEPS tool steps (+1 final step each), a
 *     zero-latency scripted model and a trivial tool, executed by 1, 2 and 4 worker processes
 *     (WORKERS; concurrency CONCURRENCY each, 64). This process serves the HTTP API (no worker) and
 *     follows SSE_CLIENTS of the runs with SSE clients: steps/s, and the delivery latency of
 *     durable events (from the event's time, set in the worker before its commit, to its arrival
 *     at the client: commit, notification, read, HTTP). On PostgreSQL the notice crosses processes
 *     by LISTEN/NOTIFY; on SQLite by the file's local bus (ADR-0035). The worker processes are
 *     saturated: every run is queued before they start.
 * (a') SSE at half load (PostgreSQL): the 1-worker row's runs/s is the saturating rate; runs then
 *     ARRIVE open-loop at half of it for HALF_LOAD_SECONDS (sent by this process at a steady pace,
 *     each at its time whether or not the ones before were answered) while one worker process
 *     executes them, and SSE clients on this process's API follow SSE_CLIENTS of them, spread over
 *     the arrivals (each client on its session's stream, connected before its run is sent; the
 *     send's own events, written here, are not counted).
 * (b) recovery: a worker process holds RECOVER_RUNS runs in flight (each blocked in an idempotent
 *     tool) and is SIGKILLed; another worker process of the cluster (running before the kill, lease
 *     LEASE_MS, concurrency RECOVER_CONCURRENCY) recovers them all. Reported: from the kill until
 *     every run is terminal, and the part of it that is waiting for the dead worker's leases to
 *     expire.
 * Every measured worker process first executes WORKER_WARMUP_RUNS (200) runs of its agent on a
 * place of its own (a schema, a file), then dropped: a cluster's workers run for a long time, and
 * what is measured is their steady state, not their first seconds of compiling. 0: none (the
 * rescuer of (b) is still started before the kill).
 * (c) one PostgreSQL step against a floor on the same server, measured ALTERNATELY in
 *     FLOOR_ROUNDS rounds (floor, Keel, floor, Keel…: the machine's load drifts, the ratio is the
 *     median of the rounds' ratios). A Keel round: FLOOR_RUNS runs queued, then one worker in this
 *     process at concurrency 1 executes them one at a time, timed from its start to the last run's
 *     terminal status as this process's log publishes it (no polling). A floor round: FLOOR_STEPS
 *     transactions on one connection, each BEGIN, one INSERT of a row of FLOOR_BYTES, COMMIT (by
 *     default the bytes Keel's rows hold per step, measured after a warm-up round: every table of
 *     its schema, pg_column_size of its rows ÷ steps); and as many bare round trips (SELECT 1).
 *
 * Server cost per step (PostgreSQL), over (c)'s Keel rounds and over the 1-, 2- and 4-worker rows of
 * (a) (bench/server-cost.ts, bench/pg-query-tally.ts):
 * - round trips and statements: with pg_stat_statements when the server loads it (statements; it
 *   sees every client's), and in any case counted in the client, in the processes that do the
 *   work ((c): this process; (a): the worker processes, told by KEEL_BENCH_COUNT_QUERIES):
 *   `pg.Client.prototype.query` wrapped, a call a round trip, a simple query's statements split at
 *   ';'. Everything the worker sends while the phase is measured counts: claims, steps, ends, lease
 *   renewals, looks for more work, notifications. Transactions: counted in the client too, and for
 *   (a) pg_stat_database's xact_commit (database-wide; this process's API and meter transactions
 *   taken out; it also counts the transactions in which each LISTENing backend reads its
 *   notifications, about one a commit for each, and another client's would add to it).
 * - durable points: a step of this agent is one durable point (the tool is idempotent: a tool step
 *   is one point; the final step with the turn's end is one), so points = runs × (TOOL_STEPS + 1).
 * - WAL bytes: pg_current_wal_lsn() before and after (pg_wal_lsn_diff). The whole server's WAL:
 *   another client's writes add to it, and so do the full-page images written at the first change of
 *   a page after each checkpoint (every 5 min by default), so it moves from run to run. Beside it,
 *   where the server has pg_walinspect (contrib, PostgreSQL 15+), the schema's own: the records
 *   between the two positions that touch a relation of the variant's schema, and their commits.
 * - server CPU µs: on-CPU time of the server's processes on this machine (/proc/<pid>/schedstat,
 *   else utime + stime of /proc/<pid>/stat) before and after: the backends of the measured
 *   processes' connections plus the server's background processes (WAL writer, checkpointer…);
 *   this process's API backends and other clients' reported apart. Null when the server is not
 *   local. 1e6 ÷ it is steps/s per database core.
 *
 * `--json` (`npm run -s bench:cluster -- --json`) prints one JSON object and nothing else on stdout
 * (the human lines go to stderr). Its keys: `pgStepUs`, `pgFloorUs` and `pgRatio` ((c): medians of
 * the rounds, the ratio the median of the rounds' ratios); `roundTripsPerPoint` ((c), all round
 * trips of the worker ÷ durable points); `stepsPerSecond` (PostgreSQL, one worker process at
 * concurrency CONCURRENCY); `recoveryMs` (PostgreSQL, the last lease's expiry to every run
 * terminal); `walBytesPerStep` and `serverCpuUsPerStep` (PostgreSQL, the 1-worker row of (a));
 * `sseP99HalfLoadMs` ((a')), beside `sseP99SaturatedMs`; then the rows: `throughput`, `halfLoad`,
 * `recovery`, `oneAtATime`, and `serverCost` ({ oneAtATime, saturated }).
 *
 * PostgreSQL: KEEL_BENCH_DATABASE_URL, else the machine's server on 127.0.0.1:5432 (database
 * test); each variant runs in a schema of its own, dropped after. Both backends commit durably
 * (SQLite synchronous=FULL; PostgreSQL's default synchronous_commit=on).
 *
 * Run with `npm run bench:cluster` (env RUNS, TOOL_STEPS, WORKERS, CONCURRENCY, SSE_CLIENTS,
 * HALF_LOAD_SECONDS, RECOVER_RUNS, RECOVER_CONCURRENCY, LEASE_MS, WORKER_WARMUP_RUNS, FLOOR_ROUNDS,
 * FLOOR_RUNS, FLOOR_STEPS, FLOOR_BYTES, BACKENDS=postgres,sqlite, PARTS=a,b,c).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventSource } from 'eventsource';
import pg from 'pg';
import { z } from 'zod';
import { createRuntime, defineAgent, SqliteStore, tool, type AgentDefinition, type Store } from '../src/index.ts';
import { startServer } from '../src/server/serve.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';
import { countQueriesInto, QueryTally, seenPids, type TallySnapshot } from './pg-query-tally.ts';
import { ServerMeter, type SchemaWal, type ServerDiff, type ServerSample } from './server-cost.ts';
import { stepsModel } from './steps-model.ts';

const RUNS = Number(process.env.RUNS ?? 400);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 10);
const WORKERS = (process.env.WORKERS ?? '1,2,4').split(',').map(Number);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 64);
const SSE_CLIENTS = Number(process.env.SSE_CLIENTS ?? 40);
const HALF_LOAD_SECONDS = Number(process.env.HALF_LOAD_SECONDS ?? 10);
const RECOVER_RUNS = Number(process.env.RECOVER_RUNS ?? 1000);
const RECOVER_CONCURRENCY = Number(process.env.RECOVER_CONCURRENCY ?? 200);
const LEASE_MS = Number(process.env.LEASE_MS ?? 2000);
/** Runs a measured worker process executes first, on a place of its own (0: it starts cold). */
const WORKER_WARMUP_RUNS = Number(process.env.WORKER_WARMUP_RUNS ?? 200);
const FLOOR_ROUNDS = Number(process.env.FLOOR_ROUNDS ?? 9);
const FLOOR_RUNS = Number(process.env.FLOOR_RUNS ?? 20);
const FLOOR_STEPS = Number(process.env.FLOOR_STEPS ?? 200);
const FLOOR_BYTES = process.env.FLOOR_BYTES === undefined ? undefined : Number(process.env.FLOOR_BYTES);
const BACKENDS = (process.env.BACKENDS ?? 'postgres,sqlite').split(',') as Array<'postgres' | 'sqlite'>;
/** Which parts run: a (throughput, half load), b (recovery), c (one at a time); all by default. */
const PARTS = new Set((process.env.PARTS ?? 'a,b,c').split(','));
const PG_URL = process.env.KEEL_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const JSON_OUT = process.argv.includes('--json');
/** Set by the parent in worker processes whose queries are counted. */
const COUNT_QUERIES = process.env.KEEL_BENCH_COUNT_QUERIES === '1';

const SELF = fileURLToPath(import.meta.url);
const POINTS_PER_RUN = TOOL_STEPS + 1;
const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'timed_out']);
/** pg_stat_database: a backend reports its counts within about a second of going idle (and at its exit). */
const STATS_SETTLE_MS = 1100;
const fmt = (n: number | null, digits = 0) =>
  n === null || !Number.isFinite(n)
    ? 'n/a'
    : n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The human-readable lines: on stderr under --json, stdout carrying the JSON object alone. */
const say = (line: string) => (JSON_OUT ? process.stderr.write(`${line}\n`) : console.log(line));

/** Where a variant's data lives: a SQLite file, or a PostgreSQL schema. */
type Place = { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string; schema: string };
type PgPlace = Extract<Place, { kind: 'postgres' }>;

async function open(place: Place): Promise<Store> {
  if (place.kind === 'sqlite') return new SqliteStore({ path: place.path, synchronous: 'FULL', busyTimeoutMs: 30_000 });
  const s = new PostgresStore({ url: place.url, schema: place.schema, poolSize: Number(process.env.POOL ?? 8) });
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

const quantile = (xs: number[], q: number): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

// ---------------------------------------------------------------------------------------------
// Worker processes

type Mode = 'throughput' | 'hold' | 'release';

/**
 * `node cluster.ts worker <place JSON> <mode> <concurrency> <id>`: 'ready', then works on 'start';
 * with KEEL_BENCH_COUNT_QUERIES, counts its queries from 'start' and answers 'counters' with them.
 */
async function workerProcess(place: Place, mode: Mode, concurrency: number, id: string): Promise<void> {
  // A worker of a cluster runs for a long time: what is measured is its steady state, not its
  // first seconds of compiling (the doomed worker of (b) is not measured).
  if (mode !== 'hold') await warmUp(place, mode, concurrency, id);
  const store = await open(place);
  let inFlight = 0;
  const rt = createRuntime({
    store,
    agents: [agent(mode, () => mode === 'hold' && ++inFlight === RECOVER_RUNS && process.send!('all-running'))],
    leaseMs: LEASE_MS,
  });
  const tally = new QueryTally();
  // Installed now, so that every backend this process uses is known (its LISTEN connection's too).
  if (COUNT_QUERIES) countQueriesInto(null);
  process.on('message', (m) => {
    if (m === 'start') {
      if (COUNT_QUERIES) countQueriesInto(tally);
      rt.startWorker({ id, concurrency, pollMs: 20 });
    }
    if (m === 'counters') process.send!({ counters: { ...tally.snapshot(), pids: seenPids() } });
  });
  process.send!('ready');
}

/**
 * WORKER_WARMUP_RUNS runs of the worker's agent executed by this process on a place of its own
 * (a schema, a file: the measured one is not touched), at the measured concurrency, then dropped.
 */
async function warmUp(place: Place, mode: Mode, concurrency: number, id: string): Promise<void> {
  if (WORKER_WARMUP_RUNS <= 0) return;
  const warm: Place =
    place.kind === 'postgres'
      ? { ...place, schema: `${place.schema}_warm_${id}` }
      : { kind: 'sqlite', path: `${place.path}.warm-${id}` };
  const store = await open(warm);
  const rt = createRuntime({ store, agents: [agent(mode)], leaseMs: LEASE_MS });
  for (let i = 0; i < WORKER_WARMUP_RUNS; i++) await rt.sessions.send((await rt.sessions.create()).id, `warm-up ${i}`);
  rt.startWorker({ concurrency, pollMs: 20 });
  await allTerminal(store);
  await rt.close();
  await store.close();
  if (warm.kind === 'sqlite') for (const f of ['', '-wal', '-shm']) rmSync(warm.path + f, { force: true });
  else await dropSchema(warm.url, warm.schema);
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await c.end();
}

interface WorkerHandle {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<void>;
  message(m: string): Promise<void>;
  counters(): Promise<TallySnapshot>;
}

function spawnWorker(place: Place, mode: Mode, concurrency: number, id: string, count = false): WorkerHandle {
  const child = spawn(process.execPath, [SELF, 'worker', JSON.stringify(place), mode, String(concurrency), id], {
    // A worker prints nothing of its own; whatever it does print stays off the JSON's stdout.
    stdio: ['ignore', JSON_OUT ? 2 : 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, KEEL_BENCH_COUNT_QUERIES: count ? '1' : '0' },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const answer = <T>(pick: (m: unknown) => T | undefined, what: string) =>
    new Promise<T>((resolve, reject) => {
      const on = (m: unknown) => {
        const v = pick(m);
        if (v === undefined) return;
        child.off('message', on);
        resolve(v);
      };
      child.on('message', on);
      void exited.then(() => reject(new Error(`worker ${id} exited before '${what}'`)));
    });
  const message = (want: string) => answer((m) => (m === want ? true : undefined), want).then(() => {});
  const counters = () => {
    const a = answer((m) => (m as { counters?: TallySnapshot } | null)?.counters, 'counters');
    child.send('counters');
    return a;
  };
  return { child, ready: message('ready'), exited, message, counters };
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

// ---------------------------------------------------------------------------------------------
// Server cost

/** A measured phase's cost per step, from the client's counts and the server's samples. */
interface ServerCost {
  runs: number;
  steps: number;
  /** Durable points: runs × (TOOL_STEPS + 1), a step of this agent being one. */
  points: number;
  roundTripsPerStep: number;
  roundTripsPerPoint: number;
  /** Calls of the commit queue (keel_append_many) a step: the durable points made outside a lifecycle transaction. */
  appendCallsPerStep: number;
  /** Round trips a run, all in: its claim, start, steps and end. */
  roundTripsPerRun: number | null;
  statementsPerStep: number;
  /** Statements by pg_stat_statements (every client of the server), when it is loaded. */
  pgStatStatementsPerStep: number | null;
  transactionsPerStep: number;
  /**
   * pg_stat_database's xact_commit over the phase, less this process's API and meter transactions
   * ((a) only). More than the client's count: a LISTENing backend reads the notifications it is
   * sent in a transaction of its own (the worker's and the API's LISTEN connection each, about once
   * a commit), and any other client of the database adds to it.
   */
  dbTransactionsPerStep: number | null;
  /** The server's WAL position moved by this ÷ steps: every client's WAL (see server-cost.ts). */
  walBytesPerStep: number;
  /** The measured schema's own WAL records (and their commits) ÷ steps, by pg_walinspect; null without it. */
  schemaWalBytesPerStep: number | null;
  /** Of which full-page images. */
  schemaWalFpiBytesPerStep: number | null;
  /** Own backends + the server's background processes; null when the server is not local. */
  serverCpuUsPerStep: number | null;
  cpu: {
    ownBackendsUsPerStep: number;
    backgroundUsPerStep: number;
    apiUsPerStep: number;
    otherUsPerStep: number;
  } | null;
  /** 1e6 ÷ serverCpuUsPerStep: steps a database core could commit a second at this cost. */
  stepsPerDbCoreSecond: number | null;
}

function costOf(
  o: { runs: number; steps: number; points: number },
  t: Omit<TallySnapshot, 'pids'>,
  d: ServerDiff,
  dbTx: number | null,
): ServerCost {
  const { runs, steps, points } = o;
  const server = d.cpu ? d.cpu.ownUs + d.cpu.backgroundUs : null;
  return {
    runs,
    steps,
    points,
    roundTripsPerStep: t.roundTrips / steps,
    roundTripsPerPoint: t.roundTrips / points,
    appendCallsPerStep: t.appendCalls / steps,
    roundTripsPerRun: runs > 0 ? t.roundTrips / runs : null,
    statementsPerStep: t.statements / steps,
    pgStatStatementsPerStep: d.statements ? d.statements.calls / steps : null,
    transactionsPerStep: t.transactions / steps,
    dbTransactionsPerStep: dbTx === null ? null : dbTx / steps,
    walBytesPerStep: d.walBytes / steps,
    schemaWalBytesPerStep: d.schemaWal ? d.schemaWal.bytes / steps : null,
    schemaWalFpiBytesPerStep: d.schemaWal ? d.schemaWal.fpiBytes / steps : null,
    serverCpuUsPerStep: server === null ? null : server / steps,
    cpu: d.cpu && {
      ownBackendsUsPerStep: d.cpu.ownUs / steps,
      backgroundUsPerStep: d.cpu.backgroundUs / steps,
      apiUsPerStep: d.cpu.apartUs / steps,
      otherUsPerStep: d.cpu.otherUs / steps,
    },
    stepsPerDbCoreSecond: server === null ? null : 1e6 / (server / steps),
  };
}

const addTally = (a: TallySnapshot, b: TallySnapshot): TallySnapshot => ({
  queries: a.queries + b.queries,
  roundTrips: a.roundTrips + b.roundTrips,
  appendCalls: a.appendCalls + b.appendCalls,
  statements: a.statements + b.statements,
  transactions: a.transactions + b.transactions,
  rollbacks: a.rollbacks + b.rollbacks,
  pids: [...a.pids, ...b.pids],
});
const noTally = (): TallySnapshot => ({
  queries: 0,
  roundTrips: 0,
  appendCalls: 0,
  statements: 0,
  transactions: 0,
  rollbacks: 0,
  pids: [],
});
const addWal = (a: SchemaWal | null | undefined, b: SchemaWal | null | undefined): SchemaWal | null =>
  a && b ? { bytes: a.bytes + b.bytes, fpiBytes: a.fpiBytes + b.fpiBytes, records: a.records + b.records } : null;
const addDiff = (a: ServerDiff, b: ServerDiff): ServerDiff => ({
  walBytes: a.walBytes + b.walBytes,
  schemaWal: addWal(a.schemaWal, b.schemaWal),
  cpu:
    a.cpu && b.cpu
      ? {
          ownUs: a.cpu.ownUs + b.cpu.ownUs,
          backgroundUs: a.cpu.backgroundUs + b.cpu.backgroundUs,
          apartUs: a.cpu.apartUs + b.cpu.apartUs,
          otherUs: a.cpu.otherUs + b.cpu.otherUs,
        }
      : null,
  statements:
    a.statements && b.statements
      ? { calls: a.statements.calls + b.statements.calls, walBytes: a.statements.walBytes + b.statements.walBytes }
      : null,
});
const noDiff = (meter: ServerMeter): ServerDiff => ({
  walBytes: 0,
  schemaWal: { bytes: 0, fpiBytes: 0, records: 0 },
  cpu: meter.local ? { ownUs: 0, backgroundUs: 0, apartUs: 0, otherUs: 0 } : null,
  statements: meter.pgStatStatements ? { calls: 0, walBytes: 0 } : null,
});

function costLine(c: ServerCost): string {
  const cpu = c.cpu
    ? `server CPU ${fmt(c.serverCpuUsPerStep)} µs (backends ${fmt(c.cpu.ownBackendsUsPerStep)}, background ${fmt(c.cpu.backgroundUsPerStep)}; this process's API ${fmt(c.cpu.apiUsPerStep)}, other clients ${fmt(c.cpu.otherUsPerStep)}) = ${fmt(c.stepsPerDbCoreSecond)} steps/s per database core`
    : 'server CPU n/a';
  const db = c.dbTransactionsPerStep === null ? '' : ` (pg_stat_database ${fmt(c.dbTransactionsPerStep, 2)})`;
  const pgss = c.pgStatStatementsPerStep === null ? '' : ` (pg_stat_statements ${fmt(c.pgStatStatementsPerStep, 2)})`;
  const perRun =
    c.roundTripsPerRun === null
      ? ''
      : `; ${fmt(c.roundTripsPerRun, 1)} a run, of which ${fmt(c.appendCallsPerStep * (c.steps / Math.max(1, c.runs)), 1)} commit-queue calls`;
  return `a step: ${fmt(c.roundTripsPerStep, 2)} round trips (${fmt(c.roundTripsPerPoint, 2)} a durable point${perRun}), ${fmt(c.statementsPerStep, 2)} statements${pgss}, ${fmt(c.transactionsPerStep, 2)} transactions${db}, ${fmt(c.walBytesPerStep)} WAL bytes${c.schemaWalBytesPerStep === null ? '' : ` (the schema's own ${fmt(c.schemaWalBytesPerStep)}, full-page images ${fmt(c.schemaWalFpiBytesPerStep)})`}, ${cpu}`;
}

// ---------------------------------------------------------------------------------------------
// (a) throughput and SSE delivery, saturated

interface ThroughputResult {
  backend: string;
  workers: number;
  concurrency: number;
  stepsPerSec: number;
  runsPerSec: number;
  ms: number;
  sseEvents: number;
  sseP50: number;
  sseP99: number;
  serverCost: ServerCost | null;
}

/** This process's API (no worker) on `store`, on a free port. */
const apiServer = (store: Store) =>
  startServer({
    store,
    config: { source: null, agents: [agent('throughput')], compaction: {}, demo: false },
    port: 0,
    workers: 0,
    version: 'bench',
  });

async function throughput(place: Place, workers: number, meter: ServerMeter | null): Promise<ThroughputResult> {
  const store = await open(place);
  const ids = await createRuns(store, RUNS);
  const server = await apiServer(store);
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
  const procs = Array.from({ length: workers }, (_, i) =>
    spawnWorker(place, 'throughput', CONCURRENCY, `w${i}`, meter !== null),
  );
  await Promise.all(procs.map((p) => p.ready));
  // The clients are connected and have read the (short) logs so far; on PostgreSQL, the setup's
  // transactions have reached pg_stat_database.
  await sleep(meter ? STATS_SETTLE_MS : 300);
  latencies.length = 0;
  const api = new QueryTally();
  let before: ServerSample | undefined;
  let txBefore: { commit: number } | undefined;
  const meterQueries0 = meter?.queries ?? 0;
  if (meter) {
    txBefore = await meter.transactions();
    before = await meter.sample();
    countQueriesInto(api);
  }
  const t0 = performance.now();
  for (const p of procs) p.child.send('start');
  await allTerminal(store);
  const ms = performance.now() - t0;
  let measured: { tally: TallySnapshot; diff: ServerDiff } | undefined;
  if (meter) {
    const after = await meter.sample();
    const tally = (await Promise.all(procs.map((p) => p.counters()))).reduce(addTally, noTally());
    measured = { tally, diff: meter.diff(before!, after, tally.pids, seenPids()) };
    if (place.kind === 'postgres') measured.diff.schemaWal = await meter.schemaWal(before!, after, place.schema);
  }
  // Every run has ended, its events committed: the workers go (their idle looks for more work
  // would only add to pg_stat_database's count) while the SSE clients read to their runs' ends.
  for (const p of procs) p.child.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
  const deadline = Date.now() + 10_000;
  while (ended.size < Math.min(SSE_CLIENTS, ids.length) && Date.now() < deadline) await sleep(20);
  for (const es of sources) es.close();
  await server.close({ graceMs: 0 });
  let serverCost: ServerCost | null = null;
  if (meter && measured) {
    // The workers' backends reported at their exit; this process's report within a second of going idle.
    countQueriesInto(null);
    await sleep(STATS_SETTLE_MS);
    const meterQueries = meter.queries - meterQueries0;
    const txAfter = await meter.transactions();
    const dbTx = txAfter.commit - txBefore!.commit - api.transactions - meterQueries;
    const steps = RUNS * POINTS_PER_RUN;
    serverCost = costOf({ runs: RUNS, steps, points: steps }, measured.tally, measured.diff, dbTx);
  }
  const counts = await store.runs.countByStatus();
  if (counts.completed !== RUNS) throw new Error(`only ${counts.completed} of ${RUNS} runs completed`);
  await store.close();
  const steps = RUNS * POINTS_PER_RUN;
  return {
    backend: place.kind,
    workers,
    concurrency: CONCURRENCY,
    stepsPerSec: steps / (ms / 1000),
    runsPerSec: RUNS / (ms / 1000),
    ms,
    sseEvents: latencies.length,
    sseP50: quantile(latencies, 0.5),
    sseP99: quantile(latencies, 0.99),
    serverCost,
  };
}

// ---------------------------------------------------------------------------------------------
// (a') SSE delivery at half the saturating load, runs arriving open-loop

interface HalfLoadResult {
  backend: string;
  offeredRunsPerSec: number;
  /** Runs sent ÷ the time from the first send to the last one's start. */
  achievedRunsPerSec: number;
  runs: number;
  /** The latest a send started after its time in the schedule. */
  maxSendLagMs: number;
  sseClients: number;
  sseEvents: number;
  sseP50: number;
  sseP99: number;
}

async function halfLoad(place: Place, runsPerSec: number): Promise<HalfLoadResult> {
  const store = await open(place);
  const n = Math.max(1, Math.round(runsPerSec * HALF_LOAD_SECONDS));
  const rt = createRuntime({ store, agents: [agent('throughput')] });
  const sessions: string[] = [];
  for (let i = 0; i < n; i++) sessions.push((await rt.sessions.create()).id);
  const server = await apiServer(store);
  const latencies: number[] = [];
  const sources: EventSource[] = [];
  let counting = false;
  const followed = Math.min(n, SSE_CLIENTS);
  let done = 0;
  // Spread over the arrivals: the first ones, when the worker is idle, would flatter it.
  for (let k = 0; k < followed; k++) {
    const i = Math.floor((k * n) / followed);
    const es = new EventSource(`${server.url}/v1/sessions/${sessions[i]}/stream`);
    es.addEventListener('message', (m) => {
      const e = JSON.parse(m.data as string) as { time: string; type: string; data: { to?: string } };
      // The send's events (its message, the run queued) are committed here, not by the worker.
      const sent = e.type === 'user/message' || (e.type === 'run/status' && e.data.to === 'queued');
      if (counting && !sent && e.type !== 'session/created') latencies.push(Date.now() - Date.parse(e.time));
      if (e.type === 'run/status' && TERMINAL.has(e.data.to ?? '')) {
        done++;
        es.close();
      }
    });
    sources.push(es);
  }
  const proc = spawnWorker(place, 'throughput', CONCURRENCY, 'half');
  await proc.ready;
  await sleep(300); // the clients are connected
  proc.child.send('start');
  await sleep(100);
  counting = true;
  const gapMs = 1000 / runsPerSec;
  const sends: Array<Promise<unknown>> = [];
  let maxLag = 0;
  const t0 = performance.now();
  let lastStart = t0;
  for (let i = 0; i < n; i++) {
    const at = t0 + i * gapMs;
    const wait = at - performance.now();
    if (wait > 0) await sleep(wait);
    lastStart = performance.now();
    maxLag = Math.max(maxLag, lastStart - at);
    sends.push(rt.sessions.send(sessions[i]!, `task ${i}`));
  }
  await Promise.all(sends);
  await allTerminal(store);
  const deadline = Date.now() + 10_000;
  while (done < followed && Date.now() < deadline) await sleep(20);
  for (const es of sources) es.close();
  proc.child.kill('SIGKILL');
  await proc.exited;
  await server.close({ graceMs: 0 });
  await rt.close();
  const counts = await store.runs.countByStatus();
  if (counts.completed !== n) throw new Error(`only ${counts.completed} of ${n} runs completed at half load`);
  await store.close();
  return {
    backend: place.kind,
    offeredRunsPerSec: runsPerSec,
    achievedRunsPerSec: n > 1 ? (n - 1) / ((lastStart - t0) / 1000) : n,
    runs: n,
    maxSendLagMs: maxLag,
    sseClients: followed,
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
  /** From the last lease's expiry until every run is terminal. */
  afterExpiryMs: number;
}

async function recovery(place: Place): Promise<RecoveryResult> {
  const store = await open(place);
  const rt = createRuntime({ store, agents: [agent('hold')] });
  for (let i = 0; i < RECOVER_RUNS; i++) await rt.sessions.send((await rt.sessions.create()).id, `task ${i}`);
  await rt.close();
  const doomed = spawnWorker(place, 'hold', RECOVER_RUNS, 'doomed');
  // The rescuer is a worker of the cluster that was running already (warmed up, see warmUp): it
  // starts looking for work when the doomed one is killed.
  const rescuer = spawnWorker(place, 'release', RECOVER_CONCURRENCY, 'rescuer');
  await Promise.all([doomed.ready, rescuer.ready]);
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
  rescuer.child.send('start');
  await allTerminal(store);
  const recoveredMs = Date.now() - killedAt;
  rescuer.child.kill('SIGKILL');
  await rescuer.exited;
  const counts = await store.runs.countByStatus();
  if (counts.completed !== RECOVER_RUNS)
    throw new Error(`only ${counts.completed} of ${RECOVER_RUNS} runs completed after recovery`);
  await store.close();
  const leaseWaitMs = Math.max(0, lastExpiry - killedAt);
  return {
    backend: place.kind,
    runs: RECOVER_RUNS,
    toAllRunningMs,
    leaseWaitMs,
    recoveredMs,
    afterExpiryMs: recoveredMs - leaseWaitMs,
  };
}

// ---------------------------------------------------------------------------------------------
// (c) one PostgreSQL step against a floor on the same server, in alternating rounds, in this process

interface OneAtATimeResult {
  rounds: number;
  runsPerRound: number;
  floorStepsPerRound: number;
  floorBytes: number;
  /** Keel's rows' bytes a step after the warm-up round (pg_column_size of every table's rows ÷ steps). */
  keelRowBytesPerStep: number;
  stepUs: number;
  floorUs: number;
  ratio: number;
  /**
   * A tool step alone, without its run's claim, start and end: the median time between the
   * commits of two consecutive tool steps of a run (their `step/end` published here), and its
   * ratio to the floor of the same round (median of the rounds).
   */
  toolStepUs: number;
  toolStepRatio: number;
  roundTripUs: number;
  stepUsByRound: number[];
  floorUsByRound: number[];
  ratioByRound: number[];
  serverCost: ServerCost;
  /** The floor's cost per step (its transaction) on the same measures. */
  floorServerCost: ServerCost;
}

async function oneAtATime(place: PgPlace, meter: ServerMeter): Promise<OneAtATimeResult> {
  const store = await open(place);
  const rt = createRuntime({ store, agents: [agent('throughput')] });
  const keelTally = new QueryTally();
  let keelDiff = noDiff(meter);
  /** The floor's connection's backend, once it is open: not Keel's. */
  let floorPid: number | null = null;
  // A session followed for the whole phase: the LISTEN connection that following opens stays open,
  // not opened again inside a measured round when the rounds' runs are followed.
  const held = await rt.sessions.create();
  const holdOff = rt.sessions.subscribe(held.id, () => {});

  /** FLOOR_RUNS runs queued, then executed one at a time by a worker here; µs a step. */
  /** Between two consecutive tool steps' commits of a run, µs (this round's), and the last commit's time by session. */
  let stepGaps: number[] = [];
  const lastStepEnd = new Map<string, number>();
  const keelRound = async (measured: boolean): Promise<number> => {
    stepGaps = [];
    const sessions: string[] = [];
    for (let i = 0; i < FLOOR_RUNS; i++) {
      const s = await rt.sessions.create();
      await rt.sessions.send(s.id, `task ${i}`);
      sessions.push(s.id);
    }
    // The last run's end as this process's log publishes its commit: no poll between it and the clock.
    let left = FLOOR_RUNS;
    let allEnded!: () => void;
    const ended = new Promise<void>((resolve) => (allEnded = resolve));
    const offs = sessions.map((id) =>
      rt.sessions.subscribe(id, (item) => {
        if (item.kind === 'event' && item.event.type === 'step/end') {
          const now = performance.now();
          const last = lastStepEnd.get(id);
          if (last !== undefined && measured) stepGaps.push((now - last) * 1000);
          lastStepEnd.set(id, now);
        }
        if (item.kind !== 'event' || item.event.type !== 'run/status') return;
        if (TERMINAL.has((item.event.data as { to: string }).to) && --left === 0) allEnded();
      }),
    );
    const before = await meter.sample();
    if (measured) countQueriesInto(keelTally);
    const t0 = performance.now();
    const worker = rt.startWorker({ id: 'one', concurrency: 1, pollMs: 5 });
    await ended;
    const us = ((performance.now() - t0) * 1000) / (FLOOR_RUNS * POINTS_PER_RUN);
    countQueriesInto(null);
    const after = await meter.sample();
    // This process's backends but the floor's connection: the pool's, the LISTEN connection's.
    const own = seenPids().filter((p) => p !== floorPid);
    if (measured)
      keelDiff = addDiff(keelDiff, {
        ...meter.diff(before, after, own),
        schemaWal: await meter.schemaWal(before, after, place.schema),
      });
    for (const off of offs) off();
    await worker.stop();
    return us;
  };

  // A warm-up round; then the bytes its rows hold a step, the floor's row size.
  await keelRound(false);
  const c = await store.runs.countByStatus();
  if (c.completed !== FLOOR_RUNS) throw new Error(`warm-up: ${c.completed} of ${FLOOR_RUNS} runs completed`);
  const client = new pg.Client({ connectionString: place.url });
  await client.connect();
  floorPid = (client as pg.Client & { processID: number | null }).processID;
  const schema = `"${place.schema}"`;
  let rowBytes = 0;
  const tables = await client.query<{ t: string }>(
    `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`,
    [place.schema],
  );
  for (const { t } of tables.rows) {
    const r = await client.query<{ b: string }>(
      `SELECT coalesce(sum(pg_column_size(x.*)), 0)::text AS b FROM ${schema}."${t}" x`,
    );
    rowBytes += Number(r.rows[0]!.b);
  }
  const keelRowBytesPerStep = rowBytes / (FLOOR_RUNS * POINTS_PER_RUN);
  const floorBytes = FLOOR_BYTES ?? Math.round(keelRowBytesPerStep);
  const table = `${schema}."bench_floor"`;
  // Stored as it is, in the row: a row over ~2 KB would be compressed (this one to almost nothing)
  // or moved out of line, and the floor would not write the bytes it stands for.
  await client.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, data text NOT NULL)`);
  await client.query(`ALTER TABLE ${table} ALTER COLUMN data SET STORAGE PLAIN`);
  const row = 'x'.repeat(floorBytes);
  const floorTally = new QueryTally();
  let floorDiff = noDiff(meter);
  const floorRound = async (n: number, measured: boolean): Promise<{ floorUs: number; roundTripUs: number }> => {
    const before = await meter.sample();
    if (measured) countQueriesInto(floorTally);
    let t = performance.now();
    for (let i = 0; i < n; i++) {
      await client.query('BEGIN');
      await client.query({ name: 'floor', text: `INSERT INTO ${table} (data) VALUES ($1)`, values: [row] });
      await client.query('COMMIT');
    }
    const floorUs = ((performance.now() - t) * 1000) / n;
    countQueriesInto(null);
    const after = await meter.sample();
    if (measured)
      floorDiff = addDiff(floorDiff, {
        ...meter.diff(before, after, floorTally.pids),
        schemaWal: await meter.schemaWal(before, after, place.schema),
      });
    t = performance.now();
    for (let i = 0; i < n; i++) await client.query({ name: 'one', text: 'SELECT 1' });
    return { floorUs, roundTripUs: ((performance.now() - t) * 1000) / n };
  };
  await floorRound(Math.ceil(FLOOR_STEPS / 4), false);

  const stepUsByRound: number[] = [];
  const toolStepUsByRound: number[] = [];
  const floorUsByRound: number[] = [];
  const roundTrips: number[] = [];
  for (let r = 0; r < FLOOR_ROUNDS; r++) {
    const f = await floorRound(FLOOR_STEPS, true);
    floorUsByRound.push(f.floorUs);
    roundTrips.push(f.roundTripUs);
    stepUsByRound.push(await keelRound(true));
    toolStepUsByRound.push(median(stepGaps));
  }
  await client.query(`DROP TABLE ${table}`);
  await client.end();
  const counts = await store.runs.countByStatus();
  const runs = FLOOR_RUNS * (FLOOR_ROUNDS + 1);
  if (counts.completed !== runs) throw new Error(`(c): ${counts.completed} of ${runs} runs completed`);
  holdOff();
  await rt.close();
  await store.close();
  const ratioByRound = stepUsByRound.map((s, i) => s / floorUsByRound[i]!);
  const measuredRuns = FLOOR_RUNS * FLOOR_ROUNDS;
  const floorSteps = FLOOR_STEPS * FLOOR_ROUNDS;
  return {
    rounds: FLOOR_ROUNDS,
    runsPerRound: FLOOR_RUNS,
    floorStepsPerRound: FLOOR_STEPS,
    floorBytes,
    keelRowBytesPerStep,
    stepUs: median(stepUsByRound),
    toolStepUs: median(toolStepUsByRound),
    toolStepRatio: median(toolStepUsByRound.map((s, i) => s / floorUsByRound[i]!)),
    floorUs: median(floorUsByRound),
    ratio: median(ratioByRound),
    roundTripUs: median(roundTrips),
    stepUsByRound,
    floorUsByRound,
    ratioByRound,
    serverCost: costOf(
      { runs: measuredRuns, steps: measuredRuns * POINTS_PER_RUN, points: measuredRuns * POINTS_PER_RUN },
      keelTally,
      keelDiff,
      null,
    ),
    // A floor transaction is one step and one point.
    floorServerCost: costOf({ runs: 0, steps: floorSteps, points: floorSteps }, floorTally, floorDiff, null),
  };
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
    await dropSchema(PG_URL, schema);
  }
}

async function main(): Promise<void> {
  const startedAt = performance.now();
  const load = loadavg();
  say(
    `keel cluster benchmark — node ${process.version}, ${cpus().length} CPUs, load average ${load.map((x) => fmt(x, 2)).join(' ')}; PostgreSQL ${PG_URL.replace(/:[^:@/]*@/, ':***@')}`,
  );
  const usePg = BACKENDS.includes('postgres');
  const meter = usePg ? new ServerMeter(PG_URL) : null;
  await meter?.open();
  // Counting nothing yet, but knowing every backend this process uses from now on.
  if (usePg) countQueriesInto(null);
  for (const note of meter?.notes ?? []) say(`  note: ${note}`);

  say(
    `(a) ${fmt(RUNS)} runs × ${TOOL_STEPS} tool steps (+1) = ${fmt(RUNS * POINTS_PER_RUN)} steps, all queued first; worker processes (each warmed up by ${fmt(WORKER_WARMUP_RUNS)} runs) × concurrency ${CONCURRENCY}; ${SSE_CLIENTS} SSE clients on this process's API`,
  );
  const rows: ThroughputResult[] = [];
  for (const workers of PARTS.has('a') ? WORKERS : []) {
    for (const backend of BACKENDS) {
      const r = await withPlace(backend, (place) =>
        throughput(place, workers, place.kind === 'postgres' ? meter : null),
      );
      rows.push(r);
      say(
        `    ${backend.padEnd(8)} ${workers} worker${workers > 1 ? 's' : ' '}: ${fmt(r.stepsPerSec).padStart(6)} steps/s (${fmt(r.ms)} ms, ${fmt(r.runsPerSec, 1)} runs/s); SSE delivery p50 ${fmt(r.sseP50)} ms, p99 ${fmt(r.sseP99)} ms (${fmt(r.sseEvents)} events)`,
      );
      if (r.serverCost) say(`             ${costLine(r.serverCost)}`);
    }
  }
  const saturated = rows.find((r) => r.backend === 'postgres' && r.workers === 1);

  let half: HalfLoadResult | null = null;
  if (saturated) {
    say(
      `(a') PostgreSQL, 1 worker process: runs arriving open-loop at half the saturating rate (${fmt(saturated.runsPerSec / 2, 1)} runs/s) for ${HALF_LOAD_SECONDS} s; SSE clients on this process's API follow ${SSE_CLIENTS} of them`,
    );
    half = await withPlace('postgres', (place) => halfLoad(place, saturated.runsPerSec / 2));
    say(
      `    SSE delivery p50 ${fmt(half.sseP50)} ms, p99 ${fmt(half.sseP99)} ms (${fmt(half.sseEvents)} events), against ${fmt(saturated.sseP50)} / ${fmt(saturated.sseP99)} ms saturated; ${fmt(half.runs)} runs sent at ${fmt(half.achievedRunsPerSec, 1)} runs/s (a send at most ${fmt(half.maxSendLagMs)} ms late)`,
    );
  }

  say(
    `(b) recovery: ${fmt(RECOVER_RUNS)} runs in flight, their worker process SIGKILLed; another worker process, running before the kill (lease ${fmt(LEASE_MS)} ms, concurrency ${RECOVER_CONCURRENCY})`,
  );
  const recoveries: RecoveryResult[] = [];
  for (const backend of PARTS.has('b') ? BACKENDS : []) {
    const r = await withPlace(backend, recovery);
    recoveries.push(r);
    say(
      `    ${backend.padEnd(8)}: all ${fmt(r.runs)} running after ${fmt(r.toAllRunningMs)} ms; after the kill, leases expired within ${fmt(r.leaseWaitMs)} ms, all terminal after ${fmt(r.recoveredMs)} ms (${fmt(r.afterExpiryMs)} ms after the last expiry)`,
    );
  }

  let one: OneAtATimeResult | null = null;
  if (meter && PARTS.has('c')) {
    one = await withPlace('postgres', (place) => oneAtATime(place as PgPlace, meter));
    say(
      `(c) one run at a time on PostgreSQL, in this process: ${one.rounds} rounds alternately of ${fmt(one.floorStepsPerRound)} floor transactions (BEGIN, one ${fmt(one.floorBytes)}-byte INSERT, COMMIT; Keel's rows hold ${fmt(one.keelRowBytesPerStep)} B a step) and ${one.runsPerRound} runs × ${POINTS_PER_RUN} steps at concurrency 1`,
    );
    say(
      `    durable step ${fmt(one.stepUs)} µs; floor ${fmt(one.floorUs)} µs: ${fmt(one.ratio, 2)}× the floor (median of the rounds' ratios: ${one.ratioByRound.map((x) => fmt(x, 1)).join(' ')}); a round trip (SELECT 1) ${fmt(one.roundTripUs)} µs`,
    );
    say(
      `    a tool step alone (its commit to the next one's, claim, start and end aside): ${fmt(one.toolStepUs)} µs, ${fmt(one.toolStepRatio, 2)}× the floor`,
    );
    say(`    Keel:  ${costLine(one.serverCost)}`);
    say(`    floor: ${costLine(one.floorServerCost)}`);
  }
  await meter?.close();
  const pgRecovery = recoveries.find((r) => r.backend === 'postgres');
  say(`(${fmt((performance.now() - startedAt) / 1000)} s)`);

  if (JSON_OUT) {
    const result = {
      pgStepUs: one?.stepUs ?? null,
      pgFloorUs: one?.floorUs ?? null,
      pgRatio: one?.ratio ?? null,
      pgToolStepUs: one?.toolStepUs ?? null,
      pgToolStepRatio: one?.toolStepRatio ?? null,
      roundTripsPerPoint: one?.serverCost.roundTripsPerPoint ?? null,
      stepsPerSecond: saturated?.stepsPerSec ?? null,
      recoveryMs: pgRecovery?.afterExpiryMs ?? null,
      walBytesPerStep: saturated?.serverCost?.walBytesPerStep ?? null,
      serverCpuUsPerStep: saturated?.serverCost?.serverCpuUsPerStep ?? null,
      sseP99HalfLoadMs: half?.sseP99 ?? null,
      sseP50HalfLoadMs: half?.sseP50 ?? null,
      sseP99SaturatedMs: saturated?.sseP99 ?? null,
      sseP50SaturatedMs: saturated?.sseP50 ?? null,
      serverCost: { oneAtATime: one?.serverCost ?? null, saturated: saturated?.serverCost ?? null },
      throughput: rows,
      halfLoad: half,
      recovery: recoveries,
      oneAtATime: one,
      config: {
        runs: RUNS,
        toolSteps: TOOL_STEPS,
        workers: WORKERS,
        concurrency: CONCURRENCY,
        sseClients: SSE_CLIENTS,
        halfLoadSeconds: HALF_LOAD_SECONDS,
        recoverRuns: RECOVER_RUNS,
        recoverConcurrency: RECOVER_CONCURRENCY,
        workerWarmupRuns: WORKER_WARMUP_RUNS,
        leaseMs: LEASE_MS,
        floorRounds: FLOOR_ROUNDS,
        floorRuns: FLOOR_RUNS,
        floorSteps: FLOOR_STEPS,
        backends: BACKENDS,
      },
      machine: { node: process.version, cpus: cpus().length, loadAverage: load },
      notes: meter?.notes ?? [],
      seconds: (performance.now() - startedAt) / 1000,
    };
    console.log(JSON.stringify(result));
  }
}

if (process.argv[2] === 'worker') {
  await workerProcess(
    JSON.parse(process.argv[3]!) as Place,
    process.argv[4] as Mode,
    Number(process.argv[5]),
    process.argv[6]!,
  );
} else {
  await main();
}
