/**
 * What the chaos test checks once everything settled (every process stopped or drained), from the
 * database (through Keel's reads and, for what Keel's code could hide, raw SQL on the tables), the
 * tools' fsynced ledger, the webhook receiver's record, and what the driver was told (the book).
 * Each check names what failed; none depends on timing.
 */
import { isDeepStrictEqual } from 'node:util';
import {
  isTerminal,
  verifyReplay,
  webhookTypeOf,
  type JsonValue,
  type RunRecord,
  type RunStatus,
  type Sessions,
  type SessionEvent,
  type Store,
} from '../../src/index.ts';
import { CHAOS_CONCURRENCY, DEADLINE_ANSWER, DEADLINE_PAYLOAD, type ChaosLedgerLine } from './chaos-agent.ts';
import { count, type ChaosDb } from './chaos-db.ts';
import type { ReceivedDelivery } from './chaos-receiver.ts';

export type Via = 'api' | 'library' | 'callback';

/** A message the driver got accepted. */
export interface AcceptedMessage {
  sessionId: string;
  runId: string;
  kind: 'created' | 'enqueued' | 'steered';
  text: string;
}

/** A signal delivery the driver got accepted (200): at most one per run and name. */
export interface SignalDelivery {
  payload: { nonce: string };
  via: Via;
  consumed: boolean;
  /** The run's status after the delivery (not told to a callback). */
  statusAfter?: RunStatus;
}

/** What the state was right after a worker was killed. */
export interface KillSnapshot {
  statuses: Partial<Record<RunStatus, number>>;
  /** Live places in the provider limit's queue (runs waiting for a slot). */
  limitWaiters: number;
  /** The kill came right after the driver decided, answered or signalled something. */
  afterDecision: boolean;
}

/** What the driver did and was told. */
export interface ChaosBook {
  accepted: Map<string, AcceptedMessage>;
  cancelRequested: Set<string>;
  /** Accepted decisions, by `${runId}/${toolCallId}`. */
  decisions: Map<string, { approved: boolean }>;
  /** Accepted answers, by `${runId}/${toolCallId}`. */
  answers: Map<string, { answer: JsonValue }>;
  /** Accepted signal deliveries, by `${runId}/${name}`. */
  signals: Map<string, SignalDelivery>;
  /** Sessions the driver erased. */
  erased: Set<string>;
  /** The schedules, with their target session (null: a new session per fire). */
  schedules: Array<{ id: string; message: string; intervalMs: number; createdAt: number; target: string | null }>;
  webhookId: string;
  kills: KillSnapshot[];
  /** The most provider-limit slots the sampler saw held at once. */
  maxSlots: number;
  slotSamples: number;
  /** What the driver found wrong as it went (a refusal it should not get, a stranded wait…). */
  violations: string[];
}

export interface CheckInput {
  store: Store;
  sessions: Sessions;
  db: ChaosDb;
  ledger: ChaosLedgerLine[];
  received: readonly ReceivedDelivery[];
  book: ChaosBook;
}

export interface CheckResult {
  violations: string[];
  /** What the run exercised (the coverage checks are among the violations when one is 0). */
  seen: Record<string, number>;
  sessions: number;
  runs: RunRecord[];
  events: number;
}

type Data = Record<string, unknown>;
type Output = { type: string; code?: string; value?: unknown };

const WAIT_TOOLS: Record<string, 'approval' | 'input' | 'sleep' | 'signal'> = {
  danger: 'approval',
  risky: 'approval',
  ask_user: 'input',
  confirm: 'input',
  sleep: 'sleep',
  await_signal: 'signal',
  await_callback: 'signal',
};
const OTHER_WAITS: readonly RunStatus[] = ['waiting_approval', 'waiting_for_user', 'sleeping'];

const short = (v: unknown) => JSON.stringify(v)?.slice(0, 200);

