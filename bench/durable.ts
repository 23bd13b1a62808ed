/**
 * The durable hot path, measured against physical floors in the same process. The workload is the
 * one of bench/loop.ts: runs of TOOL_STEPS tool steps (+1 final answer each) on a zero-latency
 * scripted model, a trivial synchronous tool, a system prompt of realistic size (~300 characters),
 * ONE run at a time. Every variant reports wall µs/step and CPU µs/step (process.cpuUsage
 * user + system ÷ steps; CPU can exceed wall time: V8's GC and compiler threads count too):
 *
 *   durable   the public runtime API (createRuntime, a worker, sessions.send, runs.wait) on a
 *             SqliteStore file (WAL, synchronous=FULL): RUNS runs after WARMUP, each on a new
 *             session (creating the session and checking the run afterwards are not timed);
 *   normal    the same with synchronous=NORMAL (no fsync per commit: what is left is CPU), over
 *             RUNS_NORMAL runs: its mean is the target, and without fsyncs a run is short, so more
 *             runs take in the WAL checkpoints at their real rate and the machine's noise less;
 *   effectful the durable variant with the tool declared not idempotent (two commits per tool step);
 *   floor     better-sqlite3 alone on its own file (WAL, synchronous=FULL): one INSERT of one
 *             ~200-byte JSON row per step, each its own transaction (one commit, one fsync);
 *   loop      Keel's in-memory loop (runTurn + MemorySink without deltas), LOOP_RUNS runs, each
 *             with an empty history as the durable runs (one per new session) have;
 *   handLoop  a hand-written loop doing the minimum per step: the same kind of ScriptedModel's
 *             doStream read to its end, the tool executed, the messages pushed to an array.
 *
 * For the durable variant also: commits per step (the store's `commitCount`, n/a if it has none);
 * bytes on disk per step (database file growth over the measured runs, each end of it taken after
 * a complete WAL checkpoint; also the growth of the pages in use, which ignores reused free
 * pages, and of the bytes stored in rows, the cells of every table and index by SQLite's `dbstat`,
 * which ignores the pages' free space: a growth point measures one run a session, 63 steps, and
 * its pages in use move by whole 4 KB pages, 65 B a step); bytes written per step (write(2) bytes of this process, /proc/self/io wchar: WAL frames
 * and checkpoints); and the stored bytes by event type, and in blobs, run_checkpoints, snapshots.
 * For the NORMAL variant, the time inside write transactions (BEGIN to COMMIT; Store.observeCommits)
 * while a run is measured: its send, claim, steps and finish, and the worker's look for more work
 * right after it (`normalTxUsPerStep` in --json); the rest of µs/step is outside them. And where a
 * run's time goes, from the times of its commits (`normalSegments`, `segments` for FULL; see
 * RunSegments): the send, the start to the first step's commit, a tool step commit to commit, the
 * last step with the run's end, and runs.wait's answer after it; what a run costs beyond its steps
 * at the tool step's time is the per-run part of µs/step.
 *
 * Growth: GROWTH_SESSIONS sessions × GROWTH_RUNS consecutive durable runs (FULL). µs/step and
 * bytes/step are taken at the first, middle and last run of each session (0, 504 and 1,008 prior
 * messages by default: a run adds 1 user + 21 assistant + 20 tool messages), averaged over the
 * sessions. The database is checkpointed through a second connection right before and after each
 * measured run (not timed). Before a timed run that checkpoint is wal_checkpoint(RESTART): the
 * same database file as TRUNCATE, but the WAL file keeps its size, so the timed run does not pay
 * for growing it again; the final figures use TRUNCATE. The in-memory loop is measured at the same
 * points with the history carried from run to run (LOOP_REPEAT turns on the same history each, the
 * points timed in turn); its growth ratio is that of the medians of the turns (a turn that meets a
 * collection of the heap weighs as one), the ratio of the means is printed too.
 *
 * Paired: PAIRED_ROUNDS rounds, each PAIRED_RUNS durable runs (FULL) then as many floor steps, on their
 * own files; `ratio` is the median of the rounds' ratios, so that drift of the shared machine between
 * variants does not decide it (`ratioOfMeans` is durable / floor from the variants above). The loop
 * and the hand loop are paired the same way: PAIRED_ROUNDS rounds of LOOP_PAIRED_RUNS runs of each,
 * `loopRatio` the median of the rounds' ratios (`loopRatioOfMeans` from the variants above).
 *
 * User path: what a user's program does through the public API, timed as a whole per run: a new
 * session (`sessions.create`), `sessions.send`, `runs.wait`, then the session's transcript
 * (`sessions.transcript`, as README's tour reads it), one run at a time, synchronous=FULL, the worker
 * in this process. PAIRED_ROUNDS rounds of PAIRED_RUNS such runs then as many floor steps, on their
 * own files; `userPathRatio` is the median of the rounds' ratios, `userPathUsPerStep` the median of
 * the rounds' µs/step; `userPathEffectful…` the same with the tool not idempotent. Where a run's
 * time goes (medians, `userPathSegments`): create, send, send's answer → the first commit after it
 * (the run's start and first step), first → last commit (the steps and the run's end), last commit
 * → runs.wait returned, the transcript read; the commits of the run, and what it costs beyond its
 * steps (all but first → last commit). USER_PATH_ONLY=1 runs only the process warm-up and these.
 *
 * Also reported: idle waits inside the timed runs (send → claimed, completed → runs.wait returned),
 * where a missed wake-up would show; and how much the machine was busy otherwise (load average,
 * PSI): wall times on a shared 2-core machine move with other load, CPU times much less.
 *
 * Run with `npm run bench:durable`; `npm run -s bench:durable -- --json` prints one JSON object
 * and nothing else on stdout (-s keeps npm's own banner out).
 * Before the variants, PROCESS_WARMUP runs of the workload (NORMAL, on a scratch file) bring the
 * process to its steady state: see processWarmup.
 *
 * Env: PROCESS_WARMUP (200), LOOP_WARMUP (200), RUNS (30), RUNS_NORMAL (90), TOOL_STEPS (20), GROWTH_RUNS (25), GROWTH_SESSIONS (3), WARMUP (5 durable
 * runs), LOOP_RUNS (200, for loop and handLoop), LOOP_REPEAT (20), PAIRED_ROUNDS (9), PAIRED_RUNS (4),
 * LOOP_PAIRED_RUNS (40).
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type {
  LanguageModelV4FunctionTool,
  LanguageModelV4Prompt,
  LanguageModelV4ToolResultPart,
} from '@ai-sdk/provider';
import Database from 'better-sqlite3';
import {
  createRuntime,
  defineAgent,
  MemorySink,
  runTurn,
  ScriptedModel,
  SqliteStore,
  tool,
  type AgentDefinition,
  type Message,
  type Runtime,
  type StoredEvent,
} from '../src/index.ts';
import { decodeBatch } from '../src/store/sqlite/event-batch-codec.ts';
import { idKey, type IdKey } from '../src/store/sqlite/id-keys.ts';
import type { BatchRow } from '../src/store/rows.ts';
import { benchAgent, benchScript, SYSTEM } from './durable-workload.ts';

const RUNS = Number(process.env.RUNS ?? 30);
const RUNS_NORMAL = Number(process.env.RUNS_NORMAL ?? 90);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 20);
const GROWTH_RUNS = Number(process.env.GROWTH_RUNS ?? 25);
const GROWTH_SESSIONS = Number(process.env.GROWTH_SESSIONS ?? 3);
const WARMUP = Number(process.env.WARMUP ?? 5);
const PROCESS_WARMUP = Number(process.env.PROCESS_WARMUP ?? 200);
/** Runs of the in-memory loop and of the hand loop before theirs are timed. */
const LOOP_WARMUP = Number(process.env.LOOP_WARMUP ?? 200);
const LOOP_RUNS = Number(process.env.LOOP_RUNS ?? 200);
const LOOP_REPEAT = Number(process.env.LOOP_REPEAT ?? 20);
const JSON_OUT = process.argv.includes('--json');
/** Only the process warm-up and the user path's paired rounds (USER_PATH_ONLY=1): a quick look at it. */
const USER_PATH_ONLY = process.env.USER_PATH_ONLY === '1';
const PAIRED_ROUNDS = Number(process.env.PAIRED_ROUNDS ?? 9);
const PAIRED_RUNS = Number(process.env.PAIRED_RUNS ?? 4);
/** Runs of the loop, then of the hand loop, in each round of their paired ratio. */
const LOOP_PAIRED_RUNS = Number(process.env.LOOP_PAIRED_RUNS ?? 40);

