/**
 * Retention beside the durable hot path. A SQLite file (WAL, synchronous=FULL) gets OLD_SESSIONS
 * (100,000) sessions 400 days old, cloned in bulk from one real session (a run of 3 tool steps: its
 * log, entries and blob references; the clones have no run rows). Then rounds alternate: `alone`,
 * ROUND_RUNS durable runs of bench:durable's workload (TOOL_STEPS tool steps + 1 answer, public
 * API, one run at a time, each on a new session) in this process; `sweep`, the same while another
 * process sweeps (a runtime's `retention.sweep()` with a policy that archives sessions idle 30
 * days to a directory archive store, 100 per batch): it exports, compresses, writes and fsyncs
 * each archive, then moves the logs out, 20 sessions per short write transaction. The sweeper
 * runs only during the `sweep` rounds (started before, killed after; it carries on where the
 * previous one stopped: what is archived is not idle any more). Reported: µs per durable step
 * (median of the round's runs), the ratio sweep / alone (median of the pairs' ratios), and the
 * sweep's rate (sessions archived per second of sweep rounds, its start included; and alone, over
 * SOLO_SECONDS once started).
 *
 * Run with `npm run bench:retention`; `-- --json` prints one JSON object.
 * Env: OLD_SESSIONS (100000), ROUNDS (10 pairs, which goes first alternating), ROUND_RUNS (20), TOOL_STEPS (10), WARMUP (10 runs),
 * SWEEP_PAUSE_MS (0: the sweeper's pause between batches), SWEEP_DUTY (0.25: the share of the time it works),
 * SOLO_SECONDS (10).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  createRuntime,
  defineAgent,
  DirectoryArchiveStore,
  ScriptedModel,
  SqliteStore,
  tool,
  type Runtime,
} from '../src/index.ts';
import { idKey } from '../src/store/sqlite/id-keys.ts';
import { benchAgent } from './durable-workload.ts';
import { z } from 'zod';

const OLD_SESSIONS = Number(process.env.OLD_SESSIONS ?? 100_000);
const ROUNDS = Number(process.env.ROUNDS ?? 10);
const ROUND_RUNS = Number(process.env.ROUND_RUNS ?? 20);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 10);
const WARMUP = Number(process.env.WARMUP ?? 10);
/** How long the sweeper's own rate is measured, alone. */
const SOLO_SECONDS = Number(process.env.SOLO_SECONDS ?? 10);
const JSON_OUT = process.argv.includes('--json');
/** The sweeper's pause between batches (retention.pauseMs). */
const SWEEP_PAUSE_MS = Number(process.env.SWEEP_PAUSE_MS ?? 0);
/** The sweeper's duty cycle (retention.dutyCycle; the runtime's default 0.25). */
const SWEEP_DUTY = Number(process.env.SWEEP_DUTY ?? 0.25);
const STEPS = TOOL_STEPS + 1;
const DAY = 86_400_000;

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const log = (s: string) => {
  if (!JSON_OUT) console.log(s);
};

/** The sweeper process: sweeps until killed. */
async function sweeper(path: string, archiveDir: string): Promise<void> {
  const store = new SqliteStore({ path });
  const rt = createRuntime({
    store,
    agents: [defineAgent({ name: 'x', model: new ScriptedModel([{ text: 'ok' }], { loop: true }) })],
    retention: {
      archive: new DirectoryArchiveStore(archiveDir),
      settings: { sessions: { archiveAfterDays: 30 }, tables: {} },
      batchSize: 100,
      pauseMs: SWEEP_PAUSE_MS,
      dutyCycle: SWEEP_DUTY,
    },
  });
  process.send!('ready');
  for (;;) {
    const r = await rt.retention.sweep();
    if (r.sessions.archived === 0) await new Promise((res) => setTimeout(res, 100));
  }
}