export async function checkChaos(input: CheckInput): Promise<CheckResult> {
  const { store, sessions, db, book } = input;
  const violations = [...book.violations];
  const v = (s: string) => violations.push(s);
  const seen: Record<string, number> = {};
  const saw = (what: string, n = 1) => (seen[what] = (seen[what] ?? 0) + n);

  const executions = new Map<string, ChaosLedgerLine[]>();
  for (const l of input.ledger)
    executions.set(`${l.runId}/${l.toolCallId}`, [...(executions.get(`${l.runId}/${l.toolCallId}`) ?? []), l]);

  // ---- Every session and run (also those schedules made, and those erased).
  const all: Array<{ id: string; erasedAt: number | null }> = [];
  for (let after: string | undefined; ;) {
    const page = await store.sessions.list({ limit: 1000, includeArchived: true, ...(after ? { after } : {}) });
    all.push(...page);
    if (page.length < 1000) break;
    after = page.at(-1)!.id;
  }
  const erased = new Set(all.filter((s) => s.erasedAt !== null).map((s) => s.id));
  for (const id of book.erased)
    if (!erased.has(id)) v(`session ${id} was erased (the API said so) but is not marked erased`);
  for (const id of erased) if (!book.erased.has(id)) v(`session ${id} is erased, but nobody erased it`);
  const runs: RunRecord[] = await store.runs.list({ limit: 1_000_000 });
  const runById = new Map(runs.map((r) => [r.id, r]));
  const runsOf = new Map<string, RunRecord[]>();
  for (const r of runs) runsOf.set(r.sessionId, [...(runsOf.get(r.sessionId) ?? []), r]);
  const erasedRuns = new Set(runs.filter((r) => erased.has(r.sessionId)).map((r) => r.id));

  // ---- The logs of the sessions that stay.
  const known = new Set<string>();
  const inLog = new Map<string, number>();
  /** Events a webhook subscription hears of, by event id. */
  const heard = new Map<string, { type: string; sessionId: string }>();
  const fired: Array<{ sessionId: string; scheduleId: string; tick: number; runId: string }> = [];
  const logOfRun = new Map<string, SessionEvent[]>();
  const scheduleMessages = new Set(book.schedules.map((s) => s.message));
  const scheduledRuns: string[] = [];
  /** The first message of each run of the sessions that stay (what it was asked). */
  const asked = new Map<string, string>();
  let events = 0;
  for (const { id: sessionId } of all) {
    if (erased.has(sessionId)) continue;
    const raw = await store.events.read(sessionId);
    const session = (await store.sessions.get(sessionId))!;
    if (raw.some((e, i) => e.seq !== i + 1) || session.lastSeq !== raw.length)
      v(`session ${sessionId}: seqs are not 1..${session.lastSeq}`);
    if (new Set(raw.map((e) => e.id)).size !== raw.length) v(`session ${sessionId}: a duplicate event id`);
    const log = await readAll(sessions, sessionId);
    events += log.length;
    for (const e of log) {
      const type = webhookTypeOf(e);
      if (type) heard.set(e.id, { type, sessionId });
      if (e.type === 'schedule/fired') {
        const d = e.data as { scheduleId: string; tick: number; runId: string };
        fired.push({ sessionId, ...d });
      }
      if (e.runId) logOfRun.set(e.runId, [...(logOfRun.get(e.runId) ?? []), e]);
      if (e.type !== 'user/message') continue;
      const id = (e.data as { message: { id: string } }).message.id;
      inLog.set(id, (inLog.get(id) ?? 0) + 1);
    }
    if ((await store.inputs.count(sessionId, 'steer')) + (await store.inputs.count(sessionId, 'message')) > 0)
      v(`session ${sessionId}: inputs left in the inbox`);
    const replay = await verifyReplay(sessions.log, sessionId);
    if (!replay.ok) v(`session ${sessionId}: replay check: ${JSON.stringify(replay.mismatches.slice(0, 2))}`);

    for (const run of runsOf.get(sessionId) ?? []) {
      const mine = logOfRun.get(run.id) ?? [];
      checkRun(run, mine, book.cancelRequested.has(run.id), executions, known, v);
      checkWaits(run, mine, executions, book, v, saw);
      const first = mine.find((e) => e.type === 'user/message');
      const text = first ? textOfMessage(first) : undefined;
      if (text !== undefined) asked.set(run.id, text);
      if (text !== undefined && scheduleMessages.has(text)) scheduledRuns.push(run.id);
      if (run.status === 'completed') {
        // It answered its task and saw everything steered into it.
        const answer = mine.filter((e) => e.type === 'assistant/message').at(-1);
        const said = JSON.stringify(answer?.data ?? '');
        const trigger = [...book.accepted.values()].find((a) => a.runId === run.id && a.kind !== 'steered');
        if (trigger && !said.includes(trigger.text)) v(`run ${run.id} completed without answering ${trigger.text}`);
        if (text !== undefined && scheduleMessages.has(text) && !said.includes(text))
          v(`run ${run.id} (scheduled) completed without answering ${text}`);
        for (const s of [...book.accepted.values()].filter((a) => a.runId === run.id && a.kind === 'steered')) {
          if (!said.includes(s.text)) v(`run ${run.id} completed without seeing ${s.text}`);
        }
      }
    }
  }
  for (const [id, a] of book.accepted) {
    if (erased.has(a.sessionId)) continue;
    const n = inLog.get(id) ?? 0;
    const run = runById.get(a.runId);
    // An enqueued run cancelled before it came up never logs its message; anything else logs it once.
    const neverCameUp = a.kind === 'enqueued' && run?.status === 'cancelled' && run.queuedBehind;
    if (neverCameUp ? n !== 0 : n !== 1) v(`message ${id} (${a.kind} ${a.text}) is in the log ${n} times`);
  }
  for (const k of executions.keys()) {
    if (!known.has(k) && !erasedRuns.has(k.split('/')[0]!))
      v(`the ledger has an execution of ${k}, which the log does not know`);
  }

  await checkSignals(db, book, logOfRun, erasedRuns, v);
  await checkSchedules(db, book, fired, scheduledRuns, asked, runById, erased, v, saw);
  await checkWebhooks(db, book, input.received, heard, erased, v, saw);
  await checkErased(db, erased, runsOf, v);

  // ---- Provider limits: never more slots held than the limit, by what the sampler saw.
  if (book.maxSlots > CHAOS_CONCURRENCY)
    v(`flow control: ${book.maxSlots} slots of ${CHAOS_CONCURRENCY} were held at once`);
  saw('slot samples', book.slotSamples);
  saw('most slots held at once', book.maxSlots);

  // ---- Coverage: the kills landed where they matter, and every kind of wait was exercised.
  for (const status of ['waiting_approval', 'waiting_for_user', 'sleeping', 'waiting_for_signal'] as const) {
    saw(`kills while a run was ${status}`, book.kills.filter((k) => (k.statuses[status] ?? 0) > 0).length);
  }
  saw('kills while a run waited for a provider slot', book.kills.filter((k) => k.limitWaiters > 0).length);
  saw('kills right after a decision, answer or signal', book.kills.filter((k) => k.afterDecision).length);
  saw('sessions erased', erased.size);
  const required = [
    'kills while a run was waiting_approval',
    'kills while a run was waiting_for_user',
    'kills while a run was sleeping',
    'kills while a run was waiting_for_signal',
    'kills while a run waited for a provider slot',
    'kills right after a decision, answer or signal',
    'approvals approved by the driver',
    'approvals denied by the driver',
    'approvals denied at their deadline',
    'questions answered by the driver',
    'questions answered by default at their deadline',
    'questions timed out at their deadline',
    'sleeps woken by the clock',
    'sleeps woken by a message',
    'signals kept before their wait, then taken',
    'signals taken during their wait',
    'signals taken while the run waited for something else',
    'signals delivered by callback',
    'signal waits ended at their deadline',
    'schedule ticks fired',
    'schedules paused by the erasure of their session',
    'webhook deliveries delivered',
    'sessions erased',
  ];
  for (const r of required) if (!seen[r]) v(`coverage: no ${r}`);
  return { violations, seen, sessions: all.length, runs, events };
}