const STEPS = TOOL_STEPS + 1;
/** What one run adds to its session's conversation: the user message, STEPS assistant messages, TOOL_STEPS tool messages. */
const MESSAGES_PER_RUN = 1 + STEPS + TOOL_STEPS;
/** The growth runs measured: the first, the middle and the last of each session. */
const GROWTH_AT = [...new Set([0, Math.floor((GROWTH_RUNS - 1) / 2), GROWTH_RUNS - 1])].filter((k) => k >= 0);

const fmt = (n: number, digits = 1) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
/** The value below which a share `q` of `xs` lies (nearest rank). */
function percentile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

// ---------------------------------------------------------------------------------------------
// The workload, and measuring

const makeAgent = (o: { effectful?: boolean } = {}): AgentDefinition =>
  benchAgent({ defineAgent, ScriptedModel, tool }, { toolSteps: TOOL_STEPS, ...o });

type Sample = { steps: number; ms: number; userUs: number; systemUs: number };
const sum = (xs: readonly Sample[]): Sample =>
  xs.reduce(
    (a, b) => ({
      steps: a.steps + b.steps,
      ms: a.ms + b.ms,
      userUs: a.userUs + b.userUs,
      systemUs: a.systemUs + b.systemUs,
    }),
    { steps: 0, ms: 0, userUs: 0, systemUs: 0 },
  );
const usPerStep = (s: Sample) => (s.ms * 1000) / s.steps;
const cpuPerStep = (s: Sample) => (s.userUs + s.systemUs) / s.steps;

/** Times `fn`: wall time, and this process's CPU time (user and system). */
async function timed<T>(steps: number, fn: () => Promise<T>): Promise<{ sample: Sample; value: T }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  return { sample: { steps, ms, userUs: cpu.user, systemUs: cpu.system }, value };
}