/** One real session with a run of 3 tool steps, then OLD_SESSIONS clones of its rows, 400 days old. */
async function seed(path: string): Promise<void> {
  const store = new SqliteStore({ path });
  const agent = defineAgent({
    name: 'seed',
    model: new ScriptedModel(
      [
        { text: 'looking', toolCalls: [{ name: 'echo', input: { n: 1 } }] },
        { text: 'more', toolCalls: [{ name: 'echo', input: { n: 2 } }] },
        { text: 'again', toolCalls: [{ name: 'echo', input: { n: 3 } }] },
        { text: 'All done: the three lookups agree. '.repeat(4) },
      ],
      { loop: true },
    ),
    system: 'You are the seed agent.',
    tools: [
      tool({
        name: 'echo',
        description: 'echoes',
        input: z.object({ n: z.number() }),
        execute: ({ n }) => `echo ${n}`,
      }),
    ],
  });
  const rt = createRuntime({ store, agents: [agent] });
  rt.startWorker({ concurrency: 1 });
  const s = await rt.sessions.create({ title: 'an old conversation' });
  const { run } = await rt.sessions.send(s.id, 'Please look this up three times and tell me.');
  await rt.runs.wait(run.id, { until: 'terminal' });
  await rt.close();
  await store.close();

  const db = new Database(path);
  const columns = (t: string) => (db.pragma(`table_info(${t})`) as Array<{ name: string }>).map((c) => c.name);
  const clone = (table: string, key: string, replace: Record<string, string>) => {
    const cols = columns(table);
    const select = cols.map((c) => replace[c] ?? c).join(', ');
    return db.prepare(
      `INSERT INTO ${table} (${cols.join(', ')}) SELECT ${select} FROM ${table} WHERE ${key} = @template`,
    );
  };
  const sessions = clone('sessions', 'id', { id: '@id', created_at: '@created_at' });
  const batches = clone('event_batches', 'session_id', { session_id: '@key' });
  const entries = clone('entries', 'session_id', { session_id: '@key' });
  const refs = clone('blob_refs', 'session_id', { session_id: '@key' });
  const old = Date.now() - 400 * DAY;
  const template = s.id;
  const templateKey = idKey(template);
  db.transaction(() => {
    for (let i = 0; i < OLD_SESSIONS; i++) {
      const id = randomUUID();
      const key = idKey(id);
      sessions.run({ id, created_at: old + i, template });
      batches.run({ key, template: templateKey });
      entries.run({ key, template: templateKey });
      refs.run({ key, template: templateKey });
    }
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

async function durableRun(rt: Runtime): Promise<number> {
  const s = await rt.sessions.create({ title: 'bench' });
  const t0 = performance.now();
  const { run } = await rt.sessions.send(s.id, 'count');
  const done = await rt.runs.wait(run.id, { until: 'terminal' });
  const us = ((performance.now() - t0) * 1000) / STEPS;
  if (done.status !== 'completed') throw new Error(`bench run ${run.id} ended ${done.status}`);
  return us;
}

async function startSweeper(path: string, archiveDir: string): Promise<ChildProcess> {
  const child = fork(new URL(import.meta.url).pathname, ['--sweeper', path, archiveDir], { stdio: 'inherit' });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`the sweeper exited (${code})`)));
  });
  return child;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-bench-retention-'));
  const path = join(dir, 'keel.db');
  const archiveDir = join(dir, 'archive');
  try {
    const t0 = performance.now();
    await seed(path);
    const seedSeconds = (performance.now() - t0) / 1000;
    log(`seeded ${OLD_SESSIONS.toLocaleString('en-US')} sessions 400 days old in ${seedSeconds.toFixed(1)} s`);

    const side = new Database(path, { readonly: true });
    const archivedCount = () => (side.prepare('SELECT count(*) AS n FROM session_archives').get() as { n: number }).n;
    const store = new SqliteStore({ path, synchronous: 'FULL' });
    const rt = createRuntime({
      store,
      agents: [benchAgent({ defineAgent, ScriptedModel, tool }, { toolSteps: TOOL_STEPS })],
      leaseMs: 60_000,
    });
    rt.startWorker({ id: 'bench', concurrency: 1, pollMs: 1000 });
    for (let i = 0; i < WARMUP; i++) await durableRun(rt);

    const alone: number[] = [];
    const swept: number[] = [];
    const ratios: number[] = [];
    let sweepSeconds = 0;
    let archived = 0;
    const aloneRound = async () => {
      const a: number[] = [];
      for (let i = 0; i < ROUND_RUNS; i++) a.push(await durableRun(rt));
      return median(a);
    };
    const sweepRound = async () => {
      const child = await startSweeper(path, archiveDir);
      const before = archivedCount();
      const started = performance.now();
      const w: number[] = [];
      for (let i = 0; i < ROUND_RUNS; i++) w.push(await durableRun(rt));
      const seconds = (performance.now() - started) / 1000;
      const n = archivedCount() - before;
      child.kill('SIGKILL');
      await new Promise((res) => child.once('exit', res));
      sweepSeconds += seconds;
      archived += n;
      return { us: median(w), n, seconds };
    };
    for (let r = 0; r < ROUNDS; r++) {
      // Which goes first alternates (alone, sweep; sweep, alone; …): drift of the shared machine within a pair weighs on both sides.
      let a: number;
      let w: Awaited<ReturnType<typeof sweepRound>>;
      if (r % 2 === 0) {
        a = await aloneRound();
        w = await sweepRound();
      } else {
        w = await sweepRound();
        a = await aloneRound();
      }
      alone.push(a);
      swept.push(w.us);
      ratios.push(w.us / a);
      log(
        `pair ${r + 1}: alone ${a.toFixed(0)} µs/step, beside the sweep ${w.us.toFixed(0)} µs/step (×${(w.us / a).toFixed(2)}); the sweep archived ${w.n} sessions in ${w.seconds.toFixed(1)} s`,
      );
    }
    await rt.close();
    await store.close();
    // The sweep's own rate: the sweeper alone for SOLO_SECONDS, once started (no durable runs beside it).
    const solo = await startSweeper(path, archiveDir);
    const soloBefore = archivedCount();
    await new Promise((res) => setTimeout(res, SOLO_SECONDS * 1000));
    const soloArchived = archivedCount() - soloBefore;
    solo.kill('SIGKILL');
    await new Promise((res) => solo.once('exit', res));
    side.close();
    const result = {
      oldSessions: OLD_SESSIONS,
      seedSeconds: Number(seedSeconds.toFixed(1)),
      toolSteps: TOOL_STEPS,
      roundRuns: ROUND_RUNS,
      rounds: ROUNDS,
      aloneUsPerStep: alone.map((x) => Math.round(x)),
      sweepUsPerStep: swept.map((x) => Math.round(x)),
      ratio: Number(median(ratios).toFixed(3)),
      sweepSessionsPerSecond: Number((archived / sweepSeconds).toFixed(1)),
      archived,
      soloSessionsPerSecond: Number((soloArchived / SOLO_SECONDS).toFixed(1)),
      sweepPauseMs: SWEEP_PAUSE_MS,
      sweepDutyCycle: SWEEP_DUTY,
      loadavg: loadavg().map((x) => Number(x.toFixed(2))),
    };
    if (JSON_OUT) console.log(JSON.stringify(result));
    else
      log(
        `durable step beside a sweep (duty cycle ${SWEEP_DUTY}) / alone: ×${result.ratio} (median of ${ROUNDS} pairs); the sweep archived ${result.sweepSessionsPerSecond} sessions/s beside them (${archived} in ${sweepSeconds.toFixed(1)} s, its start included), ${result.soloSessionsPerSecond} sessions/s alone; load average ${result.loadavg.join(' ')}`,
      );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--sweeper') await sweeper(process.argv[3]!, process.argv[4]!);
else await main();
