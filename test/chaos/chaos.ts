/**
 * The chaos test. Worker processes execute runs, sweep waits, fire schedules and deliver webhooks,
 * on SQLite or PostgreSQL, while this process (the driver: an API server with no worker, a webhook
 * receiver, and the client of both) sends tasks, enqueues more behind busy sessions, steers runs
 * (waking sleeping ones), cancels runs, approves and denies calls, answers questions, delivers
 * signals (before their wait, during it, while the run waits for an approval too) by name and by
 * callback URL, and erases finished sessions, through the HTTP API or the library at random; two
 * schedules fire every second (one into new sessions, one into a session), a webhook subscription
 * hears every event, and the scripted model is limited to a few calls at once across processes.
 * Meanwhile the workers are killed with SIGKILL at random moments (some right after a decision),
 * many times, and started again. At the end the driver decides what has no deadline and leaves the
 * rest to the deadlines, last workers finish everything (no run may stay waiting past its
 * deadline), the outbox drains, and test/chaos/chaos-check.ts checks the database, the tools'
 * ledger and the receiver's record.
 *
 * `npm run chaos` runs the full version on both backends; `test/chaos/chaos.test.ts` a short one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  isTerminal,
  WEBHOOK_EVENT_TYPES,
  type JsonValue,
  type RunRecord,
  type RunStatus,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import { PROBLEMS, toProblem } from '../../src/server/problems.ts';
import { startServer, type RunningServer } from '../../src/server/serve.ts';
import {
  CHAOS_LIMIT_KEY,
  CHAOS_PROCESS,
  CHAOS_RUNTIME,
  CHAOS_SWEEP_MS,
  chaosAgent,
  signalName,
  WAIT_FLAGS,
  type ChaosLedgerLine,
  type WaitFlag,
} from './chaos-agent.ts';
import { checkChaos, type ChaosBook, type SignalDelivery, type Via } from './chaos-check.ts';
import { count, openChaosDb, openChaosStore, type ChaosBackend, type ChaosDb } from './chaos-db.ts';
import { ChaosReceiver } from './chaos-receiver.ts';

const WORKER = fileURLToPath(new URL('./chaos-worker.ts', import.meta.url));
const WAITING: readonly RunStatus[] = ['waiting_approval', 'waiting_for_user', 'sleeping', 'waiting_for_signal'];
/** A wait whose deadline passed this long ago, with a worker sweeping, is suspect; unchanged for as long again, stranded. */
const STRANDED_AFTER_MS = Math.max(5000, 20 * CHAOS_SWEEP_MS);

export interface ChaosOptions {
  backend: 'sqlite' | 'postgres';
  /** The PostgreSQL server (a fresh schema is made in it, and dropped). */
  postgresUrl?: string;
  sessions: number;
  /** Tasks, steers, cancels and erasures per session (besides its first task). */
  actionsPerSession: number;
  kills: number;
  /** Worker processes alive at once (each killed at its own random moments). Default 2. */
  workers?: number;
  /** Keep the database and ledger (their directory is printed). */
  keep?: boolean;
  log?: (line: string) => void;
}

export interface ChaosReport {
  backend: 'sqlite' | 'postgres';
  kills: number;
  sessions: number;
  runs: number;
  events: number;
  accepted: number;
  steered: number;
  cancelled: number;
  decisions: number;
  signals: number;
  /** What the run exercised: kills in each kind of wait, how waits ended, fires, deliveries… */
  seen: Record<string, number>;
  violations: string[];
  seconds: number;
}

interface Child {
  process: ChildProcess;
  exited: Promise<void>;
  busy: Promise<boolean>;
}

