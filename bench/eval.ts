/**
 * Evaluations (issue 40), through the public API (runtime.evals) on a SqliteStore file
 * (synchronous as by default: FULL), with a zero-latency scripted agent in two versions whose runs
 * take STEPS steps each (TOOL_STEPS calls of a trivial idempotent tool, then an answer; version 2
 * answers in other words). Not timed: RUNS runs recorded one at a time (a new session each,
 * sessions.send + runs.wait, a worker of concurrency CONCURRENCY), RUNS × STEPS recorded steps.
 * Then REPS repetitions of each figure; reported: the median, with the spread (min–max):
 *
 *   dataset      rt.evals.datasets.create({ runs }) of the RUNS runs: µs per item (each item a
 *                frozen copy of its run, every step's request context rebuilt from the log);
 *   replay       an experiment in step_replay mode, one candidate (version 1, the recording one),
 *                concurrency CONCURRENCY, from experiments.create to rt.evals.wait's answer
 *                (polling every POLL_MS): replayed steps/s and µs per replayed step (wall ÷ steps);
 *                checked untimed: every replayed request has its recorded fingerprint, every
 *                score is 1;
 *   durable      the floor, in each repetition half right before the replay, half right after:
 *                DURABLE_RUNS runs of the same agent one at a time through the public API, as
 *                bench:durable times them (a new session each, untimed; sessions.send +
 *                runs.wait timed): µs per durable step. `replay / durable`: the repetition's ratio;
 *   fsync        the physical floor under both, measured after the durable runs: better-sqlite3
 *                alone, FSYNC_COMMITS INSERTs of a 200-byte row, each committed (one fsync): µs;
 *   durable ×C   a second floor: max(DURABLE_RUNS, 8 × CONCURRENCY) runs, CONCURRENCY at a time
 *                (their commits grouped), µs per durable step; `replay / durable ×C`;
 *   inner        replaySteps (src/runs/evals/step-replay.ts) called directly over the dataset's
 *                frozen runs, one after another, no store, no batch: µs per replayed step;
 *                against the in-memory loop (runTurn + MemorySink, runs of STEPS steps, the same
 *                agent), `inner / loop`; each the median of INNER_PASSES passes, alternated;
 *   experiment   RUNS items × 2 candidates (versions 1 and 2) in step_replay mode at concurrency
 *                CONCURRENCY, create to wait: batch items/s (2 × RUNS items);
 *   rerun        the same in rerun mode (each item a full durable rerun of its run, tools by
 *                their default policy): batch items/s; not repeated after one over RERUN_LIMIT_S.
 *
 * Each figure has its CPU time (process.cpuUsage, user + system: it can exceed wall time, V8's
 * GC threads count too) and, on the store's paths, the write transactions committed (SqliteStore
 * commitCount; with synchronous=FULL each one waits for an fsync, on the event loop's thread).
 * Before the repetitions, untimed: a dataset, one experiment of each kind and the inner passes
 * warm the paths up; in the first experiment the items running at once are sampled
 * (store.batches.counts every 2 ms): the concurrency an experiment reaches in one process.
 *
 * Run with `npm run bench:eval`: a table, then all figures as one JSON object on the last line;
 * `npm run -s bench:eval -- --json` prints the JSON only.
 *
 * Env: RUNS (200), TOOL_STEPS (4), CONCURRENCY (16), REPS (3), DURABLE_RUNS (60), INNER_PASSES (5),
 * FSYNC_COMMITS (200), LOOP_RUNS (200), POLL_MS (5), RERUN (1; 0 leaves it out), RERUN_LIMIT_S (60).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  MemorySink,
  runTurn,
  ScriptedModel,
  SqliteStore,
  tool,
  type AgentDefinition,
  type ExperimentMode,
  type FrozenRun,
  type Runtime,
  type ScriptedResponse,
} from '../src/index.ts';
import { replaySteps } from '../src/runs/evals/step-replay.ts';
import { SYSTEM } from './durable-workload.ts';

const RUNS = Number(process.env.RUNS ?? 200);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 4);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);
const REPS = Number(process.env.REPS ?? 3);
const DURABLE_RUNS = Number(process.env.DURABLE_RUNS ?? 60);
const INNER_PASSES = Number(process.env.INNER_PASSES ?? 5);
const FSYNC_COMMITS = Number(process.env.FSYNC_COMMITS ?? 200);
const LOOP_RUNS = Number(process.env.LOOP_RUNS ?? 200);
const POLL_MS = Number(process.env.POLL_MS ?? 5);
const RERUN = process.env.RERUN !== '0';
const RERUN_LIMIT_S = Number(process.env.RERUN_LIMIT_S ?? 60);
const JSON_OUT = process.argv.includes('--json');

const STEPS = TOOL_STEPS + 1;
/** Runs of the floor `durable ×C`: enough for CONCURRENCY at a time to stay busy. */
const DURABLE_C_RUNS = Math.max(DURABLE_RUNS, CONCURRENCY * 8);