async function readAll(sessions: Sessions, sessionId: string): Promise<SessionEvent[]> {
  const out: SessionEvent[] = [];
  for (;;) {
    const page = await sessions.events(sessionId, { after: out.at(-1)?.seq ?? 0, limit: 1000 });
    if (page.length === 0) return out;
    out.push(...page);
  }
}

function textOfMessage(e: SessionEvent): string {
  const content = (e.data as { message: { content: unknown } }).message.content;
  if (typeof content === 'string') return content;
  return (content as Array<{ type: string; text?: string }>)
    .map((p) => (p.type === 'text' ? (p.text ?? '') : ''))
    .join('');
}

type Call = { toolCallId: string; toolName: string; input: Data };
const callsOf = (events: readonly SessionEvent[]): Call[] =>
  events
    .filter((e) => e.type === 'assistant/message')
    .flatMap(
      (e) =>
        ((e.data as Data).message as { content: Array<Data & { type: string }> }).content.filter(
          (p) => p.type === 'tool-call',
        ) as unknown as Call[],
    );

/** A run's own invariants: terminal as it should be, every call answered once, no effect twice. */
function checkRun(
  run: RunRecord,
  events: SessionEvent[],
  cancelAsked: boolean,
  executions: Map<string, ChaosLedgerLine[]>,
  known: Set<string>,
  v: (s: string) => void,
): void {
  const ok = run.status === 'completed' || (run.status === 'cancelled' && cancelAsked);
  if (!ok) v(`run ${run.id} ended ${run.status}${run.error ? `: ${JSON.stringify(run.error)}` : ''}`);
  const called = callsOf(events);
  const results = events.filter((e) => e.type === 'tool/result').map((e) => e.data as Data);
  for (const c of called) {
    const n = results.filter((r) => r.toolCallId === c.toolCallId).length;
    if (n !== 1) v(`run ${run.id}: call ${c.toolCallId} has ${n} results`);
    const key = `${run.id}/${c.toolCallId}`;
    known.add(key);
    const ran = executions.get(key) ?? [];
    // Not idempotent: never twice (await_callback hands out a token per execution, harmlessly).
    if (c.toolName !== 'record' && c.toolName !== 'await_callback' && ran.length > 1)
      v(`run ${run.id}: ${c.toolName} ${c.toolCallId} executed ${ran.length} times`);
  }
  for (const r of results)
    if (!called.some((c) => c.toolCallId === r.toolCallId))
      v(`run ${run.id}: a result for ${String(r.toolCallId)}, which no decision called`);
  const steps = events.filter((e) => e.type === 'assistant/message').map((e) => e.step ?? 0);
  if (steps.some((s, i) => i > 0 && s <= steps[i - 1]!))
    v(`run ${run.id}: steps decided twice or out of order: ${steps.join(',')}`);
}

