/**
 * Durable runs on one worker, on embedded SQLite with durable commits (WAL, synchronous=FULL, a
 * temp file):
 *
 * (a) throughput: RUNS concurrent runs × TOOL_STEPS tool steps (+1 final step each) on ONE worker
 *     (concurrency CONCURRENCY) with a zero-latency scripted model: runs/s, steps/s, and the
 *     per-step overhead (wall time / total steps);
 * (b) recovery: a child process starts RECOVER_RUNS runs whose tool blocks forever, and is
 *     SIGKILLed once all of them are in flight; a fresh worker (lease LEASE_MS) then recovers them
 *     all to completion. Reported: the wait for the dead worker's leases to expire, and the time
 *     from the new worker's start until every run is terminal.
 *
 * Run with `npm run bench:runs` (env RUNS, TOOL_STEPS, CONCURRENCY, RECOVER_RUNS, LEASE_MS).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  isTerminal,
  SqliteStore,
  tool,
  type AgentDefinition,
  type Runtime,
} from '../src/index.ts';
import { stepsModel } from './steps-model.ts';

const RUNS = Number(process.env.RUNS ?? 1000);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 10);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 100);
const RECOVER_RUNS = Number(process.env.RECOVER_RUNS ?? 1000);
const LEASE_MS = Number(process.env.LEASE_MS ?? 2000);
const RECOVER_CONCURRENCY = Number(process.env.RECOVER_CONCURRENCY ?? 100);

const SELF = fileURLToPath(import.meta.url);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function throughputAgent(): AgentDefinition {
  return defineAgent({
    name: 'bench',
    model: stepsModel(TOOL_STEPS),
    system: 'bench',
    tools: [
      tool({ name: 'inc', description: 'increments', input: z.object({ n: z.number() }), execute: ({ n }) => n + 1 }),
    ],
    limits: { maxSteps: TOOL_STEPS + 1 },
  });
}

/** The recovery agent: one call of `hold` (idempotent), then an answer. `hold` blocks forever in the child. */
function recoveryAgent(blockForever: boolean, onStart?: () => void): AgentDefinition {
  return defineAgent({
    name: 'bench-recovery',
    model: stepsModel(1),
    system: 'bench',
    tools: [
      tool({
        name: 'inc',
        description: 'holds on',
        input: z.object({ n: z.number() }),
        idempotent: true,
        execute: async ({ n }) => {
          onStart?.();
          if (blockForever) await new Promise(() => {});
          return n + 1;
        },
      }),
    ],
  });
}

async function createRuns(rt: Runtime, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const s = await rt.sessions.create();
    await rt.sessions.send(s.id, `task ${i}`);
  }
}