/** Bytes this process has passed to write(2) and friends so far (Linux /proc/self/io `wchar`). */
function written(): number | undefined {
  try {
    const m = /^wchar:\s*(\d+)/m.exec(readFileSync('/proc/self/io', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}
const perStep = (a: number | undefined, b: number | undefined, steps: number) =>
  a !== undefined && b !== undefined ? (b - a) / steps : null;

/** Total µs some task waited for `kind` (Linux PSI, /proc/pressure): other load on the machine shows here. */
function pressure(kind: 'cpu' | 'io'): number | undefined {
  try {
    const m = /^some .*total=(\d+)/m.exec(readFileSync(`/proc/pressure/${kind}`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// SQLite helpers

/**
 * The database file's size; the bytes of its pages in use (free pages left out); and the bytes
 * stored in them, the cells' payload of every table and index (SQLite's `dbstat`: what the rows
 * hold, without the pages' free space, so a short run's figure does not move by whole pages).
 */
type Disk = { file: number; used: number; stored: number };

/** Checkpoints the whole WAL into the database file (through `db`), then measures the file. */
async function checkpointed(db: Database.Database, path: string, mode: 'RESTART' | 'TRUNCATE'): Promise<Disk> {
  for (let attempt = 0; ; attempt++) {
    const [r] = db.pragma(`wal_checkpoint(${mode})`) as Array<{ busy: number; log: number; checkpointed: number }>;
    if (r && r.busy === 0 && r.checkpointed === r.log) break;
    if (attempt >= 100) throw new Error(`wal_checkpoint(${mode}) on ${path} stayed busy`);
    await sleep(10);
  }
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const pages = db.pragma('page_count', { simple: true }) as number;
  const free = db.pragma('freelist_count', { simple: true }) as number;
  const stored = db.prepare<[], number>('SELECT sum(payload) FROM dbstat').pluck().get() ?? 0;
  return { file: statSync(path).size, used: (pages - free) * pageSize, stored };
}

/** A second connection to a store's file, for checkpoints and raw SQL. */
function openSide(path: string): Database.Database {
  const db = new Database(path);
  db.pragma('busy_timeout = 5000');
  return db;
}

const commitsOf = (store: SqliteStore): number | undefined => (store as { commitCount?: number }).commitCount;

// ---------------------------------------------------------------------------------------------
// durable / normal: the public runtime API on a SqliteStore

/** The young generation's size now (both semi-spaces), in MB: it grows to its maximum under this load. */
const youngGenerationMb = (): number =>
  (getHeapSpaceStatistics().find((x) => x.space_name === 'new_space')?.space_size ?? 0) / 1048576;

interface Durable {
  store: SqliteStore;
  rt: Runtime;
}

function openDurable(path: string, synchronous: 'FULL' | 'NORMAL', o: { effectful?: boolean } = {}): Durable {
  const store = new SqliteStore({ path, synchronous });
  const rt = createRuntime({ store, agents: [makeAgent(o)], leaseMs: 60_000 });
  rt.startWorker({ id: 'bench', concurrency: 1, pollMs: 1000 });
  return { store, rt };
}

async function closeDurable(d: Durable): Promise<void> {
  await d.rt.close();
  await d.store.close();
}

/**
 * Idle waits inside a timed run, in ms, from the live `run/status` events: `claim`, from the
 * send's answer to the run's move to running (the worker's pick-up; 0 when the message's own
 * transaction claimed the run for the idle worker, ADR-0027, counted in `claimedWithSend`); `end`,
 * from the move to completed until `runs.wait` returned. Either is ~0 unless a wake-up is missed
 * and a poll (the worker's pollMs, or runs.wait's 200 ms) picks the change up instead.
 */
type Lag = { claim: number; end: number; claimedWithSend: boolean };

/** One run through the public API: send a message, wait for the run to end. Only this is timed. */
async function durableRun(
  d: Durable,
  sessionId: string,
  i: number,
): Promise<{ sample: Sample; runId: string; lag: Lag; marks: RunMarks }> {
  let sentAt = 0;
  let claimedAt = 0;
  let endedAt = 0;
  let returnedAt = 0;
  const off = d.rt.sessions.subscribe(sessionId, (item) => {
    if (item.kind !== 'event' || item.event.type !== 'run/status') return;
    const to = (item.event.data as { to?: unknown }).to;
    if (to === 'running' && claimedAt === 0) claimedAt = performance.now();
    if (to === 'completed' && endedAt === 0) endedAt = performance.now();
  });
  let startedAt = 0;
  const { sample, value: run } = await timed(STEPS, async () => {
    startedAt = performance.now();
    const sent = await d.rt.sessions.send(sessionId, `Task ${i}: count up, one step at a time.`);
    sentAt = performance.now();
    const r = await d.rt.runs.wait(sent.run.id, { until: 'terminal' });
    returnedAt = performance.now();
    return r;
  }).finally(off);
  if (run.status !== 'completed') throw new Error(`run ${run.id} ended ${run.status}: ${JSON.stringify(run.error)}`);
  // Not timed: the run's own record of its turn must say STEPS steps.
  const events = await d.rt.sessions.log.read(sessionId, { runId: run.id });
  const end = events.find((e) => e.type === 'turn/end');
  const data = end ? (end.data as { steps?: unknown; reason?: unknown }) : undefined;
  if (!data || data.steps !== STEPS || data.reason !== 'completed') {
    throw new Error(
      `run ${run.id}: expected a completed turn of ${STEPS} steps, its turn/end says ${JSON.stringify(data ?? null)}`,
    );
  }
  return {
    sample,
    runId: run.id,
    marks: { started: startedAt, sent: sentAt, returned: returnedAt },
    lag: {
      claim: claimedAt > 0 ? Math.max(0, claimedAt - sentAt) : NaN,
      end: endedAt > 0 ? returnedAt - endedAt : NaN,
      claimedWithSend: claimedAt > 0 && claimedAt <= sentAt,
    },
  };
}

/** When a timed run's send started and answered, and when its runs.wait returned (performance.now() ms). */
type RunMarks = { started: number; sent: number; returned: number };

/**
 * Where a run's time goes, from its commits' times (µs): `send` the send call (its transaction
 * claims the run, ADR-0027); `start` from the send's answer to the first step's commit (the run's
 * start and its first step); `step` a tool step, commit to commit (the median of the run's tool
 * steps after the first); `finish` the last step with the run's end (its commit seals the turn);
 * `after` from that commit until runs.wait returned. `overheadUs` is what the run costs beyond
 * STEPS steps at `step` each: the per-run part of µs/step. Undefined for a run whose commits are
 * not the send's, one per tool step and the last (an effectful tool commits twice a step).
 */
type RunSegments = { send: number; start: number; step: number; finish: number; after: number; overheadUs: number };

function segmentsOf(marks: RunMarks, all: readonly number[]): RunSegments | undefined {
  const commits = all.filter((t) => t >= marks.started && t <= marks.returned);
  if (commits.length !== TOOL_STEPS + 2) return undefined;
  const k = commits.length;
  const steps: number[] = [];
  for (let j = 2; j < k - 1; j++) steps.push(commits[j]! - commits[j - 1]!);
  const us = (ms: number) => ms * 1000;
  const step = us(median(steps));
  const total = us(marks.returned - marks.started);
  return {
    send: us(marks.sent - marks.started),
    start: us(commits[1]! - marks.sent),
    step,
    finish: us(commits[k - 1]! - commits[k - 2]!),
    after: us(marks.returned - commits[k - 1]!),
    overheadUs: total - STEPS * step,
  };
}

/** The median of each segment over the runs that have them. */
function segmentMedians(
  runs: ReadonlyArray<RunSegments | undefined>,
): (RunSegments & { runs: number; overheadUsPerStep: number }) | null {
  const ok = runs.filter((r): r is RunSegments => r !== undefined);
  if (ok.length === 0) return null;
  const m = (f: (r: RunSegments) => number) => median(ok.map(f));
  const overheadUs = m((r) => r.overheadUs);
  return {
    runs: ok.length,
    send: m((r) => r.send),
    start: m((r) => r.start),
    step: m((r) => r.step),
    finish: m((r) => r.finish),
    after: m((r) => r.after),
    overheadUs,
    overheadUsPerStep: overheadUs / STEPS,
  };
}

interface DurableResult {
  sample: Sample;
  perRun: number[];
  lags: Lag[];
  commitsPerStep: number | null;
  bytesPerStep: number;
  usedBytesPerStep: number;
  storedBytesPerStep: number;
  writtenPerStep: number | null;
  /** µs a step inside write transactions, BEGIN to COMMIT, while the runs are measured (see durableVariant). */
  txUsPerStep: number;
  /** Where a run's time goes (medians over the runs, see RunSegments); null when no run's commits fit. */
  segments: ReturnType<typeof segmentMedians>;
  sessions: string[];
}

/**
 * Before any variant is measured: PROCESS_WARMUP runs of the workload (synchronous=NORMAL, a scratch
 * file), a fifth of them with the effectful tool. V8 compiles and re-optimizes the runtime's code
 * and sizes its heap over the first hundreds of runs of a process: timed in one process by windows
 * of 100 runs, the first took 493 µs of CPU a step, the later ones 239–440 µs (the machine's noise
 * included); counted (bench:instructions), a step after 10 runs took ~1,150 K instructions of which
 * ~200 K in V8's compilers, after 100 runs ~740 K of which ~15 K. A worker serves runs for hours:
 * what is measured is that steady state, not a process's start (the figures before 2026-12-03,
 * eighth session, were measured from the fifth run of a fresh process on).
 */
async function processWarmup(dir: string): Promise<{ runs: number; seconds: number }> {
  const started = performance.now();
  let runs = 0;
  for (const effectful of [false, true]) {
    const d = openDurable(join(dir, `warmup-${effectful ? 'effectful' : 'idempotent'}.db`), 'NORMAL', { effectful });
    try {
      const n = effectful ? Math.round(PROCESS_WARMUP / 5) : PROCESS_WARMUP;
      for (let i = 0; i < n; i++, runs++) await durableRun(d, (await d.rt.sessions.create()).id, i);
    } finally {
      await closeDurable(d);
    }
  }
  return { runs, seconds: (performance.now() - started) / 1000 };
}

/** WARMUP runs, then `runs` measured runs, each on a new session. */
async function durableVariant(
  path: string,
  synchronous: 'FULL' | 'NORMAL',
  o: { effectful?: boolean; runs?: number } = {},
): Promise<DurableResult> {
  const d = openDurable(path, synchronous, o);
  const side = openSide(path);
  try {
    for (let i = 0; i < WARMUP; i++) await durableRun(d, (await d.rt.sessions.create()).id, i);
    const disk0 = await checkpointed(side, path, 'RESTART');
    const c0 = commitsOf(d.store);
    const w0 = written();
    // Time inside write transactions (BEGIN to COMMIT, Store.observeCommits) while each run is
    // measured: the untimed creation of its session is left out, the worker's look for more work
    // right after the run (during durableRun's untimed check) is not.
    let txSeconds = 0;
    let timing = false;
    // When each commit of the run being measured was done (for its segments, see RunSegments).
    let commitTimes: number[] = [];
    const unobserve = d.store.observeCommits((seconds) => {
      if (!timing) return;
      txSeconds += seconds;
      commitTimes.push(performance.now());
    });
    const segments: Array<RunSegments | undefined> = [];
    const samples: Sample[] = [];
    const lags: Lag[] = [];
    const sessions: string[] = [];
    for (let i = 0; i < (o.runs ?? RUNS); i++) {
      const s = await d.rt.sessions.create();
      sessions.push(s.id);
      timing = true;
      commitTimes = [];
      const r = await durableRun(d, s.id, i).finally(() => (timing = false));
      segments.push(segmentsOf(r.marks, commitTimes));
      samples.push(r.sample);
      lags.push(r.lag);
    }
    const c1 = commitsOf(d.store);
    const w1 = written();
    unobserve();
    const total = sum(samples);
    await closeDurable(d);
    const disk1 = await checkpointed(side, path, 'TRUNCATE');
    return {
      sample: total,
      perRun: samples.map(usPerStep),
      lags,
      commitsPerStep: c0 !== undefined && c1 !== undefined ? (c1 - c0) / total.steps : null,
      bytesPerStep: (disk1.file - disk0.file) / total.steps,
      usedBytesPerStep: (disk1.used - disk0.used) / total.steps,
      storedBytesPerStep: (disk1.stored - disk0.stored) / total.steps,
      writtenPerStep: perStep(w0, w1, total.steps),
      txUsPerStep: (txSeconds * 1e6) / total.steps,
      segments: segmentMedians(segments),
      sessions,
    };
  } finally {
    await closeDurable(d).catch(() => {});
    side.close();
  }
}

interface TableBytes {
  scope: string;
  rows: number;
  bytes: number;
  error?: string;
}

interface Breakdown {
  byType: Record<string, { n: number; avgBytes: number; bytesPerStep: number }>;
  eventsPerStep: number;
  eventBytesPerStep: number;
  tables: Record<'event_batches' | 'entries' | 'blobs' | 'run_checkpoints' | 'snapshots', TableBytes>;
}

const IN_JSON = 'IN (SELECT value FROM json_each(?))';
/** A json_each value as the log tables store an id (see id-keys.ts): a UUID's 16 bytes. */
const KEY_SQL = "CASE WHEN length(value) = 36 THEN unhex(replace(value, '-', '')) ELSE value END";

/** Sessions' events as stored (raw SQL on the closed file, each batch decoded by the store's codec). */
function storedEvents(db: Database.Database, sessions: Iterable<string>): StoredEvent[] {
  const q = db.prepare<[IdKey], BatchRow>(
    'SELECT first_seq, codec, data FROM event_batches WHERE session_id = ? ORDER BY first_seq',
  );
  return [...sessions].flatMap((s) => q.all(idKey(s)).flatMap((r) => decodeBatch(s, r.first_seq, r.codec, r.data)));
}

/** Event data bytes by type (its JSON, uncompressed), most first. */
function eventBytes(events: readonly StoredEvent[]): Array<{ type: string; n: number; bytes: number }> {
  const by = new Map<string, { type: string; n: number; bytes: number }>();
  for (const e of events) {
    const t = by.get(e.type) ?? { type: e.type, n: 0, bytes: 0 };
    t.n++;
    t.bytes += Buffer.byteLength(JSON.stringify(e.data));
    by.set(e.type, t);
  }
  return [...by.values()].sort((a, b) => b.bytes - a.bytes);
}

function tableBytes(db: Database.Database, scope: string, sql: string, ...args: string[]): TableBytes {
  try {
    const r = db.prepare<string[], { rows: number; bytes: number | null }>(sql).get(...args)!;
    return { scope, rows: r.rows, bytes: r.bytes ?? 0 };
  } catch (e) {
    // Another schema (the store is changing): say so instead of failing the whole bench.
    return { scope, rows: 0, bytes: 0, error: (e as Error).message };
  }
}

/** What the measured sessions stored, by event type and by table (raw SQL on the closed database). */
function breakdown(path: string, sessions: readonly string[], steps: number): Breakdown {
  const db = new Database(path, { readonly: true });
  try {
    const ids = JSON.stringify(sessions);
    const byType: Breakdown['byType'] = {};
    let n = 0;
    let bytes = 0;
    for (const r of eventBytes(storedEvents(db, sessions))) {
      byType[r.type] = { n: r.n, avgBytes: r.bytes / r.n, bytesPerStep: r.bytes / steps };
      n += r.n;
      bytes += r.bytes;
    }
    return {
      byType,
      eventsPerStep: n / steps,
      eventBytesPerStep: bytes / steps,
      tables: {
        // The log itself (ADR-0009): the compressed batches, and the tree's index of entries.
        event_batches: tableBytes(
          db,
          'measured sessions',
          `SELECT count(*) AS rows, sum(length(data)) AS bytes FROM event_batches WHERE session_id IN (SELECT ${KEY_SQL} FROM json_each(?))`,
          ids,
        ),
        entries: tableBytes(
          db,
          'measured sessions, rows only',
          `SELECT count(*) AS rows, 0 AS bytes FROM entries WHERE session_id IN (SELECT ${KEY_SQL} FROM json_each(?))`,
          ids,
        ),
        // Content-addressed and shared by every session: the whole table, warm-up runs included.
        blobs: tableBytes(
          db,
          'whole file',
          'SELECT count(*) AS rows, sum(length(CAST(data AS BLOB))) AS bytes FROM blobs',
        ),
        run_checkpoints: tableBytes(
          db,
          'measured runs',
          `SELECT count(*) AS rows, sum(length(CAST(state AS BLOB))) AS bytes FROM run_checkpoints WHERE run_id IN (SELECT id FROM runs WHERE session_id ${IN_JSON})`,
          ids,
        ),
        snapshots: tableBytes(
          db,
          'measured sessions',
          `SELECT count(*) AS rows, sum(length(CAST(state AS BLOB))) AS bytes FROM snapshots WHERE session_id ${IN_JSON}`,
          ids,
        ),
      },
    };
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// floor: better-sqlite3 alone, one durable commit per step

function floorPayload(i: number): string {
  // ~200 bytes of JSON, about what one small event of a tool step holds.
  const row = {
    type: 'tool/result',
    step: i % STEPS,
    data: {
      toolCallId: `call_${i}_0`,
      toolName: 'inc',
      output: { type: 'json', value: i + 1 },
      toolMessageId: `msg_${(1e12 + i).toString(36)}`,
      durationMs: 0,
    },
    pad: '',
  };
  row.pad = 'x'.repeat(Math.max(0, 200 - JSON.stringify(row).length));
  return JSON.stringify(row);
}

/** The floor's database, warmed up; `insert` is one row in its own transaction: one commit, one fsync. */
function openFloor(path: string): { db: Database.Database; insert: Database.Statement<[string]> } {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE events (id INTEGER PRIMARY KEY, data TEXT NOT NULL)');
  const insert = db.prepare<[string]>('INSERT INTO events (data) VALUES (?)');
  for (let i = 0; i < 50; i++) insert.run(floorPayload(-1 - i));
  return { db, insert };
}

async function floorVariant(
  path: string,
  steps: number,
): Promise<{ sample: Sample; bytesPerStep: number; writtenPerStep: number | null; rowBytes: number }> {
  const { db, insert } = openFloor(path);
  try {
    const payloads = Array.from({ length: steps }, (_, i) => floorPayload(i));
    const disk0 = await checkpointed(db, path, 'RESTART');
    const w0 = written();
    const { sample } = await timed(steps, async () => {
      for (const p of payloads) insert.run(p);
    });
    const w1 = written();
    const disk1 = await checkpointed(db, path, 'TRUNCATE');
    return {
      sample,
      bytesPerStep: (disk1.file - disk0.file) / steps,
      writtenPerStep: perStep(w0, w1, steps),
      rowBytes: payloads[0]!.length,
    };
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// paired: durable and floor measured alternately, round after round, so that the machine's drift
// (other load on a shared 2-core box) hits both alike; the ratio is the median of the rounds'.

async function pairedRatio(
  dir: string,
): Promise<{ ratios: number[]; median: number; durableUs: number[]; floorUs: number[] }> {
  const path = join(dir, 'paired.db');
  const d = openDurable(path, 'FULL');
  const { db, insert } = openFloor(join(dir, 'paired-floor.db'));
  try {
    for (let i = 0; i < WARMUP; i++) await durableRun(d, (await d.rt.sessions.create()).id, i);
    const ratios: number[] = [];
    const durableUs: number[] = [];
    const floorUs: number[] = [];
    for (let round = 0; round < PAIRED_ROUNDS; round++) {
      const samples: Sample[] = [];
      for (let i = 0; i < PAIRED_RUNS; i++)
        samples.push((await durableRun(d, (await d.rt.sessions.create()).id, i)).sample);
      const steps = PAIRED_RUNS * STEPS;
      const payloads = Array.from({ length: steps }, (_, i) => floorPayload(round * steps + i));
      const { sample: floor } = await timed(steps, async () => {
        for (const p of payloads) insert.run(p);
      });
      durableUs.push(usPerStep(sum(samples)));
      floorUs.push(usPerStep(floor));
      ratios.push(usPerStep(sum(samples)) / usPerStep(floor));
    }
    return { ratios, median: median(ratios), durableUs, floorUs };
  } finally {
    await closeDurable(d);
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// user path: what a user's program does through the public API, paired with the floor

/**
 * When each part of a user-path run ended (performance.now() ms), and the commits inside it:
 * `started` before sessions.create, `created` when it returned, `sent` when send returned,
 * `returned` when runs.wait returned, `read` when the transcript was read.
 */
type UserPathMarks = { started: number; created: number; sent: number; returned: number; read: number };

/**
 * Where a user-path run's time goes (µs): `create` sessions.create; `send` sessions.send (its
 * transaction claims the run for the idle worker, ADR-0027); `start` from send's answer to the
 * first step's commit; `steps` from that commit to the last one (the run's end); `after` from the
 * last commit until runs.wait returned; `read` the transcript read. `commits` in the whole run.
 */
type UserPathSegments = {
  create: number;
  send: number;
  start: number;
  steps: number;
  after: number;
  read: number;
  commits: number;
};

function userPathSegmentsOf(m: UserPathMarks, all: readonly number[]): UserPathSegments | undefined {
  const inRun = all.filter((t) => t >= m.sent && t <= m.returned);
  if (inRun.length === 0) return undefined;
  const us = (ms: number) => ms * 1000;
  return {
    create: us(m.created - m.started),
    send: us(m.sent - m.created),
    start: us(inRun[0]! - m.sent),
    steps: us(inRun.at(-1)! - inRun[0]!),
    after: us(m.returned - inRun.at(-1)!),
    read: us(m.read - m.returned),
    commits: all.filter((t) => t >= m.started && t <= m.read).length,
  };
}

/**
 * One run as a user's program makes it, timed as a whole: a new session, the message, the wait for
 * the run's end, then the session's transcript (README's tour: sessions.transcript).
 */
async function userPathRun(d: Durable, i: number): Promise<{ sample: Sample; marks: UserPathMarks }> {
  const marks: UserPathMarks = { started: 0, created: 0, sent: 0, returned: 0, read: 0 };
  const { sample, value } = await timed(STEPS, async () => {
    marks.started = performance.now();
    const session = await d.rt.sessions.create();
    marks.created = performance.now();
    const sent = await d.rt.sessions.send(session.id, `Task ${i}: count up, one step at a time.`);
    marks.sent = performance.now();
    const run = await d.rt.runs.wait(sent.run.id, { until: 'terminal' });
    marks.returned = performance.now();
    const transcript = await d.rt.sessions.transcript(session.id);
    marks.read = performance.now();
    return { run, transcript };
  });
  const { run, transcript } = value;
  if (run.status !== 'completed') throw new Error(`run ${run.id} ended ${run.status}: ${JSON.stringify(run.error)}`);
  // Not timed: the transcript holds the message and the STEPS answers.
  if (transcript.length !== 1 + STEPS)
    throw new Error(`user path: the transcript has ${transcript.length} items, expected ${1 + STEPS}`);
  return { sample, marks };
}

interface UserPathResult {
  ratios: number[];
  median: number;
  userUs: number[];
  floorUs: number[];
  sample: Sample;
  segments: (Omit<UserPathSegments, 'commits'> & { runs: number; commits: number; beyondStepsUs: number }) | null;
}

/**
 * The user path (see userPathRun) and the floor measured alternately: PAIRED_ROUNDS rounds of
 * PAIRED_RUNS user-path runs then as many floor steps; the ratio is the median of the rounds'.
 */
async function userPathPaired(dir: string, effectful: boolean): Promise<UserPathResult> {
  const name = effectful ? 'user-path-effectful' : 'user-path';
  const d = openDurable(join(dir, `${name}.db`), 'FULL', { effectful });
  const { db, insert } = openFloor(join(dir, `${name}-floor.db`));
  let commitTimes: number[] = [];
  const unobserve = d.store.observeCommits(() => commitTimes.push(performance.now()));
  try {
    for (let i = 0; i < WARMUP; i++) await userPathRun(d, i);
    const ratios: number[] = [];
    const userUs: number[] = [];
    const floorUs: number[] = [];
    const all: Sample[] = [];
    const segments: Array<UserPathSegments | undefined> = [];
    for (let round = 0; round < PAIRED_ROUNDS; round++) {
      const samples: Sample[] = [];
      for (let i = 0; i < PAIRED_RUNS; i++) {
        commitTimes = [];
        const r = await userPathRun(d, i);
        samples.push(r.sample);
        segments.push(userPathSegmentsOf(r.marks, commitTimes));
      }
      const steps = PAIRED_RUNS * STEPS;
      const payloads = Array.from({ length: steps }, (_, i) => floorPayload(round * steps + i));
      const { sample: floor } = await timed(steps, async () => {
        for (const p of payloads) insert.run(p);
      });
      all.push(...samples);
      userUs.push(usPerStep(sum(samples)));
      floorUs.push(usPerStep(floor));
      ratios.push(usPerStep(sum(samples)) / usPerStep(floor));
    }
    const ok = segments.filter((s): s is UserPathSegments => s !== undefined);
    const m = (f: (r: UserPathSegments) => number) => median(ok.map(f));
    const total = sum(all);
    return {
      ratios,
      median: median(ratios),
      userUs,
      floorUs,
      sample: total,
      segments:
        ok.length === 0
          ? null
          : {
              runs: ok.length,
              create: m((r) => r.create),
              send: m((r) => r.send),
              start: m((r) => r.start),
              steps: m((r) => r.steps),
              after: m((r) => r.after),
              read: m((r) => r.read),
              commits: m((r) => r.commits),
              // What a run costs beyond its steps: all of it but the first commit to the last.
              beyondStepsUs: m((r) => r.create + r.send + r.start + r.after + r.read),
            },
    };
  } finally {
    unobserve();
    await closeDurable(d);
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// loop: Keel's in-memory loop

async function loopRun(agent: AgentDefinition, history: readonly Message[], turn: number): Promise<Message[]> {
  const r = await runTurn(agent, { sink: new MemorySink({ keepDeltas: false }), input: 'go', history, turn });
  if (r.reason !== 'completed' || r.steps !== STEPS)
    throw new Error(`loop: unexpected end: ${r.reason} after ${r.steps} steps`);
  return r.conversation;
}

async function loopVariant(): Promise<Sample> {
  const agent = makeAgent();
  // Warmed up as the durable path is (see processWarmup): its own code (MemorySink) too.
  for (let i = 0; i < LOOP_WARMUP; i++) await loopRun(agent, [], 1);
  const { sample } = await timed(LOOP_RUNS * STEPS, async () => {
    for (let i = 0; i < LOOP_RUNS; i++) await loopRun(agent, [], 1);
  });
  return sample;
}

// ---------------------------------------------------------------------------------------------
// handLoop: the minimum an agent loop does per step, on the same model interface

const TOOL_DEFS: LanguageModelV4FunctionTool[] = [
  {
    type: 'function',
    name: 'inc',
    description: 'increments',
    inputSchema: {
      type: 'object',
      properties: { n: { type: 'number' } },
      required: ['n'],
      additionalProperties: false,
    },
  },
];

async function handRun(model: ScriptedModel): Promise<number> {
  const prompt: LanguageModelV4Prompt = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: [{ type: 'text', text: 'go' }] },
  ];
  for (let step = 1; step <= STEPS; step++) {
    const { stream } = await model.doStream({ prompt, tools: TOOL_DEFS });
    const reader = stream.getReader();
    let text = '';
    const calls: Array<{ toolCallId: string; toolName: string; input: string }> = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (value.type === 'text-delta') text += value.delta;
      else if (value.type === 'tool-call') calls.push(value);
      else if (value.type === 'error') throw new Error(`handLoop: stream error ${JSON.stringify(value.error)}`);
    }
    const inputs = calls.map((c) => JSON.parse(c.input) as { n: number });
    prompt.push({
      role: 'assistant',
      content: [
        { type: 'text', text },
        ...calls.map((c, i) => ({
          type: 'tool-call' as const,
          toolCallId: c.toolCallId,
          toolName: c.toolName,
          input: inputs[i],
        })),
      ],
    });
    if (calls.length === 0) return step;
    const results: LanguageModelV4ToolResultPart[] = calls.map((c, i) => ({
      type: 'tool-result',
      toolCallId: c.toolCallId,
      toolName: c.toolName,
      output: { type: 'json', value: inputs[i]!.n + 1 },
    }));
    prompt.push({ role: 'tool', content: results });
  }
  throw new Error(`handLoop: no final answer after ${STEPS} steps`);
}

async function handLoopVariant(): Promise<Sample> {
  const model = new ScriptedModel(benchScript(TOOL_STEPS), { loop: true, recordCalls: false });
  for (let i = 0; i < LOOP_WARMUP; i++) await handRun(model);
  const { sample } = await timed(LOOP_RUNS * STEPS, async () => {
    for (let i = 0; i < LOOP_RUNS; i++) {
      const steps = await handRun(model);
      if (steps !== STEPS) throw new Error(`handLoop: ${steps} steps instead of ${STEPS}`);
    }
  });
  return sample;
}

/**
 * A full collection of the heap, on demand: V8's `gc`, exposed for a context made after the flag
 * is set (the benchmark runs without --expose-gc). Outside the timed samples only.
 */
function fullCollection(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/**
 * The loop and the hand loop measured alternately, round after round, as the durable path and its
 * floor are (see pairedRatio): the hand loop's sample is short (a few ms), and one collection of
 * the heap the variants before it left behind, landing in it or not, moved the ratio of the two
 * variants above from 0.9× to 14× between runs of the same code. The ratio is the median of the
 * rounds'. Each round starts on a collected heap. Both loops are warm (their variants and the
 * growth run before); it comes last, so that its collections change nothing measured after it.
 */
async function pairedLoopRatio(): Promise<{ ratios: number[]; median: number; loopUs: number[]; handUs: number[] }> {
  const collect = fullCollection();
  const agent = makeAgent();
  const model = new ScriptedModel(benchScript(TOOL_STEPS), { loop: true, recordCalls: false });
  const ratios: number[] = [];
  const loopUs: number[] = [];
  const handUs: number[] = [];
  for (let round = 0; round < PAIRED_ROUNDS; round++) {
    // Each round starts on a collected heap: it pays for the collections of what it allocates, not
    // for those of what came before it.
    collect();
    const { sample: l } = await timed(LOOP_PAIRED_RUNS * STEPS, async () => {
      for (let i = 0; i < LOOP_PAIRED_RUNS; i++) await loopRun(agent, [], 1);
    });
    collect();
    const { sample: h } = await timed(LOOP_PAIRED_RUNS * STEPS, async () => {
      for (let i = 0; i < LOOP_PAIRED_RUNS; i++) await handRun(model);
    });
    loopUs.push(usPerStep(l));
    handUs.push(usPerStep(h));
    ratios.push(usPerStep(l) / usPerStep(h));
  }
  return { ratios, median: median(ratios), loopUs, handUs };
}

// ---------------------------------------------------------------------------------------------
// growth: consecutive runs in one session

interface GrowthMeasure {
  samples: Sample[];
  disk: Disk[];
  written: Array<number | null>;
  runIds: string[];
  lags: Lag[];
}

interface GrowthPoint {
  run: number;
  priorMessages: number;
  usPerStep: number;
  cpuUsPerStep: number;
  /** µs/step of the measured run of each session, and their median. */
  perSession: number[];
  medianUsPerStep: number;
  /** Each session's measured run's idle waits (see Lag). */
  lags: Lag[];
  bytesPerStep: number;
  usedBytesPerStep: number;
  /** The bytes the point's runs added to the rows of every table and index (see Disk), per step. */
  storedBytesPerStep: number;
  writtenBytesPerStep: number | null;
  /** Event data bytes per step, by type. */
  bytesPerEventType: Record<string, number>;
  /** The size of the measured runs' checkpoint state (the run_checkpoints row, rewritten at every step). */
  checkpointStateBytes: number | null;
  loopUsPerStep: number;
  /** The median of the point's turns: a turn that met a collection of the heap weighs as one. */
  loopMedianUsPerStep: number;
  loopCpuUsPerStep: number;
}

async function durableGrowth(path: string): Promise<Map<number, GrowthMeasure>> {
  const d = openDurable(path, 'FULL');
  const side = openSide(path);
  const at = new Map<number, GrowthMeasure>(
    GROWTH_AT.map((k) => [k, { samples: [], disk: [], written: [], runIds: [], lags: [] }]),
  );
  try {
    for (let i = 0; i < WARMUP; i++) await durableRun(d, (await d.rt.sessions.create()).id, i);
    for (let s = 0; s < GROWTH_SESSIONS; s++) {
      const session = await d.rt.sessions.create();
      for (let k = 0; k < GROWTH_RUNS; k++) {
        const point = at.get(k);
        if (!point) {
          await durableRun(d, session.id, k);
          continue;
        }
        const disk0 = await checkpointed(side, path, 'RESTART');
        const w0 = written();
        const { sample, runId, lag } = await durableRun(d, session.id, k);
        const w1 = written();
        const disk1 = await checkpointed(side, path, 'RESTART');
        point.samples.push(sample);
        point.disk.push({
          file: disk1.file - disk0.file,
          used: disk1.used - disk0.used,
          stored: disk1.stored - disk0.stored,
        });
        point.written.push(perStep(w0, w1, 1));
        point.runIds.push(runId);
        point.lags.push(lag);
      }
      // The session's context holds what its runs added (read after them: nothing timed follows in it).
      const context = await d.rt.sessions.context(session.id);
      if (context.messages.length !== GROWTH_RUNS * MESSAGES_PER_RUN) {
        throw new Error(
          `growth: the session holds ${context.messages.length} messages, expected ${GROWTH_RUNS * MESSAGES_PER_RUN}`,
        );
      }
    }
    return at;
  } finally {
    await closeDurable(d);
    side.close();
  }
}

/**
 * The in-memory loop at each growth point: each session's histories are built first (the turns run
 * one after another, as the durable growth's runs), then the points are timed in rounds, one turn
 * at each point per round. Interleaved, the points share the machine's drift and the collector's
 * state; one point after the other, a turn that meets a collection of an older heap, or a busy
 * minute of the machine, counts against that point alone.
 */
async function loopGrowth(): Promise<Map<number, Sample[]>> {
  const agent = makeAgent();
  const at = new Map(GROWTH_AT.map((k) => [k, [] as Sample[]]));
  for (let i = 0; i < 20; i++) await loopRun(agent, [], 1);
  for (let s = 0; s < GROWTH_SESSIONS; s++) {
    const histories = new Map<number, Message[]>();
    let history: Message[] = [];
    for (let k = 0; k < GROWTH_RUNS; k++) {
      if (history.length !== k * MESSAGES_PER_RUN)
        throw new Error(`loop growth: ${history.length} messages before run ${k}`);
      if (at.has(k)) histories.set(k, history);
      history = await loopRun(agent, history, k + 1);
    }
    // The same turn LOOP_REPEAT times on each point's history (one turn alone is too short to time).
    for (let r = 0; r < LOOP_REPEAT; r++) {
      for (const [k, samples] of at)
        samples.push((await timed(STEPS, () => loopRun(agent, histories.get(k)!, k + 1))).sample);
    }
  }
  return at;
}

function growthPoints(path: string, durable: Map<number, GrowthMeasure>, loop: Map<number, Sample[]>): GrowthPoint[] {
  const db = new Database(path, { readonly: true });
  try {
    return GROWTH_AT.map((k) => {
      const d = durable.get(k)!;
      const ds = sum(d.samples);
      const l = sum(loop.get(k)!);
      const steps = d.runIds.length * STEPS;
      const bytesPerEventType: Record<string, number> = {};
      const runs = new Set(d.runIds);
      const sessions = db
        .prepare<[string], { session_id: string }>(`SELECT DISTINCT session_id FROM runs WHERE id ${IN_JSON}`)
        .all(JSON.stringify(d.runIds));
      const mine = storedEvents(
        db,
        sessions.map((r) => r.session_id),
      ).filter((e) => e.runId !== undefined && runs.has(e.runId));
      for (const r of eventBytes(mine)) bytesPerEventType[r.type] = r.bytes / steps;
      const cp = tableBytes(
        db,
        '',
        `SELECT count(*) AS rows, sum(length(CAST(state AS BLOB))) AS bytes FROM run_checkpoints WHERE run_id ${IN_JSON}`,
        JSON.stringify(d.runIds),
      );
      return {
        run: k,
        priorMessages: k * MESSAGES_PER_RUN,
        usPerStep: usPerStep(ds),
        cpuUsPerStep: cpuPerStep(ds),
        perSession: d.samples.map(usPerStep),
        medianUsPerStep: median(d.samples.map(usPerStep)),
        lags: d.lags,
        bytesPerStep: mean(d.disk.map((x) => x.file)) / STEPS,
        usedBytesPerStep: mean(d.disk.map((x) => x.used)) / STEPS,
        storedBytesPerStep: mean(d.disk.map((x) => x.stored)) / STEPS,
        writtenBytesPerStep: d.written.some((w) => w === null) ? null : mean(d.written as number[]) / STEPS,
        bytesPerEventType,
        checkpointStateBytes: cp.error || cp.rows === 0 ? null : cp.bytes / cp.rows,
        loopUsPerStep: usPerStep(l),
        loopMedianUsPerStep: median(loop.get(k)!.map(usPerStep)),
        loopCpuUsPerStep: cpuPerStep(l),
      };
    });
  } finally {
    db.close();
  }
}

/** An idle wait longer than this is a missed wake-up (see Lag). */
const SLOW_MS = 50;
const isSlow = (x: number) => !(x <= SLOW_MS);
function lagStats(lags: readonly Lag[]) {
  const one = (xs: number[]) => ({
    median: median(xs),
    max: Math.max(...xs),
    slow: xs.filter(isSlow).length,
    slowMs: xs.filter(isSlow).reduce((a, b) => a + b, 0),
  });
  return {
    runs: lags.length,
    claimedWithSend: lags.filter((l) => l.claimedWithSend).length,
    claim: one(lags.map((l) => l.claim)),
    end: one(lags.map((l) => l.end)),
  };
}

/** The user path's figures for --json (see userPathPaired). */
function userPathFigures(idem: UserPathResult, effectful: UserPathResult) {
  return {
    userPathUsPerStep: median(idem.userUs),
    userPathRatio: idem.median,
    userPathRatios: idem.ratios,
    userPathFloorUsPerStep: median(idem.floorUs),
    userPathCpuUsPerStep: cpuPerStep(idem.sample),
    userPathSegments: idem.segments,
    userPathEffectfulUsPerStep: median(effectful.userUs),
    userPathEffectfulRatio: effectful.median,
    userPathEffectfulRatios: effectful.ratios,
    userPathEffectfulFloorUsPerStep: median(effectful.floorUs),
    userPathEffectfulCpuUsPerStep: cpuPerStep(effectful.sample),
    userPathEffectfulSegments: effectful.segments,
  };
}

function printUserPath(idem: UserPathResult, effectful: UserPathResult): void {
  for (const [name, r] of [
    ['user path', idem],
    ['user path, effectful', effectful],
  ] as const) {
    console.log(
      `  ${`${name} / floor`.padEnd(20)} : ${fmt(r.median, 2)}× (median of ${PAIRED_ROUNDS} rounds measured alternately: ${r.ratios.map((x) => fmt(x, 2)).join(', ')}; ` +
        `medians ${fmt(median(r.userUs))} / ${fmt(median(r.floorUs))} µs/step, CPU ${fmt(cpuPerStep(r.sample))} µs/step): a new session, send, runs.wait, the transcript`,
    );
    const g = r.segments;
    if (g)
      console.log(
        `                         a run: create ${fmt(g.create, 0)} µs, send ${fmt(g.send, 0)}, send → first commit ${fmt(g.start, 0)}, first → last commit ${fmt(g.steps, 0)}, ` +
          `last commit → wait returned ${fmt(g.after, 0)}, transcript ${fmt(g.read, 0)}; ${fmt(g.commits, 0)} commits; beyond its steps ${fmt(g.beyondStepsUs, 0)} µs (medians of ${g.runs} runs)`,
      );
  }
}

// ---------------------------------------------------------------------------------------------
// main

const dir = mkdtempSync(join(tmpdir(), 'keel-bench-durable-'));
try {
  const started = performance.now();
  const load = loadavg();
  const psi0 = { cpu: pressure('cpu'), io: pressure('io') };
  const warmup = await processWarmup(dir);
  if (USER_PATH_ONLY) {
    const userPath = await userPathPaired(dir, false);
    const userPathEffectful = await userPathPaired(dir, true);
    const result = { ...userPathFigures(userPath, userPathEffectful), contention: { loadavg: load } };
    if (JSON_OUT) console.log(JSON.stringify(result));
    else printUserPath(userPath, userPathEffectful);
    process.exit(0);
  }
  const durable = await durableVariant(join(dir, 'durable.db'), 'FULL');
  const parts = breakdown(join(dir, 'durable.db'), durable.sessions, durable.sample.steps);
  const normal = await durableVariant(join(dir, 'normal.db'), 'NORMAL', { runs: RUNS_NORMAL });
  const effectful = await durableVariant(join(dir, 'effectful.db'), 'FULL', { effectful: true });
  const floor = await floorVariant(join(dir, 'floor.db'), durable.sample.steps);
  const paired = await pairedRatio(dir);
  // Right after the durable ratio, in the same state of the process (measured last, after the loops
  // and the growth runs, its steps were slower in the four runs compared, by 10–40 %).
  const userPath = await userPathPaired(dir, false);
  const userPathEffectful = await userPathPaired(dir, true);
  const loop = await loopVariant();
  const hand = await handLoopVariant();
  const growth = growthPoints(join(dir, 'growth.db'), await durableGrowth(join(dir, 'growth.db')), await loopGrowth());
  // Last: its rounds collect the heap, which must not change what is measured after it.
  const pairedLoop = await pairedLoopRatio();
  const seconds = (performance.now() - started) / 1000;
  const stalled = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined ? (b - a) / (seconds * 1e4) : null;
  const contention = {
    loadavg: load,
    cpuPressurePct: stalled(psi0.cpu, pressure('cpu')),
    ioPressurePct: stalled(psi0.io, pressure('io')),
  };
  const first = growth[0]!;
  const last = growth.at(-1)!;

  const result = {
    node: process.version,
    cpus: cpus().length,
    youngGenerationMb: youngGenerationMb(),
    runs: RUNS,
    toolSteps: TOOL_STEPS,
    steps: durable.sample.steps,
    loopRuns: LOOP_RUNS,
    processWarmupRuns: warmup.runs,
    usPerStep: usPerStep(durable.sample),
    cpuUsPerStep: cpuPerStep(durable.sample),
    cpuUserUsPerStep: durable.sample.userUs / durable.sample.steps,
    cpuSystemUsPerStep: durable.sample.systemUs / durable.sample.steps,
    floorUsPerStep: usPerStep(floor.sample),
    floorCpuUsPerStep: cpuPerStep(floor.sample),
    // The median of the paired rounds' ratios (durable and floor measured alternately).
    ratio: paired.median,
    pairedRatios: paired.ratios,
    pairedUsPerStep: median(paired.durableUs),
    pairedFloorUsPerStep: median(paired.floorUs),
    ratioOfMeans: usPerStep(durable.sample) / usPerStep(floor.sample),
    ...userPathFigures(userPath, userPathEffectful),
    normalUsPerStep: usPerStep(normal.sample),
    normalTxUsPerStep: normal.txUsPerStep,
    normalSegments: normal.segments,
    segments: durable.segments,
    normalRunUsPerStep: {
      median: median(normal.perRun),
      p90: percentile(normal.perRun, 0.9),
      max: Math.max(...normal.perRun),
    },
    effectfulUsPerStep: usPerStep(effectful.sample),
    effectfulCommitsPerStep: effectful.commitsPerStep,
    normalCpuUsPerStep: cpuPerStep(normal.sample),
    loopUsPerStep: usPerStep(loop),
    loopCpuUsPerStep: cpuPerStep(loop),
    handLoopUsPerStep: usPerStep(hand),
    handLoopCpuUsPerStep: cpuPerStep(hand),
    // The median of the paired rounds' ratios (the loop and the hand loop measured alternately).
    loopRatio: pairedLoop.median,
    loopPairedRatios: pairedLoop.ratios,
    loopPairedUsPerStep: median(pairedLoop.loopUs),
    handLoopPairedUsPerStep: median(pairedLoop.handUs),
    loopRatioOfMeans: usPerStep(loop) / usPerStep(hand),
    lags: lagStats(durable.lags),
    normalLags: lagStats(normal.lags),
    commitsPerStep: durable.commitsPerStep,
    normalCommitsPerStep: normal.commitsPerStep,
    bytesPerStep: durable.bytesPerStep,
    usedBytesPerStep: durable.usedBytesPerStep,
    storedBytesPerStep: durable.storedBytesPerStep,
    normalBytesPerStep: normal.bytesPerStep,
    floorBytesPerStep: floor.bytesPerStep,
    floorRowBytes: floor.rowBytes,
    writtenBytesPerStep: durable.writtenPerStep,
    normalWrittenBytesPerStep: normal.writtenPerStep,
    floorWrittenBytesPerStep: floor.writtenPerStep,
    eventsPerStep: parts.eventsPerStep,
    eventDataBytesPerStep: parts.eventBytesPerStep,
    bytesPerEventType: parts.byType,
    tables: parts.tables,
    growth,
    growthRatio: {
      durable: last.usPerStep / first.usPerStep,
      loop: last.loopMedianUsPerStep / first.loopMedianUsPerStep,
      loopOfMeans: last.loopUsPerStep / first.loopUsPerStep,
      bytes: last.bytesPerStep / first.bytesPerStep,
      usedBytes: last.usedBytesPerStep / first.usedBytesPerStep,
      storedBytes: last.storedBytesPerStep / first.storedBytesPerStep,
    },
    seconds,
    contention,
  };

  if (JSON_OUT) {
    console.log(JSON.stringify(result));
  } else {
    const spread = (xs: readonly number[]) =>
      `${fmt(Math.min(...xs), 0)} / ${fmt(median(xs), 0)} / ${fmt(percentile(xs, 0.9), 0)} / ${fmt(Math.max(...xs), 0)}`;
    const row = (name: string, s: Sample, note: string) =>
      `  ${name.padEnd(9)} ${fmt(usPerStep(s)).padStart(9)} ${fmt(cpuPerStep(s)).padStart(11)} ${fmt(s.userUs / s.steps).padStart(9)} ${fmt(s.systemUs / s.steps).padStart(9)}   ${note}`;
    const commits = (c: number | null) => (c === null ? 'n/a' : fmt(c, 2));
    const b = (n: number | null) => (n === null ? 'n/a' : `${fmt(n, 0)} B`);
    const out = console.log;
    out(
      `keel durable hot path — node ${process.version}, ${cpus().length} CPUs, SQLite files in ${tmpdir()} (${fmt(seconds)} s)`,
    );
    const pct = (x: number | null) => (x === null ? 'n/a' : `${fmt(x, 0)}%`);
    out(
      `  machine: load average ${load.map((x) => fmt(x, 2)).join(' ')} at the start; some task waited for CPU ${pct(contention.cpuPressurePct)}, for I/O ${pct(contention.ioPressurePct)} of the time (PSI)`,
    );
    out(
      `  V8's young generation: ${fmt(youngGenerationMb(), 0)} MB (both semi-spaces, as grown by now; Node 24 lets them grow to 2 × 64 MB, Keel's deployment setting caps them at 2 × 16 MB: NODE_OPTIONS=--max-semi-space-size=16, ADR-0031)`,
    );
    out(
      `  workload: runs of ${TOOL_STEPS} tool steps + 1 final answer, zero-latency scripted model, one run at a time, system prompt ${SYSTEM.length} chars`,
    );
    out(
      `  measured in the process's steady state: after ${warmup.runs} runs of the same workload (${fmt(warmup.seconds)} s; PROCESS_WARMUP=${PROCESS_WARMUP})`,
    );
    out('');
    out(`  variant      µs/step  CPU µs/step      user    system`);
    out(
      row(
        'durable',
        durable.sample,
        `${RUNS} runs = ${durable.sample.steps} steps, a new session each, synchronous=FULL (runs min/median/p90/max ${spread(durable.perRun)} µs/step)`,
      ),
    );
    out(
      row(
        'normal',
        normal.sample,
        `the same with synchronous=NORMAL, ${RUNS_NORMAL} runs = ${normal.sample.steps} steps (runs min/median/p90/max ${spread(normal.perRun)} µs/step)`,
      ),
    );
    out(
      row(
        'effectful',
        effectful.sample,
        `as durable, the tool declared not idempotent: its call is durable before it runs (runs min/median/p90/max ${spread(effectful.perRun)} µs/step)`,
      ),
    );
    out(
      row(
        'floor',
        floor.sample,
        `better-sqlite3 alone: 1 INSERT of a ${floor.rowBytes}-byte row and 1 commit (fsync) per step, ${floor.sample.steps} steps`,
      ),
    );
    out(row('loop', loop, `runTurn + MemorySink (no deltas), ${LOOP_RUNS} runs, empty history`));
    out(
      row('handLoop', hand, `by hand: doStream, read to the end, run the tool, push the messages; ${LOOP_RUNS} runs`),
    );
    out('');
    const lags = (name: string, l: ReturnType<typeof lagStats>) => {
      const one = (o: ReturnType<typeof lagStats>['claim']) =>
        `median ${fmt(o.median, 2)} ms, max ${fmt(o.max, 2)} ms, ${o.slow} over ${SLOW_MS} ms`;
      return `  ${name.padEnd(8)} send → running: ${one(l.claim)} (${l.claimedWithSend} of ${l.runs} claimed in the send's transaction); completed → wait returned: ${one(l.end)} (${l.runs} runs)`;
    };
    out(
      `  idle waits inside the timed runs (missed wake-ups show as waits over ${SLOW_MS} ms; they are part of µs/step):`,
    );
    out(lags('durable', result.lags));
    out(lags('normal', result.normalLags));
    out('');
    out(
      `  durable / floor      : ${fmt(result.ratio, 2)}× (median of ${PAIRED_ROUNDS} rounds measured alternately: ${paired.ratios.map((r) => fmt(r, 2)).join(', ')}; medians ${fmt(result.pairedUsPerStep)} / ${fmt(result.pairedFloorUsPerStep)} µs/step); ${fmt(result.ratioOfMeans, 2)}× from the variants above`,
    );
    printUserPath(userPath, userPathEffectful);
    out(`  durable − normal     : ${fmt(result.usPerStep - result.normalUsPerStep)} µs/step (what the fsyncs cost)`);
    out(
      `  normal − loop        : ${fmt(result.normalUsPerStep - result.loopUsPerStep)} µs/step (the durable path without fsync, over the in-memory loop)`,
    );
    out(
      `  normal in SQLite     : ${fmt(normal.txUsPerStep)} µs/step inside write transactions, BEGIN to COMMIT (each run's send, claim, steps and finish, and the worker's next look for work); ${fmt(result.normalUsPerStep - normal.txUsPerStep)} µs/step outside`,
    );
    const seg = normal.segments;
    if (seg) {
      out(
        `  normal, a run        : send ${fmt(seg.send, 0)} µs, start to the first step's commit ${fmt(seg.start, 0)}, a tool step ${fmt(seg.step, 0)} (commit to commit), ` +
          `the last step and the run's end ${fmt(seg.finish, 0)}, then to runs.wait's answer ${fmt(seg.after, 0)} (medians of ${seg.runs} runs);`,
      );
      out(
        `                         beyond ${STEPS} steps at ${fmt(seg.step, 0)} µs, a run costs ${fmt(seg.overheadUs, 0)} µs: ${fmt(seg.overheadUsPerStep)} µs/step`,
      );
    }
    out(
      `  loop / handLoop      : ${fmt(result.loopRatio, 2)}× (median of ${PAIRED_ROUNDS} rounds measured alternately: ${pairedLoop.ratios.map((r) => fmt(r, 2)).join(', ')}; ` +
        `medians ${fmt(result.loopPairedUsPerStep)} / ${fmt(result.handLoopPairedUsPerStep)} µs/step); ${fmt(result.loopRatioOfMeans, 2)}× from the variants above`,
    );
    out('');
    out(
      `  commits / step       : ${commits(durable.commitsPerStep)} (normal ${commits(normal.commitsPerStep)}, effectful ${commits(effectful.commitsPerStep)}, floor 1)${durable.commitsPerStep === null ? ': the store has no commitCount' : ''}; per run also: the send (which claims the run for the idle worker, ADR-0027)`,
    );
    out(
      `  disk bytes / step    : ${b(durable.bytesPerStep)} file growth, ${b(durable.usedBytesPerStep)} in pages in use, ${b(durable.storedBytesPerStep)} stored in rows (normal ${b(normal.bytesPerStep)}, floor ${b(floor.bytesPerStep)}), after a complete WAL checkpoint`,
    );
    out(
      `  written bytes / step : ${b(durable.writtenPerStep)} (normal ${b(normal.writtenPerStep)}, floor ${b(floor.writtenPerStep)}): write(2) bytes, /proc/self/io wchar (WAL frames + checkpoints)`,
    );
    out(`  events / step        : ${fmt(parts.eventsPerStep, 2)}, with ${b(parts.eventBytesPerStep)} of event data`);
    out('');
    out(`  event type                n  avg data B  data B/step`);
    for (const [type, t] of Object.entries(parts.byType)) {
      out(
        `  ${type.padEnd(20)} ${String(t.n).padStart(6)} ${fmt(t.avgBytes, 0).padStart(11)} ${fmt(t.bytesPerStep, 0).padStart(12)}`,
      );
    }
    for (const [name, t] of Object.entries(parts.tables)) {
      const body = t.error
        ? `n/a (${t.error})`
        : `${t.rows} rows, ${b(t.bytes)} = ${b(t.bytes / durable.sample.steps)} per measured step`;
      out(`  table ${name.padEnd(16)} ${body} [${t.scope}]`);
    }
    out('');
    out(
      `  growth: ${GROWTH_SESSIONS} sessions × ${GROWTH_RUNS} consecutive runs (durable, FULL), the run at each point averaged over the sessions (mean; wall time is`,
    );
    out(`  sensitive to other load on the machine: see the median, the sessions and the CPU time);`);
    out(
      `  loop: the history carried from run to run, then ${LOOP_REPEAT} turns per point and session, the points in turn (mean, and median of the turns)`,
    );
    const slowGrowth = growth.flatMap((g) =>
      g.lags.flatMap((l) => [
        ...(isSlow(l.claim) ? [`claim ${fmt(l.claim, 0)} ms at ${fmt(g.priorMessages, 0)} prior`] : []),
        ...(isSlow(l.end) ? [`end ${fmt(l.end, 0)} ms at ${fmt(g.priorMessages, 0)} prior`] : []),
      ]),
    );
    if (slowGrowth.length > 0)
      out(`  missed wake-ups in the growth runs measured (part of their µs/step): ${slowGrowth.join(', ')}`);
    out(
      `  prior messages  µs/step   median  (per session)              CPU µs/step  disk B/step  in use B/step  stored B/step  written B/step  loop µs/step   median  loop CPU µs/step`,
    );
    for (const g of growth) {
      out(
        `  ${fmt(g.priorMessages, 0).padStart(14)} ${fmt(g.usPerStep).padStart(8)} ${fmt(g.medianUsPerStep).padStart(8)}  ${`(${g.perSession.map((x) => fmt(x, 0)).join(', ')})`.padEnd(26)} ${fmt(g.cpuUsPerStep).padStart(11)} ${fmt(g.bytesPerStep, 0).padStart(12)} ${fmt(g.usedBytesPerStep, 0).padStart(14)} ${fmt(g.storedBytesPerStep, 0).padStart(14)} ${(g.writtenBytesPerStep === null ? 'n/a' : fmt(g.writtenBytesPerStep, 0)).padStart(15)} ${fmt(g.loopUsPerStep).padStart(13)} ${fmt(g.loopMedianUsPerStep).padStart(8)} ${fmt(g.loopCpuUsPerStep).padStart(17)}`,
      );
    }
    out(
      `  growth ${fmt(last.priorMessages, 0)}/${fmt(first.priorMessages, 0)}: durable µs/step ${fmt(result.growthRatio.durable, 2)}×, loop µs/step ${fmt(result.growthRatio.loop, 2)}× (medians; means ${fmt(result.growthRatio.loopOfMeans, 2)}×), disk B/step ${fmt(result.growthRatio.bytes, 2)}× (in use ${fmt(result.growthRatio.usedBytes, 2)}×, stored in rows ${fmt(result.growthRatio.storedBytes, 2)}×)`,
    );
    const types = [...new Set(growth.flatMap((g) => Object.keys(g.bytesPerEventType)))].sort(
      (x, y) => (last.bytesPerEventType[y] ?? 0) - (last.bytesPerEventType[x] ?? 0),
    );
    out(`  event data B/step at each point: ${growth.map((g) => `${fmt(g.priorMessages, 0)} prior`).join(' | ')}`);
    for (const t of types)
      out(`    ${t.padEnd(20)} ${growth.map((g) => fmt(g.bytesPerEventType[t] ?? 0, 0).padStart(9)).join('  ')}`);
    out(
      `    ${'run checkpoint state'.padEnd(20)} ${growth.map((g) => (g.checkpointStateBytes === null ? 'n/a' : fmt(g.checkpointStateBytes, 0)).padStart(9)).join('  ')}   (bytes of one row, written at each turn's end)`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
