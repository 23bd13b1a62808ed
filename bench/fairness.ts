/**
 * Fair dispatch across tenants (ADR-0042), on embedded SQLite (a temp file, durable commits) or,
 * with `--pg`, on PostgreSQL (a schema of its own at $KEEL_BENCH_DATABASE_URL or the local test
 * database):
 *
 * (a) the whole runtime: tenant A enqueues A_RUNS runs (one tool step and an answer each, a
 *     zero-latency scripted model; 100 sends at a time) with no worker running; tenant B then enqueues one; a worker (CONCURRENCY slots)
 *     starts. Reported: which claim took B's run (B's run starts within one claim round: 2 claims
 *     with two tenants). Then, while A's backlog drains, B sends one run every B_EVERY_MS ms:
 *     the p50/p99 of their wait (started − created), next to how long A's backlog took to drain
 *     (what a run of B's would have waited behind it, oldest first).
 * (b) the store's claim: CLAIM_RUNS queued runs spread over 1, 10 and 100 tenants, claimed one by
 *     one until none is left (timed inside transactions: the commit is not in the figure): the
 *     cost per claim (mean, p50, p99), and that of claiming a named run (`runId`: no pick, one
 *     probe by id and the tenant's charge) as the floor.
 *
 * Run with `npm run bench:fairness [-- --pg]` (env A_RUNS, CONCURRENCY, B_EVERY_MS, CLAIM_RUNS).
 * Prints a table and the figures as JSON (last line).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { z } from 'zod';
import { CLAIM_POLICY, createRuntime, defineAgent, isTerminal, tool, type Runtime } from '../src/index.ts';
import type { RunRecord, Store } from '../src/store/index.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';
import { SqliteStore } from '../src/store/sqlite/index.ts';
import { stepsModel } from './steps-model.ts';

const PG = process.argv.includes('--pg');
const PG_URL = process.env.KEEL_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
// On PostgreSQL, 10,000 sends take minutes on this machine: 2,000 by default there.
const A_RUNS = Number(process.env.A_RUNS ?? (PG ? 2000 : 10_000));
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 32);
const B_EVERY_MS = Number(process.env.B_EVERY_MS ?? 100);
const CLAIM_RUNS = Number(process.env.CLAIM_RUNS ?? (PG ? 2000 : 5000));
const TENANT_COUNTS = [1, 10, 100];

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A fresh store (a temp SQLite file, or a PostgreSQL schema), removed after `fn`. */
async function withStore<T>(fn: (store: Store) => Promise<T>): Promise<T> {
  if (!PG) {
    const dir = mkdtempSync(join(tmpdir(), 'keel-bench-fairness-'));
    const store = new SqliteStore({ path: join(dir, 'keel.db') });
    try {
      return await fn(store);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const schema = `keel_bench_${randomBytes(4).toString('hex')}`;
  const store = new PostgresStore({ url: PG_URL, schema });
  try {
    return await fn(store);
  } finally {
    await store.close();
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  }
}

const agent = () =>
  defineAgent({
    name: 'bench',
    model: stepsModel(1),
    system: 'bench',
    tools: [
      tool({ name: 'inc', description: 'increments', input: z.object({ n: z.number() }), execute: ({ n }) => n + 1 }),
    ],
    limits: { maxSteps: 2 },
  });

async function send(rt: Runtime, tenant: string, text: string): Promise<RunRecord> {
  const s = await rt.sessions.create({ tenant });
  return (await rt.sessions.send(s.id, text)).run;
}

interface RuntimePart {
  aRuns: number;
  enqueueSeconds: number;
  /** Which claim (1 = the first) took B's first run. */
  bFirstClaim: number;
  bRuns: number;
  bWaitP50Ms: number;
  bWaitP99Ms: number;
  bWaitMaxMs: number;
  drainSeconds: number;
  runsPerSecond: number;
}

async function runtimePart(store: Store): Promise<RuntimePart> {
  const rt = createRuntime({ store, agents: [agent()] });
  const t0 = performance.now();
  // 100 sends at a time: their commits are grouped, as a busy API's are.
  for (let i = 0; i < A_RUNS; i += 100)
    await Promise.all(Array.from({ length: Math.min(100, A_RUNS - i) }, (_, j) => send(rt, 'a', `a ${i + j}`)));
  const enqueueSeconds = (performance.now() - t0) / 1000;
  const bFirst = await send(rt, 'b', 'b 0');

  const started = performance.now();
  const worker = rt.startWorker({ concurrency: CONCURRENCY });
  const bRuns: RunRecord[] = [bFirst];
  // B keeps sending while A's backlog drains.
  for (;;) {
    await sleep(B_EVERY_MS);
    const queued = (await store.runs.countByStatus()).queued;
    if (queued === 0) break;
    bRuns.push(await send(rt, 'b', `b ${bRuns.length}`));
  }
  // Every run ended.
  for (;;) {
    const counts = await store.runs.countByStatus();
    if (Object.entries(counts).every(([status, n]) => n === 0 || isTerminal(status as RunRecord['status']))) break;
    await sleep(20);
  }
  const drainSeconds = (performance.now() - started) / 1000;
  await worker.stop();
  await rt.close();

  const b = await Promise.all(bRuns.map((r) => store.runs.get(r.id)));
  const waits = b.map((r) => r!.startedAt! - r!.createdAt);
  const firstStart = b[0]!.startedAt!;
  // Claims before B's first: A's runs started before it (every run was claimed after the worker started).
  const before = (await store.runs.list({ tenant: 'a', limit: A_RUNS + 10 })).filter(
    (r) => r.startedAt !== null && r.startedAt < firstStart,
  ).length;
  return {
    aRuns: A_RUNS,
    enqueueSeconds,
    bFirstClaim: before + 1,
    bRuns: b.length,
    bWaitP50Ms: quantile(waits, 0.5),
    bWaitP99Ms: quantile(waits, 0.99),
    bWaitMaxMs: Math.max(...waits),
    drainSeconds,
    runsPerSecond: (A_RUNS + b.length) / drainSeconds,
  };
}

interface ClaimCost {
  tenants: number;
  runs: number;
  meanUs: number;
  p50Us: number;
  p99Us: number;
}

/** `n` queued runs, round robin over `tenants` tenants (a session each), in one transaction. */
async function fill(store: Store, n: number, tenants: number): Promise<string[]> {
  const ids: string[] = [];
  const now = Date.now();
  await store.transaction(async (tx) => {
    for (let i = 0; i < n; i++) {
      const sessionId = `s${i}`;
      await tx.sessions.create({ id: sessionId, tenant: `t${i % tenants}`, createdAt: now });
      const r = await tx.runs.create({
        id: `r${String(i).padStart(7, '0')}`,
        sessionId,
        agent: { name: 'bench', version: '1' },
        agentSpec: { model: 'scripted' },
        createdAt: now + i,
      });
      ids.push(r.id);
    }
  });
  return ids;
}

/**
 * The cost of one claim: claims are timed one by one inside transactions of BATCH claims, so that
 * the commit (an fsync, the same for any pick) is not in the figure; each claimed run then ends,
 * as a worker's would, so that the running runs stay few.
 */
async function claimCost(tenants: number, named: boolean): Promise<ClaimCost> {
  const BATCH = 50;
  return withStore(async (store) => {
    const ids = await fill(store, CLAIM_RUNS, tenants);
    const times: number[] = [];
    const now = Date.now();
    let done = false;
    while (!done) {
      await store.transaction(async (tx) => {
        for (let n = 0; n < BATCH; n++) {
          const t = performance.now();
          const c = await tx.claims.claim(
            'w',
            600_000,
            now,
            CLAIM_POLICY,
            named ? { runId: ids[times.length] } : undefined,
          );
          if (!c) {
            done = true;
            return;
          }
          times.push((performance.now() - t) * 1000);
          await tx.runs.update(c.run.id, { status: 'completed', endedAt: now });
        }
      });
      if (times.length === CLAIM_RUNS) done = true;
    }
    if (times.length !== CLAIM_RUNS) throw new Error(`claimed ${times.length} of ${CLAIM_RUNS} runs`);
    return {
      tenants,
      runs: CLAIM_RUNS,
      meanUs: times.reduce((a, b) => a + b, 0) / times.length,
      p50Us: quantile(times, 0.5),
      p99Us: quantile(times, 0.99),
    };
  });
}

const backend = PG ? 'PostgreSQL' : 'SQLite';
const runtime = await withStore(runtimePart);
const costs: ClaimCost[] = [];
for (const t of TENANT_COUNTS) costs.push(await claimCost(t, false));
const floor = await claimCost(1, true);

console.log(`\nbench:fairness on ${backend} (${A_RUNS} runs of A, worker concurrency ${CONCURRENCY})\n`);
console.log(`| measure | value |`);
console.log(`|---|---|`);
console.log(`| A's runs enqueued (no worker) | ${fmt(A_RUNS)} in ${fmt(runtime.enqueueSeconds, 1)} s |`);
console.log(`| claim that took B's first run | #${runtime.bFirstClaim} |`);
console.log(
  `| B's runs while A's backlog drained: wait p50 / p99 / max | ${fmt(runtime.bWaitP50Ms)} / ${fmt(runtime.bWaitP99Ms)} / ${fmt(runtime.bWaitMaxMs)} ms (${runtime.bRuns} runs) |`,
);
console.log(
  `| A's backlog drained in (oldest-first, B's wait would be up to this) | ${fmt(runtime.drainSeconds, 1)} s (${fmt(runtime.runsPerSecond)} runs/s) |`,
);
console.log(`\n| tenants with queued runs | claims | mean | p50 | p99 |`);
console.log(`|---|---|---|---|---|`);
for (const c of costs)
  console.log(`| ${c.tenants} | ${fmt(c.runs)} | ${fmt(c.meanUs)} µs | ${fmt(c.p50Us)} µs | ${fmt(c.p99Us)} µs |`);
console.log(
  `| named run (runId, no pick: floor) | ${fmt(floor.runs)} | ${fmt(floor.meanUs)} µs | ${fmt(floor.p50Us)} µs | ${fmt(floor.p99Us)} µs |`,
);
console.log(JSON.stringify({ bench: 'fairness', backend, runtime, claimCost: costs, namedClaimFloor: floor }));
