/**
 * Instructions a durable step costs, counted by Valgrind (callgrind), not timed: on a shared
 * 2-core machine wall and CPU times of the same code move by ±15–30 % between runs, so a change
 * worth 2 % cannot be seen in them; an instruction count repeats within ~0.05 %.
 *
 * The workload is bench:durable's NORMAL variant (bench/durable-workload.ts through the public
 * runtime API on a SQLite file with synchronous=NORMAL, one run at a time, a new session each),
 * in `node --single-threaded` (V8 compiles and collects on the main thread: the count repeats)
 * with an old generation large enough that no major collection comes (one that falls inside the
 * counted runs of one version and not of the other weighs ±2 %, more than the changes measured;
 * the young generation's collections, every few runs, are counted), and fixed seeds (V8 looks for
 * a prime from its random hash seed at start-up: ~10 M instructions more or less, ±15 K a step).
 * It runs twice, with WARM and WARM + RUNS runs; the difference ÷ (RUNS × steps a run) is the
 * instructions a step in steady state, start-up and the first runs' compilation left out. WARM is
 * 100: after 10 runs V8 was still tiering the code up (~200 K of ~1,150 K instructions a step in its
 * compilers, and much of the rest in code not yet optimized), and an A/B of the same two commits
 * said −0.6 % after 10 runs and −6.5 % after 100 (~15 K in the compilers, ~740 K a step).
 * (A database that grows past 256 sessions moves it again: see the measurement log,
 * `git show 8c637b6:docs/performance.md`, eighth session.)
 * With `--against <git ref>` the same is counted for that commit (a temporary worktree with this
 * checkout's node_modules) and the two are compared. `--top N` also prints the N native
 * functions (SQLite, zstd, V8's JSON, GC, hashing...) that take most instructions a step; code
 * V8 compiled from JavaScript counts as one line, `(JavaScript, compiled)`.
 *
 * What it does not see: time spent waiting (fsyncs, page writes to the OS), cache misses, the
 * relative cost of instructions (Valgrind runs SHA-256 without the CPU's SHA extensions, so
 * hashing counts for more than it costs). Use it to compare two versions of the CPU work; the
 * durations are bench:durable's. The same code counts the same; two versions of it also differ in
 * when V8 compiles what (it tiers code up for hundreds of runs): the part in V8's compilers is
 * printed apart, and the ratio without it is the one to read for a change of a few percent.
 *
 *   npm run bench:instructions [-- --against HEAD~1] [--top 30] [--json]
 *   env: RUNS (30), WARM (100), TOOL_STEPS (20)
 *
 * Needs `valgrind` (Debian: apt-get install valgrind). Each count takes ~2–4 minutes.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as Keel from '../src/index.ts';
import { benchAgent } from './durable-workload.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const RUNS = Number(process.env.RUNS ?? 30);
const WARM = Number(process.env.WARM ?? 100);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 20);
const STEPS = TOOL_STEPS + 1;

const args = process.argv.slice(2);
const option = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};

// -------------------------------------------------------------------------------------------
// The workload (this file run with --workload <runs>, under Valgrind)

async function workload(runs: number): Promise<void> {
  const keel = (await import(join(process.cwd(), 'src/index.ts'))) as typeof Keel;
  const { createRuntime, SqliteStore } = keel;
  const agent = benchAgent(keel, { toolSteps: TOOL_STEPS });
  const dir = mkdtempSync(join(tmpdir(), 'keel-bench-instructions-'));
  const store = new SqliteStore({ path: join(dir, 'keel.db'), synchronous: 'NORMAL' });
  const rt = createRuntime({ store, agents: [agent], leaseMs: 60_000 });
  rt.startWorker({ id: 'bench', concurrency: 1, pollMs: 1000 });
  try {
    for (let i = 0; i < runs; i++) {
      const s = await rt.sessions.create();
      const sent = await rt.sessions.send(s.id, `Task ${i}: count up, one step at a time.`);
      const run = await rt.runs.wait(sent.run.id, { until: 'terminal' });
      if (run.status !== 'completed') throw new Error(`run ${run.id} ended ${run.status}`);
    }
  } finally {
    await rt.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// -------------------------------------------------------------------------------------------
// Counting

/** Instructions by function, from a callgrind output file (callgrind_annotate, every function). */
function byFunction(file: string): Map<string, number> {
  const out = execFileSync('callgrind_annotate', ['--threshold=100', file], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  const m = new Map<string, number>();
  for (const line of out.split('\n')) {
    const r = /^\s*([\d,]+) \([^)]*\)\s+(.*)$/.exec(line);
    if (!r || line.includes('PROGRAM TOTALS')) continue;
    let name = r[2]!.replace(/ \[[^\]]*\]$/, '').replace(/^\?\?\?:/, '');
    if (/^0x[0-9a-f]+$/.test(name)) name = '(JavaScript, compiled)';
    m.set(name, (m.get(name) ?? 0) + Number(r[1]!.replace(/,/g, '')));
  }
  return m;
}

