/**
 * The crash test: a worker process is killed with SIGKILL at random moments, again and again,
 * while it executes 40 multi-step runs with tools (8 at once, a 500 ms lease), and started again
 * each time; finally it runs to the end. Then the database and a side-effect ledger written by
 * the tools must show that nothing was lost, duplicated or executed twice:
 *
 * - every run completed (all its steps, in order), every session's seqs are 1..n without a gap;
 * - every tool call in the log has exactly one result, and each step's model decision is
 *   recorded once (no step was executed by two workers);
 * - the non-idempotent tool never executed twice for one call (ledger);
 * - every call that was recorded without a result when a worker died either ran again with the
 *   same idempotency key (idempotent tool) or got an `outcome_unknown` result (the other);
 * - `run/interrupted` events record the recoveries.
 *
 * Set KEEL_CRASH_KEEP=1 to keep the database and the ledger of a run for inspection.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  isTerminal,
  ScriptedModel,
  Sessions,
  SqliteStore,
  tool,
  verifyReplay,
  type EventDraft,
  type StoredEvent,
  type StoreOps,
} from '../../src/index.ts';
import type { CrashWorkerMessage, LedgerLine } from './fixtures/crash-worker.ts';
import { deferred } from '../support/deferred.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/crash-worker.ts', import.meta.url));
const RUNS = 40;
const STEPS = 5; // as in the fixture: tool steps per run, then a final answer
const MIN_KILLS = 5;
const MAX_KILLS = 10;

interface Child {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  next(type: CrashWorkerMessage['type'], timeoutMs: number): Promise<boolean>;
  stderr(): string;
}

function startChild(args: string[]): Child {
  const child = spawn(process.execPath, [FIXTURE, ...args], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const seen = new Set<string>();
  const waiters: Array<{ type: string; resolve: (ok: boolean) => void }> = [];
  child.on('message', (m: CrashWorkerMessage) => {
    seen.add(m.type);
    for (const w of waiters.filter((x) => x.type === m.type)) w.resolve(true);
  });
  void exited.then(() => {
    for (const w of waiters) w.resolve(false);
  });
  return {
    child,
    exited,
    stderr: () => stderr,
    /** Resolves true when the child sent `type` (now or before), false on exit or after `timeoutMs`. */
    next: (type, timeoutMs) =>
      new Promise<boolean>((resolve) => {
        if (seen.has(type)) return resolve(true);
        if (child.exitCode !== null || child.signalCode !== null) return resolve(false);
        const timer = setTimeout(() => resolve(false), timeoutMs);
        waiters.push({
          type,
          resolve: (ok) => {
            clearTimeout(timer);
            resolve(ok);
          },
        });
      }),
  };
}

type Ev<D> = StoredEvent & { data: D };
type CallData = { toolCallId: string; toolName: string; idempotencyKey: string };
type ResultData = {
  toolCallId: string;
  toolName: string;
  output: { type: string; code?: string; value?: { gen: number; key: string } };
};