/**
 * A run's waits: each ended exactly once (one decision, answer or `wait/resolved` per waiting call
 * that got a result other than `cancelled`), by what the driver did when it did something (the
 * decision it was told was taken, the answer it gave, the payload of the signal it delivered), or
 * else by the deadline's policy, which only calls with a deadline have; the call's result is what
 * ended its wait; and a denied or undecided call never ran (the ledger has no line of it).
 */
function checkWaits(
  run: RunRecord,
  events: SessionEvent[],
  executions: Map<string, ChaosLedgerLine[]>,
  book: ChaosBook,
  v: (s: string) => void,
  saw: (what: string) => void,
): void {
  const byCall = (type: string) => {
    const m = new Map<string, SessionEvent[]>();
    for (const e of events)
      if (e.type === type)
        m.set((e.data as Data).toolCallId as string, [...(m.get((e.data as Data).toolCallId as string) ?? []), e]);
    return m;
  };
  const decisions = byCall('tool/decision');
  const answers = byCall('user/answer');
  const resolved = byCall('wait/resolved');
  const results = byCall('tool/result');
  const calls = callsOf(events);
  const ids = new Set(calls.map((c) => c.toolCallId));
  for (const id of [...decisions.keys(), ...answers.keys(), ...resolved.keys()])
    if (!ids.has(id)) v(`run ${run.id}: a wait of ${id} ended, which no decision called`);
  const at = (c: Call) => `run ${run.id}: ${c.toolName} ${c.toolCallId}`;

  for (const c of calls) {
    const kind = WAIT_TOOLS[c.toolName];
    if (!kind) continue;
    const key = `${run.id}/${c.toolCallId}`;
    const result = (results.get(c.toolCallId)?.[0]?.data as { output?: Output } | undefined)?.output;
    const cancelled = result?.type === 'error' && result.code === 'cancelled';
    const mustHaveEnded = result !== undefined && !cancelled;
    const sameResult = (output: unknown) => {
      if (mustHaveEnded && !isDeepStrictEqual(result, output))
        v(`${at(c)}: its result ${short(result)} is not what ended its wait (${short(output)})`);
    };

    if (kind === 'approval') {
      const ds = decisions.get(c.toolCallId) ?? [];
      if (ds.length > 1) v(`${at(c)}: decided ${ds.length} times`);
      if (mustHaveEnded && ds.length === 0) v(`${at(c)}: has a result but no decision`);
      const d = ds[0]?.data as { approved: boolean; by?: string; reason?: string } | undefined;
      const ran = executions.get(key)?.length ?? 0;
      if ((!d || !d.approved) && ran > 0) v(`${at(c)}: ${d ? 'denied' : 'never decided'}, yet it ran ${ran} time(s)`);
      if (d && !d.approved && mustHaveEnded && !(result?.type === 'error' && result.code === 'denied'))
        v(`${at(c)}: denied, yet its result is ${short(result)}`);
      const mine = book.decisions.get(key);
      if (mine && (!d || d.by === 'deadline' || d.approved !== mine.approved))
        v(
          `${at(c)}: the driver was told its ${mine.approved ? 'approval' : 'denial'} was taken, the log says ${short(d ?? 'nothing')}`,
        );
      if (!mine && d && d.by !== 'deadline') v(`${at(c)}: decided (${short(d)}) by nobody the driver knows`);
      if (d?.by === 'deadline') {
        if (c.toolName !== 'risky') v(`${at(c)}: decided by a deadline it does not have`);
        else if (d.approved || d.reason !== 'nobody decided in time')
          v(`${at(c)}: its deadline's decision is not its policy's: ${short(d)}`);
        saw('approvals denied at their deadline');
      } else if (d) saw(d.approved ? 'approvals approved by the driver' : 'approvals denied by the driver');
      continue;
    }

    if (kind === 'input') {
      const rs = [...(answers.get(c.toolCallId) ?? []), ...(resolved.get(c.toolCallId) ?? [])];
      if (rs.length > 1) v(`${at(c)}: answered ${rs.length} times`);
      if (mustHaveEnded && rs.length === 0) v(`${at(c)}: has a result but no answer`);
      const r = rs[0];
      const by = (r?.data as { by?: string } | undefined)?.by;
      const mine = book.answers.get(key);
      if (
        mine &&
        (r?.type !== 'user/answer' || by !== undefined || !isDeepStrictEqual((r.data as Data).answer, mine.answer))
      ) {
        v(
          `${at(c)}: the driver was told its answer ${short(mine.answer)} was taken, the log says ${short(r?.data ?? 'nothing')}`,
        );
      }
      if (!mine && r && by !== 'deadline') v(`${at(c)}: answered (${short(r.data)}) by nobody the driver knows`);
      if (r && by === 'deadline') {
        if (c.toolName === 'ask_user') {
          if (r.type !== 'user/answer' || !isDeepStrictEqual((r.data as Data).answer, DEADLINE_ANSWER))
            v(`${at(c)}: its deadline did not give its default answer: ${short(r.data)}`);
          saw('questions answered by default at their deadline');
        } else {
          const out = (r.data as { output?: Output }).output;
          if (r.type !== 'wait/resolved' || out?.type !== 'error' || out.code !== 'timeout')
            v(`${at(c)}: its deadline did not time it out: ${short(r.data)}`);
          saw('questions timed out at their deadline');
        }
      } else if (r) saw('questions answered by the driver');
      if (r)
        sameResult(
          r.type === 'user/answer' ? { type: 'json', value: (r.data as Data).answer } : (r.data as Data).output,
        );
      continue;
    }

    const rs = (resolved.get(c.toolCallId) ?? []).filter((e) => (e.data as Data).kind === kind);
    if (rs.length !== (resolved.get(c.toolCallId) ?? []).length) v(`${at(c)}: its wait ended as another kind of wait`);
    if (rs.length > 1) v(`${at(c)}: its wait ended ${rs.length} times`);
    if (mustHaveEnded && rs.length === 0) v(`${at(c)}: has a result but its wait never ended`);
    const r = rs[0]?.data as { by: string; name?: string; output: Output } | undefined;
    if (r) sameResult(r.output);
    // The clock never ends a wait before its time: a sleep's wake-up, a signal's deadline, as the
    // turn that suspended on it recorded them (one clock: this machine's).
    if (r && (r.by === 'clock' || r.by === 'deadline')) {
      const spec = pendingWait(events, c.toolCallId, rs[0]!.seq);
      const due = spec?.kind === 'sleep' ? spec.until : spec?.deadline;
      if (due === undefined) v(`${at(c)}: its wait ended by ${r.by}, but no suspended turn recorded a time for it`);
      else if (rs[0]!.time < due) v(`${at(c)}: its wait ended by ${r.by} ${due - rs[0]!.time} ms before its time`);
    }

    if (kind === 'sleep') {
      if (r) saw(r.by === 'steer' ? 'sleeps woken by a message' : 'sleeps woken by the clock');
      continue;
    }

    const name = c.input.name as string;
    const hasDeadline = c.input.deadlineMs !== undefined;
    const mine = book.signals.get(`${run.id}/${name}`);
    if (r && r.name !== name) v(`${at(c)}: waited for ${name}, took ${String(r.name)}`);
    if (r && (r.by === 'signal' || r.by === 'callback')) {
      if (!mine) v(`${at(c)}: took a signal (${short(r.output)}) the driver never got delivered`);
      else {
        if (!isDeepStrictEqual(r.output, { type: 'json', value: mine.payload }))
          v(`${at(c)}: took ${short(r.output)}, the driver delivered ${short(mine.payload)}`);
        if ((r.by === 'callback') !== (mine.via === 'callback'))
          v(`${at(c)}: taken by ${r.by}, delivered by ${mine.via}`);
        if (!mine.consumed) saw('signals kept before their wait, then taken');
        else if (mine.statusAfter !== undefined && OTHER_WAITS.includes(mine.statusAfter))
          saw('signals taken while the run waited for something else');
        else saw('signals taken during their wait');
        if (r.by === 'callback') saw('signals delivered by callback');
      }
    } else if (r?.by === 'deadline') {
      if (!hasDeadline) v(`${at(c)}: ended by a deadline it does not have`);
      if (!isDeepStrictEqual(r.output, { type: 'json', value: DEADLINE_PAYLOAD }))
        v(`${at(c)}: its deadline gave ${short(r.output)}`);
      if (mine?.consumed) v(`${at(c)}: the driver's signal was taken (consumed), yet the wait ended at its deadline`);
      saw('signal waits ended at their deadline');
    } else if (r) v(`${at(c)}: its signal wait ended by ${r.by}`);
    if (mine?.consumed && !r) v(`${at(c)}: the driver's signal was taken (consumed), yet its wait never ended`);
    if (mine && !hasDeadline && run.status === 'completed' && r && r.by !== 'signal' && r.by !== 'callback')
      v(`${at(c)}: the driver delivered its signal, the run completed without it`);
  }
}