/** Counts the workload of `runs` runs in checkout `root`: total instructions and by function. */
function count(root: string, runs: number, dir: string): Promise<{ total: number; fns: Map<string, number> }> {
  const file = join(dir, `callgrind.${runs}.${Math.random().toString(36).slice(2)}`);
  return new Promise((ok, fail) => {
    const child = spawn(
      'valgrind',
      [
        '--tool=callgrind',
        '--smc-check=all-non-file',
        `--callgrind-out-file=${file}`,
        process.execPath,
        '--single-threaded',
        '--initial-old-space-size=512',
        '--hash-seed=1',
        '--random-seed=1',
        join(HERE, 'instructions.ts'),
        '--workload',
        String(runs),
      ],
      { cwd: root, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TOOL_STEPS: String(TOOL_STEPS) } },
    );
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.once('error', (e) =>
      fail(new Error(`valgrind could not be started (${e.message}): install it (Debian: apt-get install valgrind)`)),
    );
    child.once('exit', (code) => {
      const total = /Collected : (\d+)/.exec(stderr);
      if (code !== 0 || !total) return fail(new Error(`valgrind exited ${code}:\n${stderr.slice(-2000)}`));
      ok({ total: Number(total[1]), fns: byFunction(file) });
    });
  });
}

interface PerStep {
  root: string;
  instructionsPerStep: number;
  /** Of them, in V8's compilers (see COMPILING): moves with when V8 tiers code up, not with the work. */
  compilingPerStep: number;
  fns: Array<{ name: string; perStep: number }>;
}

/**
 * The functions of V8's compilers and parser: bytecode, Sparkplug, Maglev, Turbofan/Turboshaft,
 * WebAssembly. V8 goes on tiering code up for hundreds of runs, so a change of the code moves
 * when it compiles what: an A/B of a small change can differ by ±1–4 % in these alone. Counted by
 * the functions' own instructions (what they call, such as malloc, is not: an estimate from below).
 */
const COMPILING =
  /^(non-virtual thunk to )?v8::internal::((compiler|maglev|baseline|interpreter|wasm)::|(Parser|ParserBase|PreParser|Scanner|Zone|AstValueFactory|DeclarationScope|Scope)\b)/;

/** Instructions a step in `root`: the two workloads counted at once (2 cores), their difference per step. */
async function perStep(root: string, dir: string): Promise<PerStep> {
  const [a, b] = await Promise.all([count(root, WARM, dir), count(root, WARM + RUNS, dir)]);
  const steps = RUNS * STEPS;
  const fns = [...b.fns]
    .map(([name, n]) => ({ name, perStep: (n - (a.fns.get(name) ?? 0)) / steps }))
    .sort((x, y) => y.perStep - x.perStep);
  const compilingPerStep = fns.reduce((sum, f) => (COMPILING.test(f.name) ? sum + f.perStep : sum), 0);
  return { root, instructionsPerStep: (b.total - a.total) / steps, compilingPerStep, fns };
}

