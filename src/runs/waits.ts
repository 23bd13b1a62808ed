import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { SIGNAL_NAME, type AgentDefinition, type OnDeadline, type PendingCall, type WaitSpec } from '../core/index.ts';
import type { JsonValue, ToolOutput } from '../model/index.ts';
import type { NewEvent, SessionEvent } from '../session/index.ts';
import {
  isTerminal,
  NotFoundError,
  StoreError,
  type JsonObject,
  type RunRecord,
  type RunStatus,
  type StoreOps,
} from '../store/index.ts';
import type { FinishOptions, RunBook, Waiting } from './book.ts';
import { runScope } from './execution.ts';
import { IllegalTransitionError } from './state.ts';

/**
 * The waiting model (ADR-0015): one shape for every wait of a run (an approval, a question, a
 * sleep, a signal), each pending call with its own deadline and what happens at it. A waiting
 * run holds no worker: what ends a wait (a decision, an answer, the clock, a signal, a deadline)
 * is one transaction that records it in the log and moves the run (a compare-and-set on its
 * status and fencing token), so it happens once, whoever tries.
 */

/** The statuses of a run that waits (no worker holds it). */
export const WAITING_STATUSES: readonly RunStatus[] = [
  'waiting_approval',
  'waiting_for_user',
  'sleeping',
  'waiting_for_signal',
];
export const isWaiting = (s: RunStatus): boolean => WAITING_STATUSES.includes(s);

/** What ends a call's wait when nothing else did before: a policy, or (a sleep) the wake-up. */
export type DeadlineAction = OnDeadline | 'wake';

/** A pending call as the run row stores it: with its deadline, if it has one. */
export type WaitingCall = PendingCall & { deadline?: { at: number; on: DeadlineAction } };

export type Decision = Waiting['decisions'][string];

/** The largest signal payload a run takes, as JSON (UTF-8 bytes): a signal is a message, not a file. */
export const MAX_SIGNAL_PAYLOAD_BYTES = 256 * 1024;
/** The most signals one run keeps (delivered and taken, or kept for a wait). */
export const MAX_SIGNALS_PER_RUN = 100;

const KIND_STATUS: Record<PendingCall['kind'], RunStatus> = {
  approval: 'waiting_approval',
  input: 'waiting_for_user',
  signal: 'waiting_for_signal',
  sleep: 'sleeping',
};
const PRIORITY: readonly PendingCall['kind'][] = ['approval', 'input', 'signal', 'sleep'];

/** What the run waits for first: approvals, then questions, then signals, then time. */
export function kindOf(calls: readonly PendingCall[]): PendingCall['kind'] {
  return PRIORITY.find((k) => calls.some((c) => c.kind === k)) ?? 'approval';
}

export const statusOf = (calls: readonly PendingCall[]): RunStatus => KIND_STATUS[kindOf(calls)];

const undecided = (w: Waiting): WaitingCall[] => (w.calls as WaitingCall[]).filter((c) => !w.decisions[c.toolCallId]);

/** The first deadline among the calls still waiting (what the API shows as `expires_at`). */
export function expiresAtOf(w: Waiting): number | null {
  const at = undecided(w).flatMap((c) => (c.deadline ? [c.deadline.at] : []));
  return at.length ? Math.min(...at) : null;
}

/**
 * The wait of a run whose turn just suspended on `pending`: an approval or a question waits as
 * long as its tool says, else its agent, else the run's `waitTimeoutMs`; a sleep until its time;
 * a signal until its deadline, if it has one.
 */