/** The wait a call asked for, as the last turn that suspended on it before `beforeSeq` recorded it. */
function pendingWait(
  events: readonly SessionEvent[],
  toolCallId: string,
  beforeSeq: number,
): { kind: string; until?: number; deadline?: number } | undefined {
  for (const e of [...events].reverse()) {
    if (e.seq >= beforeSeq || e.type !== 'turn/end') continue;
    const p = (
      (
        e.data as {
          pending?: Array<{ toolCallId: string; wait?: { kind: string; until?: number; deadline?: number } }>;
        }
      ).pending ?? []
    ).find((x) => x.toolCallId === toolCallId);
    if (p) return p.wait;
  }
  return undefined;
}

/** The signals as stored: one row per delivery the driver was told was taken, consumed exactly when a wait took it. */
async function checkSignals(
  db: ChaosDb,
  book: ChaosBook,
  logOfRun: Map<string, SessionEvent[]>,
  erasedRuns: Set<string>,
  v: (s: string) => void,
): Promise<void> {
  const rows = await db.all<{
    run_id: string;
    name: string;
    payload: string;
    source: string;
    consumed_at: number | string | null;
  }>('SELECT run_id, name, payload, source, consumed_at FROM run_signals');
  const stored = new Set<string>();
  for (const row of rows) {
    if (erasedRuns.has(row.run_id)) continue;
    const key = `${row.run_id}/${row.name}`;
    stored.add(key);
    const mine = book.signals.get(key);
    if (!mine) v(`signal ${key} is stored, but the driver was never told it was taken`);
    else {
      if (!isDeepStrictEqual(JSON.parse(row.payload), mine.payload))
        v(`signal ${key}: stored ${row.payload}, delivered ${JSON.stringify(mine.payload)}`);
      if ((row.source === 'callback') !== (mine.via === 'callback'))
        v(`signal ${key}: stored from ${row.source}, delivered by ${mine.via}`);
    }
    const taken = (logOfRun.get(row.run_id) ?? []).filter(
      (e) =>
        e.type === 'wait/resolved' &&
        (e.data as Data).name === row.name &&
        ['signal', 'callback'].includes((e.data as Data).by as string),
    );
    if (row.consumed_at !== null && taken.length !== 1)
      v(`signal ${key} is consumed, and ${taken.length} waits took it`);
    if (row.consumed_at === null && taken.length > 0) v(`signal ${key} is not consumed, yet a wait took it`);
  }
  for (const key of book.signals.keys())
    if (!erasedRuns.has(key.split('/')[0]!) && !stored.has(key))
      v(`signal ${key} was taken (the driver was told), but is not stored`);
}