describe('crash test: SIGKILL a worker process at random moments', () => {
  let dir: string;
  let children: Child[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-crash-'));
  });

  afterEach(() => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    children = [];
    if (process.env.KEEL_CRASH_KEEP) console.log(`kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  });

  it(
    'loses nothing, duplicates nothing, and executes no non-idempotent call twice',
    async () => {
      const db = join(dir, 'keel.db');
      const ledgerPath = join(dir, 'ledger.jsonl');
      const store = new SqliteStore({ path: db, busyTimeoutMs: 30_000 });
      try {
        const setup = startChild([db, ledgerPath, 'setup', String(RUNS)]);
        children.push(setup);
        const setupExit = await setup.exited;
        expect(setupExit.code, setup.stderr()).toBe(0);
        const runIds = (await store.runs.list({ limit: 1000 })).map((r) => r.id);
        expect(runIds).toHaveLength(RUNS);

        // Open calls (a tool/call without a result) at each crash, by tool.
        const openAtCrash = { record: 0, send_once: 0 };
        const delays: number[] = [];
        let gen = 0;
        while (delays.length < MAX_KILLS) {
          if (delays.length >= MIN_KILLS && openAtCrash.record > 0 && openAtCrash.send_once > 0) break;
          const c = startChild([db, ledgerPath, 'work', String(gen++)]);
          children.push(c);
          // Kill at a random moment once it executes tools (it may first wait for leases to expire).
          if (!(await c.next('busy', 20_000))) {
            c.child.kill('SIGKILL');
            await c.exited;
            const left = (await store.runs.list({ limit: 1000 })).filter((r) => !isTerminal(r.status));
            if (left.length === 0) break; // nothing left to crash
            throw new Error(`worker ${gen - 1} did no work within 20 s\n${c.stderr()}`);
          }
          const delay = 100 + Math.floor(Math.random() * 600);
          delays.push(delay);
          await new Promise((r) => setTimeout(r, delay));
          c.child.kill('SIGKILL');
          const exit = await c.exited;
          expect(exit.signal, c.stderr()).toBe('SIGKILL');
          for (const id of runIds) {
            const run = (await store.runs.get(id))!;
            const events = await store.events.read(run.sessionId, { runId: id });
            const answered = new Set(
              events.filter((e) => e.type === 'tool/result').map((e) => (e.data as ResultData).toolCallId),
            );
            for (const e of events) {
              if (e.type === 'tool/call' && !answered.has((e.data as CallData).toolCallId))
                openAtCrash[(e.data as CallData).toolName as 'record' | 'send_once']++;
            }
          }
        }
        expect(delays.length, `kills at ${delays.join(', ')} ms`).toBeGreaterThanOrEqual(MIN_KILLS);

        // Finally let a worker run everything to the end.
        const last = startChild([db, ledgerPath, 'work', String(gen++)]);
        children.push(last);
        expect(await last.next('ready', 30_000), last.stderr()).toBe(true);
        const deadline = Date.now() + 60_000;
        for (;;) {
          const left = (await store.runs.list({ limit: 1000 })).filter((r) => !isTerminal(r.status));
          if (left.length === 0) break;
          if (Date.now() > deadline)
            throw new Error(
              `${left.length} runs still not finished: ${left.map((r) => r.status).join(', ')}\n${last.stderr()}`,
            );
          await new Promise((r) => setTimeout(r, 100));
        }
        last.child.send({ type: 'stop' });
        expect((await last.exited).code, last.stderr()).toBe(0);

        // ---- What the database and the ledger show. ----
        const ledger = readFileSync(ledgerPath, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as LedgerLine);
        const executionsOf = new Map<string, LedgerLine[]>();
        for (const l of ledger) {
          const k = `${l.runId}/${l.toolCallId}`;
          executionsOf.set(k, [...(executionsOf.get(k) ?? []), l]);
        }
        const seenInLog = new Set<string>();
        let interruptions = 0;
        let reExecuted = 0;
        let outcomeUnknown = 0;

        for (const id of runIds) {
          const run = (await store.runs.get(id))!;
          expect(run, `run ${id}`).toMatchObject({ status: 'completed', lease: null });
          const session = (await store.sessions.get(run.sessionId))!;
          const events = await store.events.read(run.sessionId);
          // Contiguous seqs 1..n, no duplicate, and the session's counter agrees.
          expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
          expect(session.lastSeq).toBe(events.length);
          expect(new Set(events.map((e) => e.id)).size).toBe(events.length);

          const calls = events.filter((e) => e.type === 'tool/call') as Array<Ev<CallData>>;
          const results = events.filter((e) => e.type === 'tool/result') as Array<Ev<ResultData>>;
          const recoveries = events.filter((e) => e.type === 'run/interrupted');
          interruptions += recoveries.length;
          // Every call recorded once, every call answered exactly once, no result without a call.
          const callIds = calls.map((c) => c.data.toolCallId);
          expect(new Set(callIds).size).toBe(callIds.length);
          expect(results.map((r) => r.data.toolCallId).sort()).toEqual([...callIds].sort());
          expect(callIds).toHaveLength(2 * STEPS);
          // One model decision per step: no step was executed by two workers.
          const decided = events.filter((e) => e.type === 'assistant/message').map((e) => e.step);
          expect(decided).toEqual(Array.from({ length: STEPS + 1 }, (_, i) => i + 1));
          expect(
            events.filter((e) => e.type === 'run/status' && (e.data as { to: string }).to === 'completed'),
          ).toHaveLength(1);
          expect(events.at(-1)!.type).toBe('run/status');

          for (const call of calls) {
            const result = results.find((r) => r.data.toolCallId === call.data.toolCallId)!;
            const ran = executionsOf.get(`${id}/${call.data.toolCallId}`) ?? [];
            seenInLog.add(`${id}/${call.data.toolCallId}`);
            // Every execution used the key recorded with the call.
            for (const x of ran) expect(x.key).toBe(call.data.idempotencyKey);
            // Recorded without a result when a worker died: a recovery came between the call and its result.
            const interrupted = recoveries.some((r) => r.seq > call.seq && r.seq < result.seq);
            const output = result.data.output;
            if (call.data.toolName === 'send_once') {
              expect(ran.length, `${call.data.toolCallId} executed ${ran.length} times`).toBeLessThanOrEqual(1);
              if (interrupted) {
                expect(output).toMatchObject({ type: 'error', code: 'outcome_unknown' });
                outcomeUnknown++;
              } else {
                expect(ran).toHaveLength(1);
                expect(output).toEqual({ type: 'json', value: { gen: ran[0]!.gen, key: call.data.idempotencyKey } });
              }
            } else {
              // The idempotent tool is never left with an unknown outcome: its result is an execution's.
              expect(output.type).toBe('json');
              expect(output.value!.key).toBe(call.data.idempotencyKey);
              expect(ran.some((x) => x.gen === output.value!.gen)).toBe(true);
              if (interrupted) {
                // Re-executed by the worker that recovered the run.
                expect(ran.length).toBeGreaterThanOrEqual(1);
                reExecuted++;
              } else {
                expect(ran).toHaveLength(1);
              }
            }
          }
          expect(
            results
              .filter((r) => r.data.output.code === 'outcome_unknown')
              .every((r) => r.data.toolName === 'send_once'),
          ).toBe(true);
          // After every recovery the log still explains every request the runs made.
          const replay = await verifyReplay(new Sessions({ store }).log, run.sessionId);
          expect(replay.mismatches).toEqual([]);
          expect(replay.requests).toBeGreaterThanOrEqual(STEPS + 1);
        }
        // The ledger holds no execution of a call the log does not know.
        expect([...executionsOf.keys()].filter((k) => !seenInLog.has(k))).toEqual([]);
        expect(interruptions).toBeGreaterThan(0);
        expect(openAtCrash.send_once).toBeGreaterThan(0);
        expect(openAtCrash.record).toBeGreaterThan(0);
        expect(outcomeUnknown).toBeGreaterThan(0);
        expect(reExecuted).toBeGreaterThan(0);
      } finally {
        await store.close();
      }
    },
    // Typically 5-10 s; a slow shared 2-core box may take several times that.
    120_000,
  );
});

/**
 * The windows a random kill may or may not hit, made to happen every time: one write of the
 * worker fails (as a crash or a storage error would leave it), and the run is recovered.
 */
describe('recovery windows, deterministically', () => {
  /** Makes the first write whose drafts match `fails` throw, inside or outside a transaction. */
  function failOnce(store: SqliteStore, fails: (drafts: readonly EventDraft[]) => boolean): { failed: () => boolean } {
    let failed = false;
    const check = (drafts: readonly EventDraft[]) => {
      if (!failed && fails(drafts)) {
        failed = true;
        throw new Error('injected storage failure');
      }
    };
    const append = store.events.append.bind(store);
    store.events.append = async (sessionId, drafts, o) => {
      check(drafts);
      return append(sessionId, drafts, o);
    };
    const transaction = store.transaction.bind(store);
    store.transaction = <T>(fn: (tx: StoreOps) => Promise<T>) =>
      transaction((tx) =>
        fn({
          ...tx,
          events: {
            ...tx.events,
            append: async (...args: Parameters<StoreOps['events']['append']>) => {
              check(args[1]);
              return tx.events.append(...args);
            },
          },
        }),
      );
    return { failed: () => failed };
  }

  async function scenario(
    fails: (drafts: readonly EventDraft[]) => boolean,
    o: { idempotent?: boolean; freshCallIds?: boolean } = {},
  ) {
    const store = new SqliteStore({ path: ':memory:' });
    const charged: string[] = [];
    // Answers from the conversation, as a real model would: a step redone after a failure asks
    // again and gets the same decision (with `freshCallIds`, under a new call id, as providers do).
    let asked = 0;
    const model = new ScriptedModel(
      [
        (call) =>
          call.prompt.some((m) => m.role === 'tool')
            ? { text: 'charged once' }
            : { toolCalls: [{ id: o.freshCallIds ? `c${++asked}` : 'c1', name: 'charge', input: { amount: 5 } }] },
      ],
      { loop: true },
    );
    const agent = defineAgent({
      name: 'windows',
      model,
      tools: [
        tool({
          name: 'charge',
          description: o.idempotent ? 'safe to repeat with its idempotency key' : 'not safe to repeat',
          input: z.object({ amount: z.number() }),
          idempotent: o.idempotent ?? false,
          execute: (_, ctx) => {
            charged.push(ctx.idempotencyKey);
            return 'charged';
          },
        }),
      ],
    });
    const rt = createRuntime({ store, agents: [agent], leaseMs: 300, renewEveryMs: 50, maxAttempts: 5 });
    const commits: string[][] = [];
    const injected = failOnce(store, (drafts) => {
      commits.push(drafts.map((d) => d.type));
      return fails(drafts);
    });
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'charge it');
    rt.startWorker({ id: 'W', pollMs: 20 });
    try {
      const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 });
      expect(injected.failed()).toBe(true);
      const events = await store.events.read(session.id);
      return { done, events, charged, model, commits };
    } finally {
      await rt.close({ graceMs: 0 });
      await store.close();
    }
  }

  const assistantSteps = (events: readonly StoredEvent[]) =>
    events.filter((e) => e.type === 'assistant/message').map((e) => e.step);

  /** An agent that calls its idempotent tool `note` three times (n = 1, 2, 3), then answers; each decision follows from the results it has seen. */
  const threeNotes = (name: string, execute: (n: number) => number | Promise<number>) =>
    defineAgent({
      name,
      model: new ScriptedModel(
        [
          (call) => {
            const seen = call.prompt.filter((m) => m.role === 'tool').length;
            return seen < 3
              ? { toolCalls: [{ id: `c${seen + 1}`, name: 'note', input: { n: seen + 1 } }] }
              : { text: 'noted thrice' };
          },
        ],
        { loop: true },
      ),
      tools: [
        tool({
          name: 'note',
          description: 'safe to repeat',
          input: z.object({ n: z.number() }),
          idempotent: true,
          execute: ({ n }) => execute(n),
        }),
      ],
    });
  const isStepOf = (type: string) =>
    ['step/start', 'request/header', 'assistant/message', 'tool/call', 'tool/result', 'step/end'].includes(type);

  it('the final step and the turn end commit together: when that commit fails, the answer is asked for again and the run completes once', async () => {
    const { done, events, model, charged, commits } = await scenario((d) =>
      d.some((e) => e.type === 'turn/end' && (e.data as { reason: string }).reason === 'completed'),
    );
    // The loop's commits of the run: step 1 in two (before the charge, and its end), step 2 with
    // the turn end (whose transaction also settles the run's status, appended on its own).
    const loop = commits.filter((c) => c.some(isStepOf));
    expect(loop.slice(0, 3)).toEqual([
      ['turn/start', 'step/start', 'request/header', 'assistant/message', 'tool/call'],
      ['tool/result', 'step/end'],
      ['step/start', 'request/header', 'assistant/message', 'step/end', 'turn/end'],
    ]);
    expect(done).toMatchObject({ status: 'completed', attempt: 2 });
    expect(events.filter((e) => e.type === 'run/interrupted')).toHaveLength(1);
    // Nothing of the failed commit is in the log: step 2 was made again, from the checkpoint after step 1.
    expect(model.calls).toHaveLength(3);
    expect(assistantSteps(events)).toEqual([1, 2]);
    expect(events.filter((e) => e.type === 'step/end').map((e) => e.step)).toEqual([1, 2]);
    expect(charged).toHaveLength(1);
  });

  it('a non-idempotent call whose result could not be written is not executed again by the retry (outcome_unknown)', async () => {
    const { done, events, charged } = await scenario((d) => d.some((e) => e.type === 'tool/result'));
    expect(done).toMatchObject({ status: 'completed', attempt: 2 });
    expect(charged).toHaveLength(1);
    const calls = events.filter((e) => e.type === 'tool/call');
    const results = events.filter((e) => e.type === 'tool/result');
    expect(calls).toHaveLength(1);
    expect(results.map((r) => (r.data as { output: unknown }).output)).toEqual([
      expect.objectContaining({ type: 'error', code: 'outcome_unknown' }),
    ]);
    expect(assistantSteps(events)).toEqual([1, 2]);
  });

  it('an idempotent call is not made durable before it runs: when its step end cannot be written, the step is redone and the call runs again with the same key', async () => {
    const { done, events, charged, model, commits } = await scenario((d) => d.some((e) => e.type === 'tool/result'), {
      idempotent: true,
    });
    // One commit per step: nothing was written before the tool ran.
    expect(commits.find((c) => c.includes('tool/call'))).toEqual([
      'turn/start',
      'step/start',
      'request/header',
      'assistant/message',
      'tool/call',
      'tool/result',
      'step/end',
    ]);
    expect(done.status).toBe('completed');
    expect(charged).toHaveLength(2);
    expect(new Set(charged).size).toBe(1);
    expect(model.calls).toHaveLength(3);
    // The log holds the step once: the failed commit left nothing behind.
    expect(events.filter((e) => e.type === 'tool/call')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'tool/result').map((r) => (r.data as { output: unknown }).output)).toEqual([
      { type: 'text', value: 'charged' },
    ]);
    expect(assistantSteps(events)).toEqual([1, 2]);
  });

  it('the key of an idempotent call is the same when the re-asked model makes the same call under a new call id (as real providers do)', async () => {
    const { done, events, charged } = await scenario((d) => d.some((e) => e.type === 'tool/result'), {
      idempotent: true,
      freshCallIds: true,
    });
    expect(done.status).toBe('completed');
    expect(charged).toHaveLength(2);
    // The tool can tell its second run is a repeat: the key does not depend on the provider's id.
    expect(new Set(charged).size).toBe(1);
    const call = events.find((e) => e.type === 'tool/call')!.data as { toolCallId: string; idempotencyKey: string };
    expect(call.toolCallId).toBe('c2');
    expect(call.idempotencyKey).toBe(charged[0]);
  });

  it('a step boundary is the step end in the log: a run that fails after two tool steps resumes at the third, without a checkpoint row written per step', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const executed: string[] = [];
    const agent = threeNotes('boundaries', (n) => {
      executed.push(`note ${n}`);
      return n;
    });
    const rt = createRuntime({ store, agents: [agent], leaseMs: 300, renewEveryMs: 50, maxAttempts: 5 });
    // The third step's end cannot be written, once; and every checkpoint row stored is counted.
    const injected = failOnce(store, (drafts) =>
      drafts.some((d) => d.type === 'tool/result' && (d.data as { toolCallId: string }).toolCallId === 'c3'),
    );
    const stored: number[] = [];
    const transaction = store.transaction.bind(store);
    store.transaction = <T>(fn: (tx: StoreOps) => Promise<T>) =>
      transaction((tx) =>
        fn({
          ...tx,
          runs: {
            ...tx.runs,
            putCheckpoint: async (c: Parameters<StoreOps['runs']['putCheckpoint']>[0]) => {
              stored.push(c.step);
              return tx.runs.putCheckpoint(c);
            },
          },
        }),
      );
    try {
      const session = await rt.sessions.create();
      const { run } = await rt.sessions.send(session.id, 'note three times');
      rt.startWorker({ id: 'W', pollMs: 20 });
      const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 });
      expect(injected.failed()).toBe(true);
      expect(done).toMatchObject({ status: 'completed', attempt: 2 });
      const events = await store.events.read(session.id);
      // The failed turn stored no checkpoint, nor did any step before it: the retry knew from the
      // log alone that two steps had ended. Only the completed turn's end stores one.
      const turnEnds = events
        .filter((e) => e.type === 'turn/end')
        .map((e) => (e.data as { reason: string; steps: number }).reason);
      expect(turnEnds).toEqual(['failed', 'completed']);
      expect(stored).toEqual([4]);
      // Steps 1 and 2 were not redone; step 3 was (its end was lost), then the answer.
      expect(executed).toEqual(['note 1', 'note 2', 'note 3', 'note 3']);
      expect(assistantSteps(events)).toEqual([1, 2, 3, 4]);
      expect(events.filter((e) => e.type === 'step/end').map((e) => e.step)).toEqual([1, 2, 3, 4]);
      expect(await rt.runs.resumeCursor(run.id)).toEqual({
        step: 4,
        seq: events.findLast((e) => e.type === 'turn/end')!.seq,
      });
    } finally {
      await rt.close({ graceMs: 0 });
      await store.close();
    }
  });

  it('resumeCursor of a running run names the last step that ended, from the log (no row is stored before the turn ends)', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const third = deferred();
    const atThird = deferred();
    const agent = threeNotes('cursor', async (n) => {
      if (n === 3) {
        atThird.resolve();
        await third.promise;
      }
      return n;
    });
    const rt = createRuntime({ store, agents: [agent] });
    try {
      const session = await rt.sessions.create();
      const { run } = await rt.sessions.send(session.id, 'note three times');
      rt.startWorker({ id: 'W', pollMs: 20 });
      await atThird.promise;
      const events = await store.events.read(session.id);
      const secondEnd = events.find((e) => e.type === 'step/end' && e.step === 2)!;
      expect(await store.runs.getCheckpoint(run.id)).toBeUndefined();
      expect(await rt.runs.resumeCursor(run.id)).toEqual({ step: 2, seq: secondEnd.seq });
      third.resolve();
      const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 });
      expect(done.status).toBe('completed');
      const turnEnd = (await store.events.read(session.id)).findLast((e) => e.type === 'turn/end')!;
      expect(await rt.runs.resumeCursor(run.id)).toEqual({ step: 4, seq: turnEnd.seq });
    } finally {
      third.resolve();
      await rt.close({ graceMs: 0 });
      await store.close();
    }
  });
});