export function newWaiting(
  pending: readonly PendingCall[],
  agent: AgentDefinition | undefined,
  waitTimeoutMs: number | undefined,
  now: number,
): Waiting {
  const calls: WaitingCall[] = pending.map((p) => {
    if (p.wait?.kind === 'sleep') return { ...p, deadline: { at: p.wait.until, on: 'wake' } };
    if (p.wait?.kind === 'signal')
      return p.wait.deadline !== undefined
        ? { ...p, deadline: { at: p.wait.deadline, on: p.wait.onTimeout ?? 'timed_out' } }
        : p;
    const own = agent?.tools.find((t) => t.name === p.toolName)?.wait;
    const timeoutMs = own?.timeoutMs ?? agent?.waits?.timeoutMs ?? waitTimeoutMs;
    const on = own?.onTimeout ?? agent?.waits?.onTimeout ?? 'timed_out';
    return timeoutMs !== undefined ? { ...p, deadline: { at: now + timeoutMs, on } } : p;
  });
  const w: Waiting = { kind: kindOf(calls), calls, decisions: {}, expiresAt: null };
  w.expiresAt = expiresAtOf(w);
  return w;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** How a call's wait ended: by its deadline's policy, or with an output (the clock, a steer, a signal, a callback, a refusal). */
type Ending =
  | { by: 'deadline'; on: Exclude<DeadlineAction, 'timed_out'> }
  | { by: 'clock' | 'steer' | 'signal' | 'callback'; output: ToolOutput };

/** The event that records how a call's wait ended, and its decision in the row. */
function resolution(
  run: RunRecord,
  call: WaitingCall,
  how: Ending,
  now: number,
): { event: NewEvent; decision: Decision } {
  const at = run.turn !== null ? { turn: run.turn } : {};
  const base = { type: 'wait/resolved' as const, runId: run.id, ...at };
  if (how.by !== 'deadline') {
    const kind = call.kind === 'signal' ? 'signal' : 'sleep';
    const name = call.wait?.kind === 'signal' ? { name: call.wait.name } : {};
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind, by: how.by, ...name, output: how.output } },
      decision: { output: how.output, by: how.by, at: now },
    };
  }
  const on = how.on;
  if (call.kind === 'sleep' || on === 'wake') {
    const output: ToolOutput = {
      type: 'text',
      value: `slept until ${iso(call.wait?.kind === 'sleep' ? call.wait.until : now)}`,
    };
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind: 'sleep', by: 'clock', output } },
      decision: { output, by: 'clock', at: now },
    };
  }
  if (call.kind === 'signal') {
    const name = call.wait?.kind === 'signal' ? call.wait.name : '';
    const output: ToolOutput =
      'answer' in on ? { type: 'json', value: on.answer } : { type: 'error', code: 'timeout', message: on.deny };
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind: 'signal', by: 'deadline', name, output } },
      decision: { output, by: 'deadline', at: now },
    };
  }
  if (call.kind === 'input') {
    if ('answer' in on) {
      return {
        event: {
          type: 'user/answer',
          runId: run.id,
          ...at,
          data: { toolCallId: call.toolCallId, answer: on.answer, by: 'deadline' },
        },
        decision: { answer: on.answer, by: 'deadline', at: now },
      };
    }
    // A question nobody answered in time: its result is the `timeout` error, with the policy's reason.
    const output: ToolOutput = { type: 'error', code: 'timeout', message: on.deny };
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind: 'input', by: 'deadline', output } },
      decision: { output, by: 'deadline', at: now },
    };
  }
  const reason = 'deny' in on ? on.deny : `no decision before ${iso(call.deadline?.at ?? now)}`;
  return {
    event: {
      type: 'tool/decision',
      runId: run.id,
      ...at,
      data: {
        toolCallId: call.toolCallId,
        approved: false,
        reason,
        by: 'deadline',
        ...(call.unknownOutcome ? { unknownOutcome: true as const } : {}),
      },
    },
    decision: { approved: false, reason, by: 'deadline', at: now },
  };
}

/** The result of a sleep a message woke early. */
const wokenBySteer = (c: WaitingCall, now: number): ToolOutput => ({
  type: 'text',
  value: `woke at ${iso(now)}, before ${iso((c.wait as { until: number }).until)}: a message arrived`,
});

/** The output of a signal wait: the payload, or an error when it breaks the wait's schema. */
function signalOutput(call: WaitingCall, payload: unknown): ToolOutput {
  const issues = call.wait?.kind === 'signal' ? payloadIssues(call.wait.schema, payload) : undefined;
  return issues
    ? { type: 'error', code: 'invalid_input', message: `the signal's payload does not match its schema: ${issues}` }
    : { type: 'json', value: (payload ?? null) as JsonValue };
}

/**
 * What already came for the calls still waiting, ended in the caller's transaction: a signal kept
 * before its wait is taken (whatever the run waited for when it came), a sleep whose time passed
 * wakes, and a sleep that wakes on steering wakes when a message steered into the run waits for
 * it. A run takes each signal name once: a wait for a name an earlier wait of the run took, or
 * that another call of the same wait already waits for, is refused at once (an error result), so
 * that it never waits for a delivery that cannot come.
 */