/** Each tick of a schedule fired once: one fire row, one run, one `schedule/fired` in the run's session; a scheduled run has its fire. */
async function checkSchedules(
  db: ChaosDb,
  book: ChaosBook,
  fired: ReadonlyArray<{ sessionId: string; scheduleId: string; tick: number; runId: string }>,
  scheduledRuns: readonly string[],
  asked: Map<string, string>,
  runById: Map<string, RunRecord>,
  erased: Set<string>,
  v: (s: string) => void,
  saw: (what: string, n?: number) => void,
): Promise<void> {
  const rows = await db.all<{
    schedule_id: string;
    tick: number | string;
    outcome: string;
    reason: string | null;
    run_id: string | null;
    session_id: string | null;
  }>('SELECT schedule_id, tick, outcome, reason, run_id, session_id FROM schedule_fires');
  const fires = rows.map((r) => ({ ...r, tick: Number(r.tick) }));
  const byTick = new Map<string, number>();
  const byRun = new Map<string, number>();
  for (const f of fires) {
    const s = book.schedules.find((x) => x.id === f.schedule_id);
    if (!s) {
      v(`a fire of schedule ${f.schedule_id}, which nobody created`);
      continue;
    }
    byTick.set(`${f.schedule_id}/${f.tick}`, (byTick.get(`${f.schedule_id}/${f.tick}`) ?? 0) + 1);
    if ((f.tick - s.createdAt) % s.intervalMs !== 0)
      v(`schedule ${s.id}: tick ${f.tick} is not a tick of its interval`);
    // A tick fails only when its target session was erased (and then the erasure takes its fires with it).
    if (f.outcome === 'failed' && !(s.target && erased.has(s.target)))
      v(`schedule ${s.id}: tick ${f.tick} failed: ${f.reason}`);
    if (f.outcome === 'skipped') saw('schedule ticks skipped (a run was active)');
    if (f.outcome !== 'fired') continue;
    saw('schedule ticks fired');
    if (!f.run_id) {
      v(`schedule ${s.id}: tick ${f.tick} fired without a run`);
      continue;
    }
    byRun.set(f.run_id, (byRun.get(f.run_id) ?? 0) + 1);
    const run = runById.get(f.run_id);
    if (!run) v(`schedule ${s.id}: tick ${f.tick} fired run ${f.run_id}, which does not exist`);
    else if (run.sessionId !== f.session_id)
      v(`schedule ${s.id}: tick ${f.tick} names session ${f.session_id}, its run is in ${run.sessionId}`);
    if (f.session_id && erased.has(f.session_id))
      v(`schedule ${s.id}: tick ${f.tick}'s fire is left of erased session ${f.session_id}`);
    else if (asked.get(f.run_id) !== s.message)
      v(
        `schedule ${s.id}: tick ${f.tick} fired run ${f.run_id}, which was asked ${JSON.stringify(asked.get(f.run_id))}, not the schedule's message`,
      );
    const events = fired.filter((e) => e.scheduleId === s.id && e.tick === f.tick);
    if (
      f.session_id &&
      !erased.has(f.session_id) &&
      (events.length !== 1 || events[0]!.runId !== f.run_id || events[0]!.sessionId !== f.session_id)
    ) {
      v(
        `schedule ${s.id}: tick ${f.tick} (run ${f.run_id}) has ${events.length} schedule/fired events: ${short(events)}`,
      );
    }
  }
  for (const [k, n] of byTick) if (n > 1) v(`schedule tick ${k} has ${n} fires`);
  // A schedule whose target session was erased paused itself, saying why.
  for (const s of book.schedules) {
    if (!s.target || !erased.has(s.target)) continue;
    saw('schedules paused by the erasure of their session');
    const [row] = await db.all<{ paused_at: unknown; paused_reason: string | null }>(
      'SELECT paused_at, paused_reason FROM schedules WHERE id = ?',
      [s.id],
    );
    if (!row || row.paused_at === null || !row.paused_reason)
      v(
        `schedule ${s.id}: its target session ${s.target} was erased, yet it is ${row ? `not paused with a reason (${JSON.stringify(row)})` : 'gone'}`,
      );
  }
  for (const [k, n] of byRun) if (n > 1) v(`run ${k} was fired by ${n} ticks`);
  for (const e of fired) {
    if (
      !fires.some(
        (f) => f.schedule_id === e.scheduleId && f.tick === e.tick && f.outcome === 'fired' && f.run_id === e.runId,
      )
    )
      v(`schedule ${e.scheduleId}: a schedule/fired event of tick ${e.tick} (run ${e.runId}) has no fire`);
  }
  for (const id of scheduledRuns)
    if (byRun.get(id) !== 1) v(`run ${id} carries a schedule's message, and ${byRun.get(id) ?? 0} fires name it`);
  saw(
    'sessions made by a schedule',
    new Set(
      fires
        .filter(
          (f) => f.outcome === 'fired' && book.schedules.find((s) => s.id === f.schedule_id)?.message.includes('sA'),
        )
        .map((f) => f.session_id),
    ).size,
  );
}

