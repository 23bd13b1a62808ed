/**
 * The chaos test. A worker process executes runs with idempotent and non-idempotent tools while
 * this process (the API side, on the same database file) sends tasks, enqueues more behind busy
 * sessions, steers running runs, approves and denies the tool that asks, and cancels runs; and
 * the worker is killed with SIGKILL at random moments, many times, and started again. At the end
 * every wait is decided, a last worker finishes everything, and the database and the tools'
 * ledger (fsynced by each execution) are checked:
 *
 * - every session's seqs are 1..n without a gap or a duplicate id;
 * - every run is terminal: completed, or cancelled when it was asked to be;
 * - every tool call in the log has exactly one result;
 * - no non-idempotent tool (send_once, danger) executed twice for one call, and none ran that
 *   the log does not know;
 * - every accepted message is in the log exactly once (an enqueued run cancelled before it came
 *   up aside), and every completed run answered its task and saw every message steered into it;
 * - no input is left in the inbox, and the replay check explains every request.
 *
 * `npm run chaos` runs the full version (a few minutes); `test/chaos/chaos.test.ts` a short one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRuntime, isTerminal, Sessions, SqliteStore, verifyReplay, type RunRecord, type Runtime, type StoredEvent } from '../../src/index.ts';
import { CHAOS_RUNTIME, chaosAgent, type ChaosLedgerLine } from './chaos-agent.ts';

const WORKER = fileURLToPath(new URL('./chaos-worker.ts', import.meta.url));

export interface ChaosOptions {
  sessions: number;
  /** Tasks, steers, cancels and decisions per session (besides its first task). */
  actionsPerSession: number;
  kills: number;
  /** Keep the database and ledger (their directory is printed). */
  keep?: boolean;
  log?: (line: string) => void;
}

export interface ChaosReport {
  kills: number;
  sessions: number;
  runs: number;
  events: number;
  accepted: number;
  steered: number;
  cancelled: number;
  decisions: number;
  violations: string[];
  seconds: number;
}

interface Child {
  process: ChildProcess;
  exited: Promise<void>;
  busy: Promise<boolean>;
}

function startWorker(db: string, ledger: string, gen: number): Child {
  const child = spawn(process.execPath, [WORKER, db, ledger, String(gen)], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      if (code !== 0 && signal !== 'SIGKILL' && stderr) process.stderr.write(`chaos worker ${gen} exited ${code ?? signal}: ${stderr}\n`);
      resolve();
    }),
  );
  const busy = new Promise<boolean>((resolve) => {
    child.on('message', (m) => m === 'busy' && resolve(true));
    void exited.then(() => resolve(false));
  });
  return { process: child, exited, busy };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