/** Resolves when no run is queued or running (one cheap query every 50 ms). */
async function allTerminal(store: SqliteStore): Promise<void> {
  for (;;) {
    const left = await store.runs.list({ statuses: ['queued', 'running'], limit: 1 });
    if (left.length === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function throughput(dir: string): Promise<void> {
  const store = new SqliteStore({ path: join(dir, 'throughput.db'), synchronous: 'FULL' });
  const rt = createRuntime({ store, agents: [throughputAgent()], leaseMs: 60_000 });
  const c0 = performance.now();
  await createRuns(rt, RUNS);
  const createMs = performance.now() - c0;

  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const worker = rt.startWorker({ id: 'bench', concurrency: CONCURRENCY, pollMs: 20 });
  await allTerminal(store);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await worker.stop();

  const runs = await store.runs.list({ limit: RUNS + 1 });
  const completed = runs.filter((r) => r.status === 'completed').length;
  if (completed !== RUNS) throw new Error(`only ${completed} of ${RUNS} runs completed`);
  const steps = RUNS * (TOOL_STEPS + 1);
  console.log(
    `(a) throughput: ${fmt(RUNS)} runs × ${TOOL_STEPS} tool steps (+1 final step each) = ${fmt(steps)} steps on ONE worker, concurrency ${CONCURRENCY}`,
  );
  console.log(`    zero-latency scripted model, SQLite file (WAL, synchronous=FULL) in ${tmpdir()}`);
  console.log(`    creating the ${fmt(RUNS)} runs (not counted): ${fmt(createMs)} ms`);
  console.log(`    wall time        : ${fmt(ms)} ms`);
  console.log(`    runs/s           : ${fmt(RUNS / (ms / 1000), 1)}`);
  console.log(`    steps/s          : ${fmt(steps / (ms / 1000))}`);
  console.log(
    `    per-step overhead: ${fmt((ms * 1000) / steps, 1)} µs (wall time / total steps; a tool step is 6 events in 1 or 2 commits (ADR-0008), group-committed across runs)`,
  );
  console.log(
    `    CPU per step     : ${fmt(cpu.user / steps, 1)} µs user + ${fmt(cpu.system / steps, 1)} µs system (this process)`,
  );
  await store.close();
}

/** The child of (b): starts the runs, reports once all are in flight, and waits to be killed. */
async function recoveryChild(db: string): Promise<void> {
  const store = new SqliteStore({ path: db, synchronous: 'FULL' });
  let inFlight = 0;
  const rt = createRuntime({
    store,
    agents: [
      recoveryAgent(true, () => {
        if (++inFlight === RECOVER_RUNS) process.send!({ type: 'all-running' });
      }),
    ],
    leaseMs: LEASE_MS,
  });
  await createRuns(rt, RECOVER_RUNS);
  process.send!({ type: 'created' });
  rt.startWorker({ id: 'doomed', concurrency: RECOVER_RUNS, pollMs: 20 });
}

async function recovery(dir: string): Promise<void> {
  const db = join(dir, 'recovery.db');
  const child = spawn(process.execPath, [SELF, 'recovery-child', db], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: process.env,
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_code, signal) => resolve(signal)),
  );
  let createdAt = 0;
  const s0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    child.on('message', (m: { type: string }) => {
      if (m.type === 'created') createdAt = performance.now();
      if (m.type === 'all-running') resolve();
    });
    void exited.then(() => reject(new Error('the child exited before all its runs were running')));
  });
  const startMs = performance.now() - createdAt;
  child.kill('SIGKILL');
  if ((await exited) !== 'SIGKILL') throw new Error('the child was not killed');
  const killedAt = Date.now();

  const store = new SqliteStore({ path: db, synchronous: 'FULL' });
  const before = await store.runs.list({ limit: RECOVER_RUNS + 1 });
  const running = before.filter((r) => r.status === 'running');
  if (running.length !== RECOVER_RUNS)
    throw new Error(`${running.length} of ${RECOVER_RUNS} runs were running at the kill`);
  const expiries = running.map((r) => r.lease!.expiresAt);

  const rt = createRuntime({ store, agents: [recoveryAgent(false)], leaseMs: LEASE_MS });
  const startedAt = Date.now();
  const t0 = performance.now();
  const worker = rt.startWorker({ id: 'rescuer', concurrency: RECOVER_CONCURRENCY, pollMs: 20 });
  await allTerminal(store);
  const ms = performance.now() - t0;
  await worker.stop();

  const after = await store.runs.list({ limit: RECOVER_RUNS + 1 });
  const completed = after.filter((r) => r.status === 'completed').length;
  if (completed !== RECOVER_RUNS || after.some((r) => !isTerminal(r.status)))
    throw new Error(`only ${completed} of ${RECOVER_RUNS} runs completed after recovery`);
  const firstExpiry = Math.max(0, Math.min(...expiries) - startedAt);
  const lastExpiry = Math.max(0, Math.max(...expiries) - startedAt);
  console.log(
    `(b) recovery: ${fmt(RECOVER_RUNS)} runs in flight (each blocked in an idempotent tool) when their worker process was SIGKILLed`,
  );
  console.log(
    `    child: ${fmt(createdAt - s0)} ms to start and create the runs, then ${fmt(startMs)} ms until all ${fmt(RECOVER_RUNS)} were running (concurrency ${RECOVER_RUNS})`,
  );
  console.log(
    `    new worker: leaseMs ${fmt(LEASE_MS)}, concurrency ${RECOVER_CONCURRENCY}, started ${fmt(startedAt - killedAt)} ms after the kill`,
  );
  console.log(
    `    lease-expiry wait: first lease expired ${fmt(firstExpiry)} ms, last ${fmt(lastExpiry)} ms after the new worker started`,
  );
  console.log(`    all ${fmt(RECOVER_RUNS)} terminal (completed) ${fmt(ms)} ms after the new worker started`);
  console.log(
    `    = ${fmt(ms - lastExpiry)} ms after the last lease expired (${fmt((ms - firstExpiry) / RECOVER_RUNS, 2)} ms per run from the first expiry)`,
  );
  await store.close();
}

if (process.argv[2] === 'recovery-child') {
  await recoveryChild(process.argv[3]!);
} else {
  const dir = mkdtempSync(join(tmpdir(), 'keel-bench-runs-'));
  console.log(`keel runs benchmark — node ${process.version}, ${cpus().length} CPUs`);
  try {
    await throughput(dir);
    await recovery(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