const fmt = (n: number, digits = 1) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

// ---------------------------------------------------------------------------------------------
// The workload

/** Tool results since the last user message (a run's progress; the same in a step replay's request). */
function doneSince(prompt: ReadonlyArray<{ role: string }>): number {
  let n = 0;
  for (let i = prompt.length - 1; i >= 0 && prompt[i]!.role !== 'user'; i--) if (prompt[i]!.role === 'tool') n++;
  return n;
}

/**
 * A version of the agent: TOOL_STEPS calls of `inc`, then its answer. Each step is told by the
 * request it gets (not by a call count), so a step replay gets the recorded step's decision.
 */
function benchAgent(version: '1' | '2'): AgentDefinition {
  const answer = version === '1' ? 'done' : 'All done: the counter moved as asked.';
  return defineAgent({
    name: 'bench',
    version,
    model: new ScriptedModel(
      [
        (call): ScriptedResponse => {
          const done = doneSince(call.prompt);
          return done >= TOOL_STEPS
            ? { text: answer }
            : { text: 'working', toolCalls: [{ id: `c${done + 1}`, name: 'inc', input: { n: done } }] };
        },
      ],
      // Calls are not kept: the benchmark makes thousands.
      { loop: true, recordCalls: false, modelId: `bench-${version}` },
    ),
    system: SYSTEM,
    tools: [
      tool({
        name: 'inc',
        description: 'increments',
        input: z.object({ n: z.number() }),
        idempotent: true,
        execute: ({ n }) => n + 1,
      }),
    ],
    limits: { maxSteps: STEPS },
  });
}

// ---------------------------------------------------------------------------------------------
// Measuring

type Sample = { ms: number; cpuUs: number; commits: number };

/** Times `fn`: wall ms, this process's CPU µs (user + system), the store's write transactions. */
async function timed<T>(store: SqliteStore | undefined, fn: () => Promise<T>): Promise<Sample & { value: T }> {
  const k0 = store?.commitCount ?? 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  return { ms, cpuUs: cpu.user + cpu.system, commits: (store?.commitCount ?? 0) - k0, value };
}

/** One run on a new session (created untimed), as bench:durable times it: send, then runs.wait. */
async function oneRun(rt: Runtime, store: SqliteStore, i: number): Promise<Sample & { value: string }> {
  const s = await rt.sessions.create();
  return timed(store, async () => {
    const { run } = await rt.sessions.send(s.id, `Task ${i}: count up, one step at a time.`, { agent: 'bench@1' });
    const ended = await rt.runs.wait(run.id, { until: 'terminal' });
    if (ended.status !== 'completed') throw new Error(`run ${run.id} ended ${ended.status}`);
    return run.id;
  });
}

/** `n` runs one at a time: their sends and waits only (the sessions' creation is not counted). */
async function durableSerial(rt: Runtime, store: SqliteStore, n: number): Promise<Sample> {
  const total: Sample = { ms: 0, cpuUs: 0, commits: 0 };
  for (let i = 0; i < n; i++) {
    const r = await oneRun(rt, store, i);
    total.ms += r.ms;
    total.cpuUs += r.cpuUs;
    total.commits += r.commits;
  }
  return total;
}

const plus = (a: Sample, b: Sample): Sample => ({
  ms: a.ms + b.ms,
  cpuUs: a.cpuUs + b.cpuUs,
  commits: a.commits + b.commits,
});