async function takeWhatCame(
  tx: StoreOps,
  run: RunRecord,
  waiting: Waiting,
  now: number,
): Promise<{ added: Record<string, Decision>; events: NewEvent[] }> {
  const added: Record<string, Decision> = {};
  const events: NewEvent[] = [];
  const end = (call: WaitingCall, how: Ending) => {
    const r = resolution(run, call, how, now);
    added[call.toolCallId] = r.decision;
    events.push(r.event);
  };
  const awaited = new Set<string>();
  // A message steered into the run before its sleep started (while the step ran) wakes a sleep that wakes on steering.
  const wakers = undecided(waiting).filter(
    (c) => c.wait?.kind === 'sleep' && c.wait.wakeOnSteer === true && c.wait.until > now,
  );
  const steered = wakers.length > 0 && (await tx.inputs.list(run.sessionId, 'steer', run.id, 1)).length > 0;
  for (const call of undecided(waiting)) {
    if (call.wait?.kind === 'sleep' && call.wait.until <= now) end(call, { by: 'deadline', on: 'wake' });
    else if (steered && wakers.includes(call)) end(call, { by: 'steer', output: wokenBySteer(call, now) });
    if (call.wait?.kind !== 'signal') continue;
    const name = call.wait.name;
    const kept = await tx.waits.getSignal(run.id, name);
    if (awaited.has(name) || kept?.consumedAt != null) {
      const why = awaited.has(name)
        ? 'another call of this step waits for it already'
        : 'an earlier wait of this run took it';
      end(call, {
        by: 'signal',
        output: {
          type: 'error',
          code: 'execution_error',
          message: `signal ${name} is already taken: ${why}; a run waits for each signal name once (wait for a new name, such as ${name}-2)`,
        },
      });
      continue;
    }
    awaited.add(name);
    if (!kept) continue;
    await tx.waits.consumeSignal(run.id, name, now);
    end(call, { by: kept.source === 'callback' ? 'callback' : 'signal', output: signalOutput(call, kept.payload) });
  }
  return { added, events };
}

/**
 * Records decisions on a waiting run's calls (their events first), takes what already came for the
 * calls left (see takeWhatCame), and moves the run: queued when nothing is left to wait for, else
 * to the status of what is left. Every path that ends a wait comes here (a decision, an answer, a
 * deadline, a wake-up, a steer, a signal, a turn's end), so none can leave a run waiting for
 * something it already has. Guarded by the status and the fencing token the run was read with: of
 * two that try, one wins and the other's transaction rolls back.
 */
export async function applyDecisions(
  book: RunBook,
  tx: StoreOps,
  run: RunRecord,
  waiting: Waiting,
  decided: Record<string, Decision>,
  decidedEvents: readonly NewEvent[],
  reason: string,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const next: Waiting = { ...waiting, decisions: { ...waiting.decisions, ...decided } };
  const came = await takeWhatCame(tx, run, next, book.clock.now());
  const events = [...decidedEvents, ...came.events];
  if (events.length === 0) return { run, events: [] };
  next.decisions = { ...next.decisions, ...came.added };
  const appended = await book.sessions.log.append(run.sessionId, events, { tx });
  const left = undecided(next);
  const guard = { statuses: [run.status], fencingToken: run.fencingToken };
  if (left.length === 0) {
    // The decisions are in the log (the resumed turn reads them there): nothing of the wait stays.
    const t = await book.transition(tx, run, 'queued', { reason, patch: { waiting: null }, guard });
    return { run: t.run, events: [...appended, ...t.events] };
  }
  next.kind = kindOf(left);
  next.expiresAt = expiresAtOf(next);
  const status = statusOf(left);
  if (status !== run.status) {
    const t = await book.transition(tx, run, status, {
      reason,
      patch: { waiting: next as unknown as JsonObject },
      guard,
    });
    return { run: t.run, events: [...appended, ...t.events] };
  }
  const updated = await tx.runs.update(run.id, { waiting: next as unknown as JsonObject }, guard);
  return { run: updated, events: appended };
}

/** Refuses a signal the API, a callback or the library may not deliver, before anything is stored (see `Waits.deliver`). */
export function checkSignal(name: string, payload: unknown): void {
  if (typeof name !== 'string' || !SIGNAL_NAME.test(name))
    throw new StoreError('validation', `signal name ${JSON.stringify(name)} must match ${SIGNAL_NAME}`);
  const json = JSON.stringify(payload ?? null);
  const bytes = json === undefined ? 0 : Buffer.byteLength(json);
  if (bytes > MAX_SIGNAL_PAYLOAD_BYTES)
    throw new StoreError(
      'payload_too_large',
      `the payload of signal ${name} is ${bytes} bytes of JSON: at most ${MAX_SIGNAL_PAYLOAD_BYTES} are taken`,
    );
}