/** A refusal the API may rightly give (the run moved on meanwhile), as opposed to a failure. */
function isRefusal(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && ['illegal_transition', 'run_busy', 'not_found', 'already_decided', 'turn_not_over', 'conflict'].includes(code);
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const t0 = Date.now();
  const log = o.log ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), 'keel-chaos-'));
  const db = join(dir, 'keel.db');
  const ledgerPath = join(dir, 'ledger.jsonl');
  const store = new SqliteStore({ path: db, busyTimeoutMs: 30_000 });
  // The API side: it sends, steers, decides and cancels; it executes nothing.
  const rt: Runtime = createRuntime({ store, agents: [chaosAgent(ledgerPath, -1)], ...CHAOS_RUNTIME });
  const violations: string[] = [];
  const accepted = new Map<string, { sessionId: string; runId: string; kind: 'created' | 'enqueued' | 'steered'; text: string }>();
  const cancelRequested = new Set<string>();
  let decisions = 0;
  let kills = 0;
  const children: Child[] = [];
  let gen = 0;

  const unexpected = (what: string, e: unknown) => {
    if (!isRefusal(e)) violations.push(`${what}: ${(e as Error).stack ?? String(e)}`);
  };
  const send = async (sessionId: string, text: string, ifBusy: 'reject' | 'enqueue' | 'steer') => {
    try {
      const r = await rt.sessions.send(sessionId, text, { agent: 'chaos', ifBusy });
      accepted.set(r.message.id, { sessionId, runId: r.run.id, kind: r.outcome, text });
    } catch (e) {
      unexpected(`send ${text}`, e);
    }
  };
  const decideWaiting = async () => {
    for (const run of await store.listRuns({ statuses: ['waiting_approval'], limit: 1000 })) {
      const calls = (run.waiting as { calls?: Array<{ toolCallId: string }>; decisions?: Record<string, unknown> } | null)?.calls ?? [];
      for (const c of calls) {
        try {
          if (Math.random() < 0.7) await rt.runs.approve(run.id, c.toolCallId);
          else await rt.runs.deny(run.id, c.toolCallId, { reason: 'chaos says no' });
          decisions++;
        } catch (e) {
          unexpected(`decide ${run.id}`, e);
        }
      }
    }
  };

  try {
    // ---- The sessions and their first tasks.
    const sessionIds: string[] = [];
    for (let i = 0; i < o.sessions; i++) {
      const s = await rt.sessions.create({ title: `chaos ${i}`, agent: 'chaos' });
      sessionIds.push(s.id);
      await send(s.id, `task t${i}a steps=${3 + (i % 4)}${i % 3 === 0 ? ' danger' : ''}`, 'reject');
    }

    // ---- The driver: actions on random sessions, while workers are killed.
    let actionsLeft = o.sessions * o.actionsPerSession;
    let killsDone = false;
    const driver = (async () => {
      let n = 0;
      while (actionsLeft-- > 0) {
        // Spread over the kills: tasks, steering, cancels and decisions land while workers die.
        await sleep(100 + Math.random() * 300);
        if (killsDone) break;
        const sessionId = pick(sessionIds);
        const roll = Math.random();
        n++;
        try {
          if (roll < 0.3) await send(sessionId, `task t${n} steps=${2 + (n % 4)}${n % 4 === 0 ? ' danger' : ''}`, 'enqueue');
          else if (roll < 0.6) {
            // Steering goes to a session that is busy, when one is (else it starts a run).
            const busy = (await store.listRuns({ statuses: ['running', 'queued'], limit: 1000 })).filter((r) => !r.queuedBehind);
            await send(busy.length > 0 ? pick(busy).sessionId : sessionId, `steer s${n}`, 'steer');
          }
          else if (roll < 0.76) {
            const live = (await store.listRuns({ sessionId, limit: 100 })).filter((r) => !isTerminal(r.status));
            if (live.length > 0) {
              const victim = pick(live);
              cancelRequested.add(victim.id);
              await rt.runs.cancel(victim.id, { graceMs: 300 });
            }
          } else await decideWaiting();
        } catch (e) {
          unexpected(`action ${n}`, e);
        }
      }
    })();

    // ---- The chaos: a worker runs until it is killed at a random moment; then another.
    while (kills < o.kills) {
      const c = startWorker(db, ledgerPath, gen++);
      children.push(c);
      const busy = await Promise.race([c.busy, sleep(10_000).then(() => false)]);
      if (busy) await sleep(50 + Math.random() * 600);
      c.process.kill('SIGKILL');
      await c.exited;
      kills++;
      if (kills % 10 === 0) log(`chaos: ${kills} kills (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    }
    killsDone = true;
    await driver;
    log(`chaos: kills done (${((Date.now() - t0) / 1000).toFixed(0)} s); finishing`);

    // ---- The end: a last worker, every wait decided, until everything is terminal.
    const last = startWorker(db, ledgerPath, gen++);
    children.push(last);
    const deadline = Date.now() + 120_000;
    for (;;) {
      await decideWaiting();
      const left = (await store.listRuns({ limit: 100_000 })).filter((r) => !isTerminal(r.status));
      if (left.length === 0) break;
      if (Date.now() > deadline) {
        violations.push(`${left.length} runs not terminal at the end: ${left.map((r) => `${r.id} ${r.status}`).join(', ')}`);
        break;
      }
      await sleep(100);
    }
    log(`chaos: every run terminal (${((Date.now() - t0) / 1000).toFixed(0)} s); checking`);
    last.process.send('stop');
    await Promise.race([last.exited, sleep(10_000)]);

    // ---- What the database and the ledger show.
    const ledger = readFileSync(ledgerPath, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ChaosLedgerLine);
    const executions = new Map<string, ChaosLedgerLine[]>();
    for (const l of ledger) executions.set(`${l.runId}/${l.toolCallId}`, [...(executions.get(`${l.runId}/${l.toolCallId}`) ?? []), l]);
    const known = new Set<string>();
    const inLog = new Map<string, number>();
    const runs: RunRecord[] = await store.listRuns({ limit: 100_000 });
    let events = 0;
    const sessions = new Sessions({ store });
    for (const sessionId of sessionIds) {
      const log = await store.readEvents(sessionId);
      events += log.length;
      const session = (await store.getSession(sessionId))!;
      if (log.some((e, i) => e.seq !== i + 1) || session.lastSeq !== log.length) violations.push(`session ${sessionId}: seqs are not 1..${session.lastSeq}`);
      if (new Set(log.map((e) => e.id)).size !== log.length) violations.push(`session ${sessionId}: a duplicate event id`);
      for (const e of log) {
        if (e.type !== 'user/message') continue;
        const id = (e.data as { message: { id: string } }).message.id;
        inLog.set(id, (inLog.get(id) ?? 0) + 1);
      }
      if ((await store.countInputs(sessionId, 'steer')) + (await store.countInputs(sessionId, 'message')) > 0) violations.push(`session ${sessionId}: inputs left in the inbox`);
      const replay = await verifyReplay(sessions.log, sessionId);
      if (!replay.ok) violations.push(`session ${sessionId}: replay check: ${JSON.stringify(replay.mismatches.slice(0, 2))}`);

      for (const run of runs.filter((r) => r.sessionId === sessionId)) {
        const mine = log.filter((e) => e.runId === run.id);
        checkRun(run, mine, cancelRequested.has(run.id), executions, known, violations);
        if (run.status === 'completed') {
          // It answered its task and saw everything steered into it.
          const answer = mine.filter((e) => e.type === 'assistant/message').at(-1);
          const text = JSON.stringify(answer?.data ?? '');
          // (A task's answer names it; a message that started a run by itself is among what it saw.)
          const trigger = [...accepted.values()].find((a) => a.runId === run.id && a.kind !== 'steered');
          if (trigger && !text.includes(trigger.text)) violations.push(`run ${run.id} completed without answering ${trigger.text}`);
          for (const s of [...accepted.values()].filter((a) => a.runId === run.id && a.kind === 'steered')) {
            if (!text.includes(s.text)) violations.push(`run ${run.id} completed without seeing ${s.text}`);
          }
        }
      }
    }
    for (const [id, a] of accepted) {
      const n = inLog.get(id) ?? 0;
      const run = runs.find((r) => r.id === a.runId);
      // An enqueued run cancelled before it came up never logs its message; anything else logs it once.
      const neverCameUp = a.kind === 'enqueued' && run?.status === 'cancelled' && run.queuedBehind;
      if (neverCameUp ? n !== 0 : n !== 1) violations.push(`message ${id} (${a.kind} ${a.text}) is in the log ${n} times`);
    }
    for (const k of executions.keys()) if (!known.has(k)) violations.push(`the ledger has an execution of ${k}, which the log does not know`);

    const report: ChaosReport = {
      kills,
      sessions: sessionIds.length,
      runs: runs.length,
      events,
      accepted: accepted.size,
      steered: [...accepted.values()].filter((a) => a.kind === 'steered').length,
      cancelled: runs.filter((r) => r.status === 'cancelled').length,
      decisions,
      violations,
      seconds: (Date.now() - t0) / 1000,
    };
    log(
      `chaos: ${report.kills} kills, ${report.sessions} sessions, ${report.runs} runs (${report.cancelled} cancelled), ${report.events} events, ${report.accepted} messages accepted (${report.steered} steered), ${report.decisions} decisions, ${ledger.length} tool executions: ${violations.length} violations (${report.seconds.toFixed(0)} s)`,
    );
    return report;
  } finally {
    for (const c of children) if (c.process.exitCode === null && c.process.signalCode === null) c.process.kill('SIGKILL');
    await rt.close({ graceMs: 0 });
    await store.close();
    if (o.keep) log(`chaos: kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

type Data = Record<string, unknown>;

/** A run's own invariants: terminal as it should be, every call answered once, no effect twice. */
function checkRun(run: RunRecord, events: StoredEvent[], cancelAsked: boolean, executions: Map<string, ChaosLedgerLine[]>, known: Set<string>, violations: string[]): void {
  const ok = run.status === 'completed' || (run.status === 'cancelled' && cancelAsked);
  if (!ok) violations.push(`run ${run.id} ended ${run.status}${run.error ? `: ${JSON.stringify(run.error)}` : ''}`);
  const called = events.filter((e) => e.type === 'assistant/message').flatMap((e) => ((e.data as Data).message as { content: Array<{ type: string; toolCallId?: string; toolName?: string }> }).content.filter((p) => p.type === 'tool-call'));
  const results = events.filter((e) => e.type === 'tool/result').map((e) => e.data as Data);
  for (const c of called) {
    const n = results.filter((r) => r.toolCallId === c.toolCallId).length;
    if (n !== 1) violations.push(`run ${run.id}: call ${c.toolCallId} has ${n} results`);
    const key = `${run.id}/${c.toolCallId}`;
    known.add(key);
    const ran = executions.get(key) ?? [];
    if (c.toolName !== 'record' && ran.length > 1) violations.push(`run ${run.id}: ${c.toolName} ${c.toolCallId} executed ${ran.length} times`);
  }
  for (const r of results) if (!called.some((c) => c.toolCallId === r.toolCallId)) violations.push(`run ${run.id}: a result for ${String(r.toolCallId)}, which no decision called`);
  const steps = events.filter((e) => e.type === 'assistant/message').map((e) => e.step ?? 0);
  if (steps.some((s, i) => i > 0 && s <= steps[i - 1]!)) violations.push(`run ${run.id}: steps decided twice or out of order: ${steps.join(',')}`);
}

// `node test/chaos/chaos.ts [--sessions N] [--kills N] [--actions N] [--keep]`: the full version.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const arg = (name: string, fallback: number) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? Number(process.argv[i + 1]) : fallback;
  };
  const report = await runChaos({
    sessions: arg('sessions', 40),
    actionsPerSession: arg('actions', 6),
    kills: arg('kills', 60),
    keep: process.argv.includes('--keep'),
    log: (l) => console.log(l),
  });
  for (const v of report.violations.slice(0, 50)) console.log(`  violation: ${v}`);
  process.exit(report.violations.length === 0 ? 0 : 1);
}