/** `n` runs, `concurrency` at a time (sessions created before, untimed). */
async function durableConcurrent(rt: Runtime, store: SqliteStore, n: number, concurrency: number): Promise<Sample> {
  const sessions: string[] = [];
  for (let i = 0; i < n; i++) sessions.push((await rt.sessions.create()).id);
  let next = 0;
  return timed(store, () =>
    Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let i = next++; i < n; i = next++) {
          const { run } = await rt.sessions.send(sessions[i]!, `Task ${i}: count up.`, { agent: 'bench@1' });
          const ended = await rt.runs.wait(run.id, { until: 'terminal' });
          if (ended.status !== 'completed') throw new Error(`run ${run.id} ended ${ended.status}`);
        }
      }),
    ),
  );
}

/**
 * An experiment from experiments.create to rt.evals.wait's answer (timed), then checked (untimed):
 * every item done, the recording version's replay byte for byte (each request's fingerprint) and
 * scored 1.
 */
async function experiment(
  rt: Runtime,
  store: SqliteStore,
  dataset: string,
  candidates: string[],
  mode: ExperimentMode,
): Promise<Sample & { items: number }> {
  const r = await timed(store, async () => {
    const exp = await rt.evals.experiments.create({ dataset, candidates, mode, concurrency: CONCURRENCY });
    const end = await rt.evals.wait(exp.id, { pollMs: POLL_MS, timeoutMs: 600_000 });
    if (end.status !== 'completed') throw new Error(`experiment ${exp.id} ended ${end.status}`);
    return exp.id;
  });
  const results = await rt.evals.experiments.results(r.value);
  const items = RUNS * candidates.length;
  if (results.counts.done !== items)
    throw new Error(`experiment ${r.value}: ${JSON.stringify(results.counts)}, expected ${items} done`);
  const v1 = results.candidates.find((c) => c.label === 'bench@1');
  if (v1 && v1.scores.score !== 1) throw new Error(`bench@1 scored ${JSON.stringify(v1.scores)}, not 1`);
  if (mode === 'step_replay') {
    for (let after: number | undefined; ;) {
      const page = await rt.evals.experiments.items(r.value, {
        limit: 500,
        ...(after !== undefined ? { afterPosition: after } : {}),
      });
      for (const i of page)
        if ((i.subject as { candidate: string }).candidate === 'bench@1' && i.result?.requestsMatched !== STEPS)
          throw new Error(`item ${i.id}: ${String(i.result?.requestsMatched)} of ${STEPS} requests matched`);
      if (page.length < 500) break;
      after = page.at(-1)!.position;
    }
  }
  return { ms: r.ms, cpuUs: r.cpuUs, commits: r.commits, items };
}

/** The most items running at once, sampled every 2 ms while `fn` runs (store.batches.counts of the newest experiment: ids sort by creation). */
async function peakRunning(rt: Runtime, store: SqliteStore, fn: () => Promise<unknown>): Promise<number> {
  let peak = 0;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      const [latest] = await rt.evals.experiments.list({ limit: 1000 }).then((l) => l.slice(-1));
      if (latest) peak = Math.max(peak, (await store.batches.counts(latest.id)).running ?? 0);
      await sleep(2);
    }
  })();
  try {
    await fn();
  } finally {
    done = true;
    await sampler;
  }
  return peak;
}

/**
 * The fsync floor, as bench:durable's: better-sqlite3 alone on its own file (WAL,
 * synchronous=FULL), `n` INSERTs of a ~200-byte row, each its own transaction (one commit, one fsync).
 */
function fsyncFloor(path: string, n: number): Sample {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, data TEXT NOT NULL)');
    const insert = db.prepare<[string]>('INSERT INTO floor (data) VALUES (?)');
    const row = 'x'.repeat(200);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i++) insert.run(row);
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    return { ms, cpuUs: cpu.user + cpu.system, commits: n };
  } finally {
    db.close();
  }
}

/**
 * `passes` passes of replaySteps over the frozen runs and of the in-memory loop, alternately (each
 * pass is short: tens of ms, where one collection of the heap shows); each figure is the median pass.
 */
async function innerAndLoop(
  agent: AgentDefinition,
  frozen: readonly FrozenRun[],
  passes: number,
): Promise<{ inner: Sample; loop: Sample }> {
  const inner: Sample[] = [];
  const loops: Sample[] = [];
  for (let i = 0; i < passes; i++) {
    inner.push(await innerReplay(agent, frozen));
    loops.push(await loop(agent));
  }
  const mid = (xs: Sample[]): Sample => [...xs].sort((a, b) => a.ms - b.ms)[Math.floor(xs.length / 2)]!;
  return { inner: mid(inner), loop: mid(loops) };
}