/** A payload checked against a signal's JSON Schema: the issues, or undefined when it conforms. */
export function payloadIssues(schema: JsonValue | undefined, payload: unknown): string | undefined {
  if (schema === undefined) return undefined;
  const parsed = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]).safeParse(payload);
  return parsed.success ? undefined : z.prettifyError(parsed.error);
}

export const tokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');

/** The waits of the runs of one runtime: deadlines, wake-ups, signals, callbacks. */
export class Waits {
  private readonly book: RunBook;
  private readonly resolveAgent: FinishOptions['resolveAgent'];

  constructor(book: RunBook, resolveAgent: FinishOptions['resolveAgent']) {
    this.book = book;
    this.resolveAgent = resolveAgent;
  }

  private get now(): number {
    return this.book.clock.now();
  }

  /**
   * Inside the transaction that put the run in a waiting status (its turn's end): a signal that
   * came before the wait started, or a time already past, ends the wait at once.
   */
  async settleIn(tx: StoreOps, run: RunRecord): Promise<{ run: RunRecord; events: SessionEvent[] }> {
    const waiting = run.waiting as unknown as Waiting | null;
    if (!waiting || !isWaiting(run.status)) return { run, events: [] };
    return applyDecisions(this.book, tx, run, waiting, {}, [], 'what it waited for had already come');
  }

  /**
   * Ends the waits whose deadline has passed (the worker's sweep): each by its policy; a policy of
   * `timed_out` ends the run. Returns the run as it is after, or undefined when nothing was due
   * (or another process got there first).
   */
  async expire(runId: string): Promise<RunRecord | undefined> {
    const now = this.now;
    try {
      return await this.book.sessions.log.transaction(async (tx) => {
        const run = await tx.runs.get(runId);
        const waiting = run?.waiting as unknown as Waiting | null;
        if (!run || !waiting || !isWaiting(run.status)) return undefined;
        const due = undecided(waiting).filter((c) => c.deadline && c.deadline.at <= now);
        if (due.length === 0) return undefined;
        if (due.some((c) => c.deadline!.on === 'timed_out')) {
          const what = due.find((c) => c.deadline!.on === 'timed_out')!;
          return (
            await this.book.finishIn(tx, run.id, 'timed_out', {
              reason: `the wait for ${what.kind === 'signal' ? 'a signal' : 'a decision'} expired`,
              closeOpenCalls: true,
              resolveAgent: this.resolveAgent,
            })
          ).run;
        }
        const added: Record<string, Decision> = {};
        const events: NewEvent[] = [];
        for (const c of due) {
          const r = resolution(
            run,
            c,
            { by: 'deadline', on: c.deadline!.on as Exclude<DeadlineAction, 'timed_out'> },
            now,
          );
          added[c.toolCallId] = r.decision;
          events.push(r.event);
        }
        const woke = due.every((c) => c.kind === 'sleep');
        return (
          await applyDecisions(
            this.book,
            tx,
            run,
            waiting,
            added,
            events,
            woke ? 'woke up' : 'the wait passed its deadline',
          )
        ).run;
      });
    } catch (e) {
      // It moved meanwhile (decided, cancelled, or woken by another worker): nothing to do here.
      if (e instanceof StoreError) return undefined;
      throw e;
    }
  }

  /** A steering message came for a waiting run: a sleep of it that wakes on steering wakes now. */
  async steered(runId: string): Promise<RunRecord | undefined> {
    const now = this.now;
    try {
      return await this.book.sessions.log.transaction(async (tx) => {
        const run = await tx.runs.get(runId);
        const waiting = run?.waiting as unknown as Waiting | null;
        if (!run || !waiting || !isWaiting(run.status)) return undefined;
        const woken = undecided(waiting).filter((c) => c.wait?.kind === 'sleep' && c.wait.wakeOnSteer === true);
        if (woken.length === 0) return undefined;
        const added: Record<string, Decision> = {};
        const events: NewEvent[] = [];
        for (const c of woken) {
          const r = resolution(run, c, { by: 'steer', output: wokenBySteer(c, now) }, now);
          added[c.toolCallId] = r.decision;
          events.push(r.event);
        }
        return (await applyDecisions(this.book, tx, run, waiting, added, events, 'woken by a message')).run;
      });
    } catch (e) {
      if (e instanceof StoreError) return undefined;
      throw e;
    }
  }