function startWorker(backend: ChaosBackend, ledger: string, gen: number): Child {
  const child = spawn(process.execPath, [WORKER, JSON.stringify(backend), ledger, String(gen)], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      if (code !== 0 && signal !== 'SIGKILL' && stderr)
        process.stderr.write(`chaos worker ${gen} exited ${code ?? signal}: ${stderr}\n`);
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
const chance = (p: number) => Math.random() < p;

/**
 * A refusal the API may rightly give (the run or session moved on meanwhile: 404, 409, 410), as
 * opposed to a failure. The library's errors are judged as the HTTP API answers them.
 */
const refusedStatus = (status: number) => status === 404 || status === 409 || status === 410;
const isRefusal = (e: unknown): boolean => refusedStatus(PROBLEMS[toProblem(e).type].status);

type Waiting = {
  calls: Array<{
    toolCallId: string;
    toolName: string;
    kind: string;
    input: Record<string, unknown>;
    wait?: { kind: string; name?: string };
  }>;
  decisions: Record<string, unknown>;
  expiresAt: number | null;
};

async function openBackend(o: ChaosOptions, dir: string): Promise<{ backend: ChaosBackend; drop(): Promise<void> }> {
  if (o.backend === 'sqlite') return { backend: { kind: 'sqlite', path: join(dir, 'keel.db') }, drop: async () => {} };
  if (!o.postgresUrl) throw new Error('the postgres chaos needs postgresUrl');
  const url = o.postgresUrl;
  const schema = `keel_chaos_${randomBytes(5).toString('hex')}`;
  return {
    backend: { kind: 'postgres', url, schema },
    drop: async () => {
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => {});
      await client.connect();
      try {
        await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const t0 = Date.now();
  const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(0)} s`;
  const log = o.log ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), 'keel-chaos-'));
  const ledgerPath = join(dir, 'ledger.jsonl');
  closeSync(openSync(ledgerPath, 'a'));
  const { backend, drop } = await openBackend(o, dir);
  let store: Store | undefined;
  let db: ChaosDb | undefined;
  let server: RunningServer | undefined;
  const receiver = await new ChaosReceiver().start();
  const children: Child[] = [];
  const book: ChaosBook = {
    accepted: new Map(),
    cancelRequested: new Set(),
    decisions: new Map(),
    answers: new Map(),
    signals: new Map(),
    erased: new Set(),
    schedules: [],
    webhookId: '',
    kills: [],
    maxSlots: 0,
    slotSamples: 0,
    violations: [],
  };
  const v = (s: string) => book.violations.push(s);
  const unexpected = (what: string, e: unknown) => {
    if (!isRefusal(e)) v(`${what}: ${(e as Error).stack ?? String(e)}`);
  };
  /** Told each time the driver decided, answered or delivered something (a kill may follow at once). */
  const acted = new EventEmitter();
  let decisions = 0;
  let signalsSent = 0;

  try {
    store = await openChaosStore(backend);
    const rt: Runtime = (server = await startServer({
      store,
      config: {
        source: null,
        agents: [chaosAgent(ledgerPath, -1)],
        compaction: {},
        demo: false,
        providerLimits: CHAOS_PROCESS.limits,
      },
      port: 0,
      workers: 0,
      version: 'chaos',
      leaseMs: CHAOS_RUNTIME.leaseMs,
      webhooks: CHAOS_PROCESS.webhooks,
    })).runtime;
    db = openChaosDb(backend);
    const st = store;
    const sql = db;
    const base = server.url;

    /** One HTTP request to the API: its status and JSON body. */
    const api = async (
      method: string,
      path: string,
      body?: unknown,
    ): Promise<{ status: number; json: Record<string, unknown> }> => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: body !== undefined ? { 'content-type': 'application/json' } : {},
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const text = await res.text();
      return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    };
    /** The body of a 2xx answer, undefined for a refusal; anything else is a violation. */
    const ok = async (
      what: string,
      p: Promise<{ status: number; json: Record<string, unknown> }>,
    ): Promise<Record<string, unknown> | undefined> => {
      try {
        const r = await p;
        if (r.status >= 200 && r.status < 300) return r.json;
        if (!refusedStatus(r.status)) v(`${what}: HTTP ${r.status} ${JSON.stringify(r.json).slice(0, 300)}`);
      } catch (e) {
        v(`${what}: ${(e as Error).message}`);
      }
      return undefined;
    };
    const viaOf = (): 'api' | 'library' => (chance(0.5) ? 'api' : 'library');
    /** Some choices come in turns rather than by a coin, so that even a short run makes each of them: the n-th time `kind` is asked, n mod `of`. */
    const turns = new Map<string, number>();
    const inTurn = (kind: string, of: number) => {
      const i = turns.get(kind) ?? 0;
      turns.set(kind, i + 1);
      return i % of;
    };

    // ---- The outside world: a webhook subscription for every event, two schedules.
    const hook = await ok(
      'create the webhook',
      api('POST', '/v1/webhooks', { url: receiver.url, events: [...WEBHOOK_EVENT_TYPES] }),
    );
    if (!hook) throw new Error('could not subscribe the webhook');
    book.webhookId = hook.id as string;
    receiver.secret = hook.secret as string;

    // ---- The sessions and their first tasks.
    const pool: string[] = [];
    let n = 0;
    const flagsOf = (must: readonly WaitFlag[] = []): WaitFlag[] =>
      WAIT_FLAGS.filter((f) => must.includes(f) || chance(0.25));
    const send = async (sessionId: string, text: string, ifBusy: 'reject' | 'enqueue' | 'steer') => {
      let r: { outcome: string; messageId: string; runId: string } | undefined;
      if (chance(0.5)) {
        const body = await ok(
          `send ${text}`,
          api('POST', `/v1/sessions/${sessionId}/messages`, { content: text, if_busy: ifBusy, agent: 'chaos' }),
        );
        if (body)
          r = {
            outcome: body.outcome as string,
            messageId: (body.message as { id: string }).id,
            runId: (body.run as { id: string }).id,
          };
      } else {
        try {
          const s = await rt.sessions.send(sessionId, text, { agent: 'chaos', ifBusy });
          r = { outcome: s.outcome, messageId: s.message.id, runId: s.run.id };
        } catch (e) {
          unexpected(`send ${text}`, e);
        }
      }
      if (!r) return undefined;
      book.accepted.set(r.messageId, {
        sessionId,
        runId: r.runId,
        kind: r.outcome as 'created' | 'enqueued' | 'steered',
        text,
      });
      return r;
    };
    /** Steers a message into one run (POST /v1/runs/{id}/steer or runs.steer). */
    const steerRun = async (run: RunRecord, text: string): Promise<string | undefined> => {
      let messageId: string | undefined;
      if (chance(0.5))
        messageId = (
          (await ok(`steer ${run.id}`, api('POST', `/v1/runs/${run.id}/steer`, { content: text })))?.message as
            { id: string } | undefined
        )?.id;
      else {
        try {
          messageId = (await rt.runs.steer(run.id, text)).message.id;
        } catch (e) {
          unexpected(`steer ${run.id}`, e);
        }
      }
      if (messageId) book.accepted.set(messageId, { sessionId: run.sessionId, runId: run.id, kind: 'steered', text });
      return messageId;
    };
    /**
     * Steers a message into a sleeping run, through its session or to the run, and checks that once
     * that is accepted, the sleep (which wakes on steering) no longer waits: the call it slept in
     * was decided (by the message, or by the clock just before it).
     */
    const wakeUp = async (run: RunRecord, toolCallId: string) => {
      const text = `wake w${++n}`;
      const how = chance(0.5) ? 'runs.steer' : 'a message to its session';
      const accepted = how === 'runs.steer' ? await steerRun(run, text) : await send(run.sessionId, text, 'steer');
      if (!accepted) return;
      const after = await st.runs.get(run.id);
      const w = after?.waiting as unknown as Waiting | null | undefined;
      if (w?.calls.some((x) => x.toolCallId === toolCallId) && !w.decisions[toolCallId])
        v(`run ${run.id}: steered by ${how} while it slept in ${toolCallId}, it sleeps on`);
    };
    /** A task with random waits; some of its signals are delivered at once, before its wait can start. */
    const sendTask = async (
      sessionId: string,
      name: string,
      steps: number,
      ifBusy: 'reject' | 'enqueue',
      must: readonly WaitFlag[] = [],
    ) => {
      const flags = flagsOf(must);
      const r = await send(sessionId, `task ${name} steps=${steps}${flags.map((f) => ` ${f}`).join('')}`, ifBusy);
      if (!r || r.outcome === 'steered') return;
      // Every other one of its signals is delivered at once (the others when the run waits for them).
      for (const f of ['signal', 'mix'] as const)
        if (flags.includes(f) && inTurn('early', 2) === 0) void track(deliver(r.runId, signalName(f, name)));
    };
    for (let i = 0; i < o.sessions; i++) {
      const s = await ok('create a session', api('POST', '/v1/sessions', { title: `chaos ${i}`, agent: 'chaos' }));
      if (!s) throw new Error('could not create a session');
      pool.push(s.id as string);
    }
    const target = await ok('create a session', api('POST', '/v1/sessions', { title: 'scheduled', agent: 'chaos' }));
    if (!target) throw new Error('could not create a session');
    /** The session a schedule fires into, until it is erased. */
    let scheduled: string | undefined = target.id as string;
    for (const [message, target, overlap] of [
      ['task sA steps=1', { new_session: { title: 'fired' } }, 'skip'],
      ['task sB steps=2 sleep', { session_id: scheduled }, 'skip'],
    ] as const) {
      const s = await ok(
        'create a schedule',
        api('POST', '/v1/schedules', { interval: { seconds: 1 }, message, target, overlap, agent: 'chaos' }),
      );
      if (!s) throw new Error('could not create a schedule');
      book.schedules.push({
        id: s.id as string,
        message,
        intervalMs: 1000,
        createdAt: Date.parse(s.created_at as string),
        target: 'session_id' in target ? target.session_id : null,
      });
    }

    // ---- What the driver does to waiting runs, each at its own random moment.
    const inflight = new Set<Promise<unknown>>();
    const track = <T>(p: Promise<T>): Promise<T> => {
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
      return p;
    };
    let finishing = false;
    /** Runs whose sleeps nothing steers, cancels or erases: the clock wakes them. */
    const clockOnly = new Set<string>();
    /**
     * Decides an approval (now and then two opposite decisions at once, one by HTTP and one by the
     * library: exactly one may be accepted).
     */
    const decide = async (runId: string, callId: string, approved: boolean) => {
      const key = `${runId}/${callId}`;
      const once = async (yes: boolean, via: 'api' | 'library') => {
        let accepted = false;
        if (via === 'api') {
          accepted =
            (await ok(
              `decide ${key}`,
              api(
                'POST',
                `/v1/runs/${runId}/approvals/${callId}`,
                yes ? { decision: 'approve' } : { decision: 'deny', reason: 'chaos says no' },
              ),
            )) !== undefined;
        } else {
          try {
            await (yes ? rt.runs.approve(runId, callId) : rt.runs.deny(runId, callId, { reason: 'chaos says no' }));
            accepted = true;
          } catch (e) {
            unexpected(`decide ${key}`, e);
          }
        }
        if (!accepted) return;
        const before = book.decisions.get(key);
        if (before && before.approved !== yes)
          v(`${key}: a ${yes ? 'approval' : 'denial'} was accepted after a ${before.approved ? 'approval' : 'denial'}`);
        book.decisions.set(key, { approved: yes });
        decisions++;
        acted.emit('acted');
      };
      await (inTurn('two decisions', 8) === 0
        ? Promise.all([once(approved, 'api'), once(!approved, 'library')])
        : once(approved, viaOf()));
    };
    /** Answers a question (now and then two different answers at once: exactly one may be accepted). */
    const answer = async (runId: string, callId: string, toolName: string) => {
      const key = `${runId}/${callId}`;
      const once = async (via: 'api' | 'library') => {
        const nonce = randomUUID();
        const a: JsonValue = toolName === 'confirm' ? { ok: 'yes', nonce } : { pick: pick(['a', 'b', 'c']), nonce };
        let accepted = false;
        if (via === 'api')
          accepted =
            (await ok(
              `answer ${key}`,
              api('POST', `/v1/runs/${runId}/input`, { answers: a, tool_call_id: callId }),
            )) !== undefined;
        else {
          try {
            await rt.runs.input(runId, a, { toolCallId: callId });
            accepted = true;
          } catch (e) {
            unexpected(`answer ${key}`, e);
          }
        }
        if (!accepted) return;
        if (book.answers.has(key)) v(`${key}: a second answer was accepted`);
        book.answers.set(key, { answer: a });
        acted.emit('acted');
      };
      await (inTurn('two answers', 6) === 0 ? Promise.all([once('api'), once('library')]) : once(viaOf()));
    };
    /** Callback tokens the tools handed out (read from the ledger), by `${runId}/${signal}`. */
    const tokens = new Map<string, string[]>();
    /**
     * Delivers a signal once (and now and then twice at once, by another way too: exactly one
     * may be taken). By callback when a token is known and a coin says so.
     */
    const deliver = async (runId: string, name: string): Promise<void> => {
      const key = `${runId}/${name}`;
      const once = async (via: Via): Promise<void> => {
        const payload = { nonce: randomUUID() };
        let r: { consumed: boolean; statusAfter?: RunStatus } | undefined;
        if (via === 'callback') {
          const token = pick(tokens.get(key)!);
          const body = await ok(`callback ${key}`, api('POST', `/v1/callbacks/${token}`, payload));
          if (body) r = { consumed: body.consumed as boolean };
        } else if (via === 'api') {
          const body = await ok(`signal ${key}`, api('POST', `/v1/runs/${runId}/signals/${name}`, payload));
          if (body) r = { consumed: body.consumed as boolean, statusAfter: (body.run as { status: RunStatus }).status };
        } else {
          try {
            const s = await rt.runs.signal(runId, name, payload);
            r = { consumed: s.consumed, statusAfter: s.run.status };
          } catch (e) {
            unexpected(`signal ${key}`, e);
          }
        }
        signalsSent++;
        if (!r) return;
        if (book.signals.has(key))
          v(`signal ${key}: a second delivery was accepted (${via}, after ${book.signals.get(key)!.via})`);
        const d: SignalDelivery = {
          payload,
          via,
          consumed: r.consumed,
          ...(r.statusAfter ? { statusAfter: r.statusAfter } : {}),
        };
        book.signals.set(key, d);
        acted.emit('acted');
      };
      // By callback when the tool handed a token out (mostly), else by name over HTTP or the library.
      const way = (): Via => (tokens.has(key) && inTurn('callback', 4) !== 3 ? 'callback' : viaOf());
      await (chance(0.15) ? Promise.all([once(way()), once(way())]) : once(way()));
    };

    /**
     * When and how the driver acts on each pending call: decided at first sight, at a random
     * moment. What it does is chosen so that even a short run makes every outcome: the first
     * outcome of `outcomes` that no call of the kind has in a run not cancelled since, else the
     * next of `rotation` (`danger` approved twice for each denial; `risky` left to its deadline
     * every other time; questions and `sigdl` signals left or answered (delivered) in turn; every
     * third sleep steered).
     */
    type Act = 'approve' | 'deny' | 'answer' | 'signal' | 'steer' | 'leave';
    const chosen = new Map<string, Array<{ act: Act; runId: string }>>();
    const choose = (kind: string, runId: string, outcomes: readonly Act[], rotation: readonly Act[]): Act => {
      const mine = chosen.get(kind) ?? [];
      const live = (a: Act) => mine.some((x) => x.act === a && !book.cancelRequested.has(x.runId));
      const act = outcomes.find((a) => !live(a)) ?? rotation[inTurn(kind, rotation.length)]!;
      chosen.set(kind, [...mine, { act, runId }]);
      return act;
    };
    const plans = new Map<string, { at: number; act: Act; done?: boolean }>();
    const planFor = (run: RunRecord, c: Waiting['calls'][number]): { at: number; act: Act } => {
      const soon = (ms: number) => Date.now() + Math.random() * ms;
      const plan = (act: Act, ms: number) => ({ act, at: act === 'leave' ? Infinity : soon(ms) });
      if (c.kind === 'approval' && c.toolName === 'danger') {
        // A mixed step's approval comes later: its signal mostly comes while it waits.
        const act = choose('danger', run.id, ['deny', 'approve'], ['approve', 'approve', 'deny']);
        return { act, at: soon(2000) + (c.toolCallId.endsWith('-mixdanger') ? 800 : 0) };
      }
      if (c.kind === 'approval')
        return plan(choose('risky', run.id, ['leave', 'approve', 'deny'], ['leave', 'approve', 'leave', 'deny']), 2000);
      if (c.kind === 'input') return plan(choose(c.toolName, run.id, ['leave', 'answer'], ['answer', 'leave']), 2000);
      if (c.kind === 'signal' && c.wait?.name?.startsWith('sigdl-'))
        return plan(choose('sigdl', run.id, ['leave', 'signal'], ['signal', 'leave']), 1500);
      if (c.kind === 'signal') return plan('signal', 1500);
      // A sleep steered soon wakes (unless its time comes first); the clock's own task's is left to it.
      if (c.kind === 'sleep' && clockOnly.has(run.id)) return plan('leave', 0);
      if (c.kind === 'sleep') return plan(choose('sleep', run.id, ['steer'], ['steer', 'leave', 'leave']), 500);
      return plan('leave', 0);
    };
    const waitsPass = async () => {
      const waiting = await st.runs.list({ statuses: WAITING, limit: 1000 });
      const now = Date.now();
      for (const run of waiting) {
        const w = run.waiting as unknown as Waiting | null;
        for (const c of w?.calls ?? []) {
          if (w!.decisions[c.toolCallId]) continue;
          const key = `${run.id}/${c.toolCallId}`;
          let plan = plans.get(key);
          if (!plan) plans.set(key, (plan = planFor(run, c)));
          // At the end, what has no deadline is done at once; the rest keeps its plan, or its deadline decides.
          const noDeadline = c.toolName === 'danger' || (c.kind === 'signal' && !c.wait?.name?.startsWith('sigdl-'));
          if (plan.done || plan.act === 'leave' || !(plan.at <= now || (finishing && noDeadline))) continue;
          plan.done = true;
          if (c.kind === 'approval') void track(decide(run.id, c.toolCallId, plan.act !== 'deny'));
          else if (c.kind === 'input') void track(answer(run.id, c.toolCallId, c.toolName));
          else if (plan.act === 'steer') void track(wakeUp(run, c.toolCallId));
          else if (c.kind === 'signal' && c.wait?.name) {
            const name = c.wait.name;
            // A callback's token is in the ledger once its tool ran (it did: the run waits).
            if (!book.signals.has(`${run.id}/${name}`)) void track(deliver(run.id, name));
          }
        }
      }
    };
    /** New lines of the ledger: the callback tokens the tools handed out (some used at once, before the wait starts). */
    let ledgerAt = 0;
    const tailLedger = () => {
      const fd = openSync(ledgerPath, 'r');
      try {
        const chunks: Buffer[] = [];
        for (;;) {
          const buf = Buffer.alloc(1 << 16);
          const got = readSync(fd, buf, 0, buf.length, ledgerAt);
          if (got === 0) break;
          chunks.push(buf.subarray(0, got));
          ledgerAt += got;
        }
        const text = Buffer.concat(chunks).toString('utf8');
        const cut = text.lastIndexOf('\n') + 1;
        ledgerAt -= Buffer.byteLength(text.slice(cut));
        for (const line of text.slice(0, cut).split('\n').filter(Boolean)) {
          const l = JSON.parse(line) as ChaosLedgerLine;
          if (l.tool !== 'await_callback') continue;
          const key = `${l.runId}/${l.signal}`;
          const first = !tokens.has(key);
          tokens.set(key, [...(tokens.get(key) ?? []), l.token!]);
          if (first && inTurn('early callback', 2) === 0 && !book.signals.has(key))
            void track(deliver(l.runId, l.signal!));
        }
      } finally {
        closeSync(fd);
      }
    };
    let stopLoops = false;
    const waitsLoop = (async () => {
      while (!stopLoops) {
        try {
          tailLedger();
          await waitsPass();
        } catch (e) {
          v(`waits pass: ${(e as Error).stack ?? String(e)}`);
        }
        await sleep(100 + Math.random() * 250);
      }
    })();
    // Provider limits: how many slots are held, as the table says, again and again.
    const sampler = (async () => {
      while (!stopLoops) {
        try {
          const held = await count(sql, 'SELECT count(*) AS n FROM model_limit_slots WHERE key = ?', [CHAOS_LIMIT_KEY]);
          book.maxSlots = Math.max(book.maxSlots, held);
          book.slotSamples++;
        } catch {
          // The database is busy: the next sample.
        }
        await sleep(100);
      }
    })();

    // The first tasks have every kind of wait between them, each kind two or three times, whatever the coins say later.
    const flagAt = (k: number) => WAIT_FLAGS[k % WAIT_FLAGS.length]!;
    for (const [i, sessionId] of pool.entries())
      await sendTask(sessionId, `t${i}a`, 2 + (i % 4), 'reject', [flagAt(i), flagAt(i + 3), flagAt(i + 6)]);

    /** Erases a session, by HTTP or the library at random: its runs (these) may be cancelled by it. */
    const erase = async (victim: string, runs: readonly RunRecord[]) => {
      for (const r of runs) book.cancelRequested.add(r.id);
      let erased = false;
      if (chance(0.5))
        erased = (await ok(`erase ${victim}`, api('POST', `/v1/sessions/${victim}/erase`))) !== undefined;
      else {
        try {
          await rt.sessions.erase(victim);
          erased = true;
        } catch (e) {
          unexpected(`erase ${victim}`, e);
        }
      }
      if (erased) book.erased.add(victim);
    };

    /** The session a schedule fires into is erased too, once most kills are done: its run is cancelled, the schedule pauses itself. */
    const eraseScheduled = async () => {
      const victim = scheduled;
      if (!victim) return;
      scheduled = undefined;
      await erase(victim, await st.runs.list({ sessionId: victim, limit: 10_000 }));
    };

    // ---- The driver: actions on random sessions, while workers are killed.
    let kills = 0;
    let actionsLeft = o.sessions * o.actionsPerSession;
    let actions = 0;
    let eraseDue = 0;
    let killsDone = false;
    const driver = (async () => {
      while (actionsLeft-- > 0 && !killsDone) {
        await sleep(100 + Math.random() * 300);
        if (killsDone || pool.length === 0) break;
        const sessionId = pick(pool);
        // Every eighth action erases a session (or one of the next three, if none was over); the others are drawn.
        n++;
        if (++actions % 8 === 0) eraseDue = 4;
        const roll = eraseDue > 0 ? 0.68 : Math.random() * 0.58;
        try {
          if (roll < 0.3) await sendTask(sessionId, `t${n}`, 2 + (n % 4), 'enqueue');
          else if (roll < 0.5) {
            // Steering goes to an active run, waiting ones too (every other time a sleeping one, which
            // wakes), through its session (if_busy: steer) or to the run itself (runs.steer).
            // A sleep the driver left to its time is never steered: the clock must wake some sleeps.
            const leftToTheClock = (r: RunRecord) =>
              r.status === 'sleeping' &&
              [...plans.entries()].some(([key, p]) => key.startsWith(`${r.id}/`) && p.act === 'leave');
            const all = await st.runs.list({ statuses: ['running', 'queued', ...WAITING], limit: 1000 });
            const active = all.filter((r) => !r.queuedBehind && pool.includes(r.sessionId) && !leftToTheClock(r));
            const sleeping = active.filter((r) => r.status === 'sleeping');
            const target =
              sleeping.length > 0 && inTurn('steer a sleep', 2) === 0
                ? pick(sleeping)
                : active.length > 0
                  ? pick(active)
                  : undefined;
            if (target && chance(0.5)) await steerRun(target, `steer s${n}`);
            else if (target || !all.some((r) => r.sessionId === sessionId && leftToTheClock(r)))
              await send(target?.sessionId ?? sessionId, `steer s${n}`, 'steer');
          } else if (roll < 0.58) {
            const live = (await st.runs.list({ sessionId, limit: 100 })).filter((r) => !isTerminal(r.status));
            if (live.length > 0) {
              const victim = pick(live);
              book.cancelRequested.add(victim.id);
              if (chance(0.5)) await rt.runs.cancel(victim.id, { graceMs: 300 });
              else await ok(`cancel ${victim.id}`, api('POST', `/v1/runs/${victim.id}/cancel`));
            }
          } else if (roll < 0.7) {
            // Erase a session whose runs are all over: one a schedule made (their one-step runs end soon), or one of the pool.
            const fired = (await st.sessions.list({ limit: 1000 }))
              .filter((s) => s.title === 'fired' && !book.erased.has(s.id))
              .map((s) => s.id);
            // The oldest sessions a schedule made (most likely over), and a few of the pool.
            const candidates = [...fired.slice(0, 6), ...pool.toSorted(() => Math.random() - 0.5).slice(0, 3)];
            let victim: string | undefined;
            let runs: RunRecord[] = [];
            for (const c of candidates) {
              runs = await st.runs.list({ sessionId: c, limit: 1000 });
              if (runs.every((r) => isTerminal(r.status))) {
                victim = c;
                break;
              }
            }
            if (victim) {
              if (pool.includes(victim)) pool.splice(pool.indexOf(victim), 1);
              await erase(victim, runs);
            }
            // Up to four tries (the next actions) until one session was over.
            eraseDue = victim ? 0 : eraseDue - 1;
          }
        } catch (e) {
          unexpected(`action ${n}`, e);
        }
      }
    })();

    // ---- The chaos: workers run until each is killed at a random moment; then another.
    let gen = 0;
    let killing = 0;
    let started = 0;
    const waitersNow = () =>
      count(sql, 'SELECT count(*) AS n FROM model_limit_waiters WHERE expires_at > ?', [Date.now()]);
    /** Polls (for 3 s at most) until `ready` says the moment came. */
    const until = async (ready: () => Promise<boolean>) => {
      for (const end = Date.now() + 3000; Date.now() < end; await sleep(30))
        if (await ready().catch(() => false)) return;
    };
    const slot = async () => {
      while (kills + killing < o.kills) {
        killing++;
        const c = startWorker(backend, ledgerPath, gen++);
        children.push(c);
        const busy = await Promise.race([c.busy, sleep(10_000).then(() => false)]);
        let afterDecision = false;
        let before: Partial<Record<RunStatus, number>> = {};
        let limitWaiters = 0;
        // Kills come in turns: right after the driver acted, while a run waits for a provider
        // slot, twice while a run is in the kind of wait the fewest kills saw so far, at random.
        const trigger = started++ % 5;
        if (busy && trigger === 0) {
          // The run the driver moved is claimed, resumed, or swept now.
          afterDecision = await new Promise<boolean>((resolve) => {
            const on = () => {
              clearTimeout(timer);
              resolve(true);
            };
            const timer = setTimeout(() => {
              acted.off('acted', on);
              resolve(false);
            }, 3000);
            acted.once('acted', on);
          });
          await sleep(Math.random() * 40);
        } else if (busy && trigger === 1) {
          await until(async () => (limitWaiters = await waitersNow()) > 0);
        } else if (busy && (trigger === 2 || trigger === 3)) {
          const rarest = [...WAITING].sort(
            (a, b) =>
              book.kills.filter((k) => (k.statuses[a] ?? 0) > 0).length -
              book.kills.filter((k) => (k.statuses[b] ?? 0) > 0).length,
          )[0]!;
          await until(async () => ((before = await st.runs.countByStatus())[rarest] ?? 0) > 0);
        } else if (busy) await sleep(200 + Math.random() * 2300);
        c.process.kill('SIGKILL');
        await c.exited;
        killing--;
        kills++;
        if (kills >= o.kills * 0.7 && scheduled) void track(eraseScheduled());
        try {
          const after = await st.runs.countByStatus();
          const statuses = Object.fromEntries(WAITING.map((k) => [k, Math.max(before[k] ?? 0, after[k] ?? 0)]));
          limitWaiters = Math.max(limitWaiters, await waitersNow());
          book.kills.push({ statuses, limitWaiters, afterDecision });
        } catch (e) {
          v(`after kill ${kills}: ${(e as Error).message}`);
        }
        if (kills % 10 === 0) log(`chaos ${o.backend}: ${kills} kills (${elapsed()})`);
      }
    };
    await Promise.all(Array.from({ length: o.workers ?? 2 }, () => slot()));
    // However the draws fell, each kind of wait saw a kill: for a kind none saw, a task of its own
    // (in a session of its own) waits that way, and its worker is killed while it does. These kills
    // come on top of the random ones; the end decides their waits like every other.
    const COVER_FLAG: Partial<Record<RunStatus, string>> = {
      waiting_approval: 'danger',
      waiting_for_user: 'ask',
      sleeping: 'sleep',
      waiting_for_signal: 'signal',
    };
    for (const kind of WAITING) {
      if (book.kills.some((k) => (k.statuses[kind] ?? 0) > 0)) continue;
      const own = await ok('create a session', api('POST', '/v1/sessions', { title: `cover ${kind}`, agent: 'chaos' }));
      if (!own) continue;
      const c = startWorker(backend, ledgerPath, gen++);
      children.push(c);
      await send(own.id as string, `task cover-${kind.replaceAll('_', '-')} steps=1 ${COVER_FLAG[kind]!}`, 'reject');
      let before: Partial<Record<RunStatus, number>> = {};
      for (const end = Date.now() + 20_000; Date.now() < end; await sleep(30))
        if (((before = await st.runs.countByStatus().catch(() => before))[kind] ?? 0) > 0) break;
      c.process.kill('SIGKILL');
      await c.exited;
      const statuses = Object.fromEntries(WAITING.map((k) => [k, before[k] ?? 0]));
      book.kills.push({ statuses, limitWaiters: 0, afterDecision: false });
    }
    killsDone = true;
    await driver;
    log(`chaos ${o.backend}: kills done (${elapsed()}); finishing`);

    // ---- The end: no more ticks, what has no deadline is decided, the rest waits for its deadline.
    finishing = true;
    for (const s of book.schedules) await ok(`pause ${s.id}`, api('POST', `/v1/schedules/${s.id}/pause`));
    const last = Array.from({ length: o.workers ?? 2 }, () => startWorker(backend, ledgerPath, gen++));
    children.push(...last);
    // However the draws fell, one sleep is woken by the clock: a task in a session of its own, which
    // no steering, cancel or erasure touches (the driver's actions ended with the kills).
    const quiet = await ok('create a session', api('POST', '/v1/sessions', { title: 'clock', agent: 'chaos' }));
    const clockTask = quiet ? await send(quiet.id as string, 'task clock steps=1 sleep', 'reject') : undefined;
    if (clockTask) clockOnly.add(clockTask.runId);
    const deadline = Date.now() + 120_000;
    // A wait past its deadline while workers sweep is suspect; unchanged for STRANDED_AFTER_MS more, stranded.
    const suspects = new Map<string, { key: string; since: number; reported?: boolean }>();
    for (;;) {
      const now = Date.now();
      for (const r of await st.runs.list({ statuses: WAITING, limit: 10_000 })) {
        const expiresAt = (r.waiting as unknown as Waiting | null)?.expiresAt ?? null;
        if (expiresAt === null || expiresAt > now - STRANDED_AFTER_MS) continue;
        const key = `${r.status}/${expiresAt}/${r.fencingToken}`;
        const s = suspects.get(r.id);
        if (!s || s.key !== key) suspects.set(r.id, { key, since: now });
        else if (!s.reported && now - s.since > STRANDED_AFTER_MS) {
          s.reported = true;
          v(
            `run ${r.id} is stranded: ${r.status} with expires_at ${new Date(expiresAt).toISOString()}, ${((now - expiresAt) / 1000).toFixed(1)} s past, while workers sweep every ${CHAOS_SWEEP_MS} ms`,
          );
        }
      }
      const left = (await st.runs.list({ limit: 100_000 })).filter((r) => !isTerminal(r.status));
      if (left.length === 0) break;
      if (Date.now() > deadline) {
        v(`${left.length} runs not terminal at the end: ${left.map((r) => `${r.id} ${r.status}`).join(', ')}`);
        break;
      }
      await sleep(250);
    }
    log(`chaos ${o.backend}: every run terminal (${elapsed()}); draining the webhooks`);
    // Deliveries leased by a killed worker come due again when their lease ends (30 s and the attempt's timeout).
    receiver.flaky = false;
    const drained = Date.now() + 90_000;
    while (
      (await count(sql, "SELECT count(*) AS n FROM webhook_deliveries WHERE status <> 'delivered'")) > 0 &&
      Date.now() < drained
    )
      await sleep(500);
    for (const c of last) c.process.send('stop');
    await Promise.race([Promise.all(last.map((c) => c.exited)), sleep(15_000)]);
    stopLoops = true;
    await Promise.all([waitsLoop, sampler]);
    await Promise.all([...inflight]);
    await server.close({ graceMs: 0 });
    server = undefined;
    log(`chaos ${o.backend}: checking (${elapsed()})`);

    // ---- What the database, the ledger and the receiver show.
    const ledger = readFileSync(ledgerPath, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ChaosLedgerLine);
    const checked = await checkChaos({
      store: st,
      sessions: rt.sessions,
      db: sql,
      ledger,
      received: receiver.received,
      book,
    });
    const report: ChaosReport = {
      backend: o.backend,
      kills,
      sessions: checked.sessions,
      runs: checked.runs.length,
      events: checked.events,
      accepted: book.accepted.size,
      steered: [...book.accepted.values()].filter((a) => a.kind === 'steered').length,
      cancelled: checked.runs.filter((r) => r.status === 'cancelled').length,
      decisions,
      signals: signalsSent,
      seen: checked.seen,
      violations: checked.violations,
      seconds: (Date.now() - t0) / 1000,
    };
    log(
      `chaos ${o.backend}: ${report.kills} kills, ${report.sessions} sessions, ${report.runs} runs (${report.cancelled} cancelled), ${report.events} events, ${report.accepted} messages accepted (${report.steered} steered), ${report.decisions} decisions, ${report.signals} signals sent, ${ledger.length} tool executions, ${receiver.received.length} webhook requests: ${report.violations.length} violations (${report.seconds.toFixed(0)} s)`,
    );
    log(
      `chaos ${o.backend}: seen: ${Object.entries(report.seen)
        .map(([k, n]) => `${k} ${n}`)
        .join('; ')}`,
    );
    for (const x of report.violations.slice(0, 50)) log(`  violation (${o.backend}): ${x}`);
    if (report.violations.length > 50) log(`  … and ${report.violations.length - 50} more`);
    return report;
  } finally {
    for (const c of children)
      if (c.process.exitCode === null && c.process.signalCode === null) c.process.kill('SIGKILL');
    await server?.close({ graceMs: 0 }).catch(() => {});
    await receiver.stop();
    await db?.close().catch(() => {});
    await store?.close().catch(() => {});
    if (o.keep) log(`chaos: kept ${dir}${backend.kind === 'postgres' ? ` and schema ${backend.schema}` : ''}`);
    else {
      rmSync(dir, { recursive: true, force: true });
      await drop().catch(() => {});
    }
  }
}

// `node test/chaos/chaos.ts [--backend sqlite|postgres|both] [--sessions N] [--kills N] [--actions N] [--workers N] [--keep]`: the full version.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const arg = (name: string, fallback: number) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? Number(process.argv[i + 1]) : fallback;
  };
  const which = process.argv.includes('--backend') ? process.argv[process.argv.indexOf('--backend') + 1] : 'both';
  const backends = (which === 'both' ? ['sqlite', 'postgres'] : [which]) as Array<'sqlite' | 'postgres'>;
  let failed = false;
  let stopPostgres = async () => {};
  for (const backend of backends) {
    let postgresUrl: string | undefined;
    if (backend === 'postgres') {
      const { findPostgres } = await import('../support/postgres-server.ts');
      const server = await findPostgres();
      postgresUrl = server.url;
      stopPostgres = () => server.stop();
    }
    const report = await runChaos({
      backend,
      ...(postgresUrl ? { postgresUrl } : {}),
      sessions: arg('sessions', 30),
      actionsPerSession: arg('actions', 6),
      kills: arg('kills', 60),
      workers: arg('workers', 2),
      keep: process.argv.includes('--keep'),
      log: (l) => console.log(l),
    });
    failed ||= report.violations.length > 0;
  }
  await stopPostgres();
  process.exit(failed ? 1 : 0);
}