/**
 * Webhooks: one delivery row per heard event and subscription, none for an event no log has
 * (but an erased session's); every delivery delivered in the end, each delivered one received
 * (a 2xx answered to its id, with its exact body, signed); nothing received that Keel did not write.
 */
async function checkWebhooks(
  db: ChaosDb,
  book: ChaosBook,
  received: readonly ReceivedDelivery[],
  heard: Map<string, { type: string; sessionId: string }>,
  erased: Set<string>,
  v: (s: string) => void,
  saw: (what: string, n?: number) => void,
): Promise<void> {
  const rows = await db.all<{ id: string; event_id: string; event_type: string; status: string; body: string }>(
    'SELECT id, event_id, event_type, status, body FROM webhook_deliveries WHERE webhook_id = ?',
    [book.webhookId],
  );
  const sessionOf = (body: string): string | undefined => {
    const d = (JSON.parse(body) as { data?: { run?: { session_id?: string }; session_id?: string } }).data;
    return d?.run?.session_id ?? d?.session_id;
  };
  const byEvent = new Map<string, typeof rows>();
  for (const r of rows) byEvent.set(r.event_id, [...(byEvent.get(r.event_id) ?? []), r]);
  for (const [eventId, { type, sessionId }] of heard) {
    const ds = byEvent.get(eventId) ?? [];
    if (ds.length !== 1) v(`webhooks: event ${eventId} (${type}, session ${sessionId}) has ${ds.length} deliveries`);
    else if (ds[0]!.event_type !== type)
      v(`webhooks: event ${eventId} is ${type}, its delivery says ${ds[0]!.event_type}`);
  }
  const got = new Map<string, ReceivedDelivery[]>();
  for (const r of received) got.set(r.deliveryId, [...(got.get(r.deliveryId) ?? []), r]);
  const ids = new Set(rows.map((r) => r.id));
  for (const r of rows) {
    const session = sessionOf(r.body);
    if (!heard.has(r.event_id) && !(session && erased.has(session)))
      v(`webhooks: delivery ${r.id} is of event ${r.event_id} (${r.event_type}), which no log has`);
    if (r.status !== 'delivered') v(`webhooks: delivery ${r.id} (${r.event_type}) is ${r.status} after the settle`);
    const answered = (got.get(r.id) ?? []).filter((g) => g.status >= 200 && g.status < 300);
    if (r.status === 'delivered' && answered.length === 0)
      v(`webhooks: delivery ${r.id} is delivered, the receiver never answered it 2xx`);
    if (r.status === 'delivered') saw('webhook deliveries delivered');
    if (answered.length > 1) saw('webhook deliveries received twice (at least once)');
  }
  for (const g of received) {
    if (!g.signed) v(`webhooks: a request for delivery ${g.deliveryId} is not signed with the subscription's secret`);
    const row = rows.find((r) => r.id === g.deliveryId);
    if (!row) {
      const session = sessionOf(g.body);
      if (!(session && erased.has(session)))
        v(`webhooks: the receiver got delivery ${g.deliveryId}, which is not in the outbox`);
    } else if (row.body !== g.body)
      v(`webhooks: delivery ${g.deliveryId} was received with another body than the one written`);
  }
  saw('webhook requests answered 500', received.filter((g) => g.status >= 500).length);
  // Deliveries of an erased session go with it once they carry their session (a `session_id`
  // column: the webhooks branch, merged into main after this test was written). Before that they
  // stayed, a known gap: then they are only counted.
  const leftOf = new Map<string, number>();
  for (const r of rows) {
    const session = sessionOf(r.body);
    if (session && erased.has(session)) leftOf.set(session, (leftOf.get(session) ?? 0) + 1);
  }
  const erasesDeliveries =
    (await count(
      db,
      db.kind === 'sqlite'
        ? "SELECT count(*) AS n FROM pragma_table_info('webhook_deliveries') WHERE name = 'session_id'"
        : "SELECT count(*) AS n FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'webhook_deliveries' AND column_name = 'session_id'",
    )) > 0;
  if (erasesDeliveries) for (const [session, n] of leftOf) v(`erased session ${session}: ${n} webhook deliveries left`);
  else
    saw(
      'webhook deliveries of erased sessions left (known gap: no session_id on deliveries yet)',
      [...leftOf.values()].reduce((a, b) => a + b, 0),
    );
  const orphans = await count(
    db,
    'SELECT count(*) AS n FROM webhook_attempts WHERE delivery_id NOT IN (SELECT id FROM webhook_deliveries)',
  );
  if (orphans > 0) v(`webhooks: ${orphans} attempts of deliveries that are gone`);
  void ids;
}