  /**
   * Delivers the signal `name` to a run, exactly once: stored (a second delivery is refused,
   * `already_delivered`); if the run waits for it (whatever else it waits for too), its wait ends
   * in the same transaction; if it has not started waiting for it yet, it is kept and taken when
   * the wait starts. Refused before anything is stored: a name that breaks SIGNAL_NAME
   * (`validation`), a payload over MAX_SIGNAL_PAYLOAD_BYTES as JSON (`payload_too_large`), a
   * payload that does not match the waiting call's schema (`validation`), a run that has
   * MAX_SIGNALS_PER_RUN signals already (`signal_limit`).
   */
  async deliver(
    runId: string,
    name: string,
    payload: unknown,
    source: 'api' | 'callback' | 'library',
  ): Promise<{ run: RunRecord; consumed: boolean }> {
    checkSignal(name, payload);
    const now = this.now;
    return this.book.sessions.log.transaction(async (tx) => {
      const run = await tx.runs.get(runId);
      if (!run) throw new NotFoundError('run', runId);
      // A repeat is told so, also after the run it resumed has ended.
      if (await tx.waits.getSignal(runId, name))
        throw new StoreError('already_delivered', `signal ${name} was already delivered to run ${runId}`);
      if (isTerminal(run.status))
        throw new IllegalTransitionError(runId, run.status, 'queued', 'a finished run waits for no signal');
      if ((await tx.waits.countSignals(runId)) >= MAX_SIGNALS_PER_RUN) {
        throw new StoreError(
          'signal_limit',
          `run ${runId} has ${MAX_SIGNALS_PER_RUN} signals already, the most a run keeps`,
        );
      }
      const waiting = isWaiting(run.status) ? (run.waiting as unknown as Waiting | null) : null;
      const call = waiting
        ? undecided(waiting).find((c) => c.wait?.kind === 'signal' && c.wait.name === name)
        : undefined;
      if (call && call.wait?.kind === 'signal') {
        const issues = payloadIssues(call.wait.schema, payload);
        if (issues)
          throw new StoreError('validation', `the payload of signal ${name} does not match its schema: ${issues}`);
      }
      const stored = await tx.waits.putSignal({
        runId,
        name,
        payload: payload ?? null,
        source,
        receivedAt: now,
        consumedAt: null,
      });
      if (!stored) throw new StoreError('already_delivered', `signal ${name} was already delivered to run ${runId}`);
      if (!call) return { run, consumed: false };
      // Its wait takes it (with whatever else already came), as every wait's end does.
      const after = await applyDecisions(this.book, tx, run, waiting!, {}, [], `signal ${name} arrived`);
      return { run: after.run, consumed: true };
    });
  }

  /**
   * A callback token for the signal `name` of a run: 32 random bytes (base64url), stored as its
   * sha256. Whoever holds it may deliver that signal, once, with `POST /v1/callbacks/{token}`.
   */
  async issueCallback(runId: string, name: string): Promise<{ token: string; path: string }> {
    checkSignal(name, null);
    const token = randomBytes(32).toString('base64url');
    await this.book.store.waits.putCallback({ tokenHash: tokenHash(token), runId, name, createdAt: this.now });
    return { token, path: `/v1/callbacks/${token}` };
  }

  /** Delivers the signal a callback token stands for (`not_found` for an unknown token). */
  async deliverByToken(token: string, payload: unknown): Promise<{ run: RunRecord; consumed: boolean; name: string }> {
    const cb = await this.book.store.waits.findCallback(tokenHash(token));
    if (!cb) throw new StoreError('not_found', 'no such callback');
    const r = await this.deliver(cb.runId, cb.name, payload, 'callback');
    return { ...r, name: cb.name };
  }
}

/**
 * For a tool: a callback URL path (`/v1/callbacks/{token}`) that delivers the signal `name` to the
 * run the tool belongs to, without an API key. Hand it to a third party, then return
 * `waitForSignal(name)`. The token (32 random bytes) is shown only here: the store keeps its hash.
 */
export function callbackFor(name: string): Promise<{ token: string; path: string }> {
  const scope = runScope.getStore();
  if (!scope) throw new Error('callbackFor works only inside a tool of a run');
  return scope.callback(name);
}

/** Wait details for the API: what a sleeping or signal-waiting call waits for. */
export function waitDetails(c: WaitingCall): Record<string, unknown> {
  const w: WaitSpec | undefined = c.wait;
  return {
    ...(w?.kind === 'sleep'
      ? { until: iso(w.until), wake_on_steer: w.wakeOnSteer === true, ...(w.reason ? { reason: w.reason } : {}) }
      : {}),
    ...(w?.kind === 'signal' ? { signal: w.name, ...(w.schema !== undefined ? { schema: w.schema } : {}) } : {}),
    ...(c.deadline ? { deadline: iso(c.deadline.at), on_deadline: c.deadline.on } : {}),
  };
}