function worktree(ref: string, dir: string): string {
  const path = join(dir, 'against');
  execFileSync('git', ['worktree', 'add', '--detach', path, ref], { cwd: ROOT, stdio: 'ignore' });
  symlinkSync(join(ROOT, 'node_modules'), join(path, 'node_modules'));
  return path;
}

async function main(): Promise<void> {
  const against = option('--against');
  const top = Number(option('--top') ?? 0);
  const json = args.includes('--json');
  const dir = mkdtempSync(join(tmpdir(), 'keel-instructions-'));
  let other: string | undefined;
  try {
    if (against) other = worktree(against, dir);
    const here = await perStep(ROOT, dir);
    const there = other ? await perStep(other, dir) : undefined;
    const commit = (root: string) =>
      execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim() !==
      '';
    const result = {
      workload: `NORMAL, ${RUNS} runs of ${STEPS} steps after ${WARM} (node --single-threaded under callgrind)`,
      instructionsPerStep: Math.round(here.instructionsPerStep),
      compilingPerStep: Math.round(here.compilingPerStep),
      commit: `${commit(ROOT)}${dirty ? ' + changes' : ''}`,
      ...(there && against
        ? {
            against: {
              ref: against,
              commit: commit(there.root),
              instructionsPerStep: Math.round(there.instructionsPerStep),
              compilingPerStep: Math.round(there.compilingPerStep),
            },
            ratio: here.instructionsPerStep / there.instructionsPerStep,
            ratioWithoutCompiling:
              (here.instructionsPerStep - here.compilingPerStep) / (there.instructionsPerStep - there.compilingPerStep),
          }
        : {}),
      top: here.fns.slice(0, top).map((f) => ({ name: f.name, perStep: Math.round(f.perStep) })),
    };
    if (json) {
      console.log(JSON.stringify(result));
      return;
    }
    const k = (n: number) =>
      `${(n / 1000).toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 })} K`;
    const pct = (r: number) => `${r.toFixed(3)} (${(100 * (r - 1)).toFixed(1)} %)`;
    const line = (label: string, p: PerStep) =>
      console.log(
        `  ${label.padEnd(22)} ${k(p.instructionsPerStep).padStart(10)}   of which V8's compilers ${k(p.compilingPerStep).padStart(8)}, without them ${k(p.instructionsPerStep - p.compilingPerStep).padStart(10)}`,
      );
    console.log(`keel instructions per durable step: ${result.workload}`);
    line(result.commit, here);
    if (there && against) {
      line(`${against} (${commit(there.root)})`, there);
      console.log(
        `  ratio                  ${pct(result.ratio!)}; without V8's compilers ${pct(result.ratioWithoutCompiling!)}`,
      );
    }
    if (top > 0) {
      console.log(`  the ${top} functions with most instructions a step:`);
      for (const f of result.top) console.log(`  ${k(f.perStep).padStart(10)}  ${f.name.slice(0, 140)}`);
      if (there) {
        const before = new Map(there.fns.map((f) => [f.name, f.perStep]));
        const names = new Set([...before.keys(), ...here.fns.map((f) => f.name)]);
        const after = new Map(here.fns.map((f) => [f.name, f.perStep]));
        const changes = [...names]
          .map((name) => ({ name, delta: (after.get(name) ?? 0) - (before.get(name) ?? 0) }))
          .sort((a, b) => Math.abs(b.delta) - Math.abs(a.delta));
        console.log(`  the ${top} largest changes a step against ${against}:`);
        for (const c of changes.slice(0, top))
          console.log(`  ${`${c.delta > 0 ? '+' : '−'}${k(Math.abs(c.delta))}`.padStart(10)}  ${c.name.slice(0, 140)}`);
      }
    }
  } finally {
    if (other) execFileSync('git', ['worktree', 'remove', '--force', other], { cwd: ROOT, stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args[0] === '--workload') await workload(Number(args[1]));
else await main();