/** Nothing of an erased session is left: no events, entries, snapshots, checkpoints, inputs, signals, callbacks, fires, blob refs, idempotency records. */
async function checkErased(
  db: ChaosDb,
  erased: Set<string>,
  runsOf: Map<string, RunRecord[]>,
  v: (s: string) => void,
): Promise<void> {
  const sqlite = db.kind === 'sqlite';
  for (const sessionId of erased) {
    const runIds = (runsOf.get(sessionId) ?? []).map((r) => r.id);
    for (const r of runsOf.get(sessionId) ?? [])
      if (!isTerminal(r.status)) v(`erased session ${sessionId}: run ${r.id} is ${r.status}`);
    const inRuns = runIds.length ? `run_id IN (${runIds.map(() => '?').join(', ')})` : '1 = 0';
    const log: Array<[string, string, readonly unknown[]]> = sqlite
      ? [
          ['event rows', 'SELECT count(*) AS n FROM event_batches WHERE session_id = ?', [db.logKey(sessionId)]],
          ['entries', 'SELECT count(*) AS n FROM entries WHERE session_id = ?', [db.logKey(sessionId)]],
          ['blob references', 'SELECT count(*) AS n FROM blob_refs WHERE session_id = ?', [db.logKey(sessionId)]],
        ]
      : [
          ['events', 'SELECT count(*) AS n FROM events WHERE session_id = ?', [sessionId]],
          ['blob references', 'SELECT count(*) AS n FROM blob_refs WHERE session_id = ?', [sessionId]],
        ];
    const checks: Array<[string, string, readonly unknown[]]> = [
      ...log,
      ['snapshots', 'SELECT count(*) AS n FROM snapshots WHERE session_id = ?', [sessionId]],
      ['inputs', 'SELECT count(*) AS n FROM run_inputs WHERE session_id = ?', [sessionId]],
      ['checkpoints', `SELECT count(*) AS n FROM run_checkpoints WHERE ${inRuns}`, runIds],
      ['signals', `SELECT count(*) AS n FROM run_signals WHERE ${inRuns}`, runIds],
      ['callback tokens', `SELECT count(*) AS n FROM run_callbacks WHERE ${inRuns}`, runIds],
      [
        'schedule fires',
        `SELECT count(*) AS n FROM schedule_fires WHERE session_id = ? OR ${inRuns}`,
        [sessionId, ...runIds],
      ],
      ['idempotency records', 'SELECT count(*) AS n FROM idempotency_keys WHERE body LIKE ?', [`%${sessionId}%`]],
    ];
    for (const [what, sql, params] of checks) {
      const n = await count(db, sql, params);
      if (n > 0) v(`erased session ${sessionId}: ${n} ${what} left`);
    }
  }
}