/** replaySteps over the frozen runs, one after another: no store, no batch. */
async function innerReplay(agent: AgentDefinition, frozen: readonly FrozenRun[]): Promise<Sample> {
  return timed(undefined, async () => {
    for (const f of frozen) {
      const r = await replaySteps(agent, f);
      if (r.steps.length !== STEPS || r.steps.some((s) => !s.requestMatches))
        throw new Error(`replaySteps of run ${f.run.id}: not every request matched`);
    }
  });
}

/** The in-memory loop: LOOP_RUNS runs of STEPS steps (runTurn + MemorySink without deltas), empty history. */
async function loop(agent: AgentDefinition): Promise<Sample> {
  return timed(undefined, async () => {
    for (let i = 0; i < LOOP_RUNS; i++) {
      const r = await runTurn(agent, { sink: new MemorySink({ keepDeltas: false }), input: `Task ${i}`, turn: 1 });
      if (r.reason !== 'completed' || r.steps !== STEPS) throw new Error(`loop: ${r.reason} after ${r.steps} steps`);
    }
  });
}

// ---------------------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), 'keel-bench-eval-'));
const out = (line: string) => {
  if (!JSON_OUT) console.log(line);
};
const started = performance.now();
const load = loadavg();
try {
  const store = new SqliteStore({ path: join(dir, 'eval.db') });
  const v1 = benchAgent('1');
  const rt = createRuntime({ store, agents: [v1, benchAgent('2')], leaseMs: 60_000 });
  rt.startWorker({ id: 'bench', concurrency: CONCURRENCY, pollMs: 1000 });

  out(
    `keel evaluations benchmark — node ${process.version}, ${cpus().length} CPUs, load average ${load.map((x) => fmt(x, 2)).join(' ')}; SQLite file (synchronous=FULL) in ${tmpdir()}`,
  );
  // Recorded (not timed as a figure): RUNS runs one at a time, which also warm the durable path up.
  const rec = await timed(store, async () => {
    const ids: string[] = [];
    for (let i = 0; i < RUNS; i++) ids.push((await oneRun(rt, store, i)).value);
    return ids;
  });
  const runIds = rec.value;
  out(
    `  recorded ${RUNS} runs × ${STEPS} steps (${TOOL_STEPS} tool calls + an answer) = ${RUNS * STEPS} steps, one run at a time: ${fmt(rec.ms / 1000, 2)} s`,
  );

  // A dataset made untimed first (warm-up), then REPS timed.
  const datasets: Sample[] = [];
  let datasetId = '';
  for (let k = 0; k <= REPS; k++) {
    const d = await timed(store, () => rt.evals.datasets.create({ name: `bench ${k}`, runs: runIds }));
    if (d.value.itemCount !== RUNS) throw new Error(`dataset: ${d.value.itemCount} items, not ${RUNS}`);
    if (k > 0) datasets.push(d);
    datasetId ||= d.value.id;
  }
  const frozen: FrozenRun[] = [];
  for (let after: number | undefined; ;) {
    const page = await rt.evals.datasets.items(datasetId, {
      limit: 500,
      ...(after !== undefined ? { afterPosition: after } : {}),
    });
    frozen.push(...page.map((i) => i.data as unknown as FrozenRun));
    if (page.length < 500) break;
    after = page.at(-1)!.position;
  }
  if (frozen.some((f) => f.steps.length !== STEPS)) throw new Error(`a frozen run has not ${STEPS} steps`);

  // Warm-up (untimed): one experiment of each kind, the items running at once sampled in the first.
  const peak = await peakRunning(rt, store, () => experiment(rt, store, datasetId, ['bench@1'], 'step_replay'));
  await experiment(rt, store, datasetId, ['bench@1', 'bench@2'], 'step_replay');
  if (RERUN) await experiment(rt, store, datasetId, ['bench@1'], 'rerun');
  await innerAndLoop(v1, frozen, INNER_PASSES);
  out(`  warmed up: ${fmt((performance.now() - started) / 1000)} s since the start`);

  type Rep = {
    durable: Sample;
    fsync: Sample;
    durableC: Sample;
    replay: Sample;
    inner: Sample;
    loop: Sample;
    experiment: Sample;
    rerun?: Sample;
  };
  const reps: Rep[] = [];
  let rerunOn = RERUN;
  const half = Math.ceil(DURABLE_RUNS / 2);
  for (let k = 0; k < REPS; k++) {
    // The floor around the replay: half of its runs right before, half right after.
    const before = await durableSerial(rt, store, half);
    const replay = await experiment(rt, store, datasetId, ['bench@1'], 'step_replay');
    const durable = plus(before, await durableSerial(rt, store, DURABLE_RUNS - half));
    const fsync = fsyncFloor(join(dir, 'floor.db'), FSYNC_COMMITS);
    const durableC = await durableConcurrent(rt, store, DURABLE_C_RUNS, CONCURRENCY);
    const { inner, loop: lp } = await innerAndLoop(v1, frozen, INNER_PASSES);
    const exp = await experiment(rt, store, datasetId, ['bench@1', 'bench@2'], 'step_replay');
    const rep: Rep = { durable, fsync, durableC, replay, inner, loop: lp, experiment: exp };
    if (rerunOn) {
      rep.rerun = await experiment(rt, store, datasetId, ['bench@1', 'bench@2'], 'rerun');
      if (rep.rerun.ms > RERUN_LIMIT_S * 1000) rerunOn = false;
    }
    reps.push(rep);
  }
  await rt.close();
  await store.close();

  // Per repetition: the figures, then their medians and spreads.
  const durableC = DURABLE_C_RUNS;
  const perRep = reps.map((r) => ({
    durableUsPerStep: (r.durable.ms * 1000) / (DURABLE_RUNS * STEPS),
    durableCpuUsPerStep: r.durable.cpuUs / (DURABLE_RUNS * STEPS),
    durableCommitsPerStep: r.durable.commits / (DURABLE_RUNS * STEPS),
    fsyncUs: (r.fsync.ms * 1000) / FSYNC_COMMITS,
    durableConcurrentUsPerStep: (r.durableC.ms * 1000) / (durableC * STEPS),
    durableConcurrentCpuUsPerStep: r.durableC.cpuUs / (durableC * STEPS),
    durableConcurrentCommitsPerStep: r.durableC.commits / (durableC * STEPS),
    replayStepsPerSec: (RUNS * STEPS) / (r.replay.ms / 1000),
    replayUsPerStep: (r.replay.ms * 1000) / (RUNS * STEPS),
    replayCpuUsPerStep: r.replay.cpuUs / (RUNS * STEPS),
    replayCommitsPerItem: r.replay.commits / RUNS,
    replayVsDurable: r.replay.ms / (RUNS * STEPS) / (r.durable.ms / (DURABLE_RUNS * STEPS)),
    replayVsDurableConcurrent: r.replay.ms / (RUNS * STEPS) / (r.durableC.ms / (durableC * STEPS)),
    innerUsPerStep: (r.inner.ms * 1000) / (RUNS * STEPS),
    innerCpuUsPerStep: r.inner.cpuUs / (RUNS * STEPS),
    loopUsPerStep: (r.loop.ms * 1000) / (LOOP_RUNS * STEPS),
    innerVsLoop: r.inner.ms / (RUNS * STEPS) / (r.loop.ms / (LOOP_RUNS * STEPS)),
    experimentItemsPerSec: (2 * RUNS) / (r.experiment.ms / 1000),
    experimentMs: r.experiment.ms,
    experimentCpuMsPerItem: r.experiment.cpuUs / 1000 / (2 * RUNS),
    ...(r.rerun
      ? {
          rerunItemsPerSec: (2 * RUNS) / (r.rerun.ms / 1000),
          rerunMs: r.rerun.ms,
          rerunCpuMsPerItem: r.rerun.cpuUs / 1000 / (2 * RUNS),
          rerunCommitsPerItem: r.rerun.commits / (2 * RUNS),
        }
      : {}),
  }));
  type Key = keyof (typeof perRep)[number];
  const stat = (key: Key) => {
    const xs = perRep.flatMap((p) => (typeof p[key] === 'number' ? [p[key]] : []));
    return xs.length === 0 ? null : { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), all: xs };
  };
  const keys = [...new Set(perRep.flatMap((p) => Object.keys(p) as Key[]))];
  const figures = Object.fromEntries(keys.map((k) => [k, stat(k)])) as Record<Key, ReturnType<typeof stat>>;
  const datasetUsPerItem = datasets.map((d) => (d.ms * 1000) / RUNS);
  const result = {
    node: process.version,
    cpus: cpus().length,
    loadAverage: load,
    runs: RUNS,
    steps: STEPS,
    concurrency: CONCURRENCY,
    reps: REPS,
    durableRuns: DURABLE_RUNS,
    durableConcurrentRuns: durableC,
    peakRunningItems: peak,
    recordSeconds: rec.ms / 1000,
    datasetUsPerItem: {
      median: median(datasetUsPerItem),
      min: Math.min(...datasetUsPerItem),
      max: Math.max(...datasetUsPerItem),
      all: datasetUsPerItem,
    },
    datasetCommits: datasets.map((d) => d.commits),
    ...figures,
    seconds: (performance.now() - started) / 1000,
  };

  if (!JSON_OUT) {
    const f = (key: Key, digits = 1) => {
      const s = figures[key];
      return s ? `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})` : 'n/a';
    };
    out(
      `  medians of ${REPS} repetitions (min–max); experiments at concurrency ${CONCURRENCY}, rt.evals.wait polling every ${POLL_MS} ms`,
    );
    out(
      `  items running at once in the warm-up experiment (sampled): at most ${peak}, for a concurrency of ${CONCURRENCY}`,
    );
    out('');
    out(
      `  dataset          ${fmt(result.datasetUsPerItem.median, 0)} (${fmt(result.datasetUsPerItem.min, 0)}–${fmt(result.datasetUsPerItem.max, 0)}) µs per item (datasets.create of ${RUNS} runs)`,
    );
    out(
      `  replay           ${f('replayStepsPerSec', 0)} steps/s = ${f('replayUsPerStep')} µs per replayed step (CPU ${f('replayCpuUsPerStep')} µs; ${f('replayCommitsPerItem', 2)} commits per item), ${RUNS * STEPS} steps, 1 candidate`,
    );
    out(
      `  durable          ${f('durableUsPerStep')} µs per durable step, one run at a time (CPU ${f('durableCpuUsPerStep')} µs; ${f('durableCommitsPerStep', 2)} commits per step), ${DURABLE_RUNS} runs`,
    );
    out(
      `  fsync floor      ${f('fsyncUs')} µs per commit (better-sqlite3 alone: 1 INSERT + COMMIT, synchronous=FULL; ${FSYNC_COMMITS} commits)`,
    );
    out(
      `  durable ×${String(CONCURRENCY).padEnd(7)} ${f('durableConcurrentUsPerStep')} µs per durable step, ${CONCURRENCY} runs at a time (CPU ${f('durableConcurrentCpuUsPerStep')} µs; ${f('durableConcurrentCommitsPerStep', 2)} commits per step), ${durableC} runs`,
    );
    out(
      `  replay / durable ${f('replayVsDurable', 2)}×; replay / durable ×${CONCURRENCY}: ${f('replayVsDurableConcurrent', 2)}×`,
    );
    out(
      `  inner            ${f('innerUsPerStep')} µs per replayed step (replaySteps alone, CPU ${f('innerCpuUsPerStep')} µs); loop ${f('loopUsPerStep')} µs per step; inner / loop ${f('innerVsLoop', 2)}×`,
    );
    out(
      `  experiment       ${f('experimentItemsPerSec', 0)} items/s, step_replay, ${RUNS} items × 2 candidates (${f('experimentMs', 0)} ms; CPU ${f('experimentCpuMsPerItem', 2)} ms per item)`,
    );
    out(
      figures.rerunItemsPerSec
        ? `  rerun            ${f('rerunItemsPerSec', 0)} items/s, rerun, ${RUNS} items × 2 candidates (${f('rerunMs', 0)} ms; CPU ${f('rerunCpuMsPerItem', 2)} ms, ${f('rerunCommitsPerItem', 1)} commits per item)`
        : `  rerun            skipped`,
    );
    out(`  (${fmt(result.seconds)} s in all)`);
  }
  console.log(JSON.stringify(result));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
