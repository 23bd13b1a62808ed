/**
 * RunLifecycle: the only writer of runs. Every change to a run is one transaction that updates its
 * row and appends the matching session events, so the two never disagree; this is the one place
 * that opens those transactions. Each transaction's body is a file of its own in this folder
 * (accept.ts, claim.ts, append-durable-point.ts, end-turn.ts, finish.ts, decide.ts, ...), which a
 * caller that already holds a transaction (a message that claims its run) may call directly.
 */
import { userMessage, type AgentDefinition, type UserInput } from '../../core/index.ts';
import type { JsonValue, UserMessage } from '../../model/index.ts';
import type { SessionEvent, SessionLog, Sessions } from '../../session/index.ts';
import {
  NotFoundError,
  type RunGuard,
  type RunPatch,
  type RunRecord,
  type RunStatus,
  type ScheduleFireRecord,
  type StoreOps,
} from '../../store/index.ts';
import { systemClock, type Clock } from '../../core/clock.ts';
import { lastBoundary } from '../resume.ts';
import { checkedMessage, send, type SendInTx } from './accept.ts';
import { appendDurablePoint, type DurablePoint, type DurablePointCommitted } from './append-durable-point.ts';
import { claim, readBoundary, type ClaimOptions } from './claim.ts';
import type { LifecycleContext } from './context.ts';
import { decide, type DecisionInput } from './decide.ts';
import { deliverSignal } from './deliver-signal.ts';
import { expireWait } from './expire-wait.ts';
import { finish } from './finish.ts';
import { fireDueSchedule, recordFailedFire, type Attempt, type ScheduleFiring } from './fire-schedule.ts';
import type { IdempotencyClaim } from './idempotency.ts';
import { isTerminal, statusesLeadingTo, type FinalStatus } from './run-status.ts';
import { createRerun, type NewRerun } from './rerun.ts';
import { steer } from './steer.ts';
import { move, transition, type TransitionOptions } from './transition.ts';
import type { Accepted, Claimed, FinishOptions, IfBusy, RunBoundary } from './types.ts';
import { wakeOnSteer } from './wake-on-steer.ts';

export class RunLifecycle implements LifecycleContext {
  readonly sessions: Sessions;
  /** The time of waits and their deadlines (the runtime's clock). */
  clock: Clock = systemClock;

  constructor(sessions: Sessions) {
    this.sessions = sessions;
  }

  get store() {
    return this.sessions.store;
  }

  get log(): SessionLog {
    return this.sessions.log;
  }

  /** The run `id`, or NotFoundError. */
  async get(id: string): Promise<RunRecord> {
    const r = await this.store.runs.get(id);
    if (!r) throw new NotFoundError('run', id);
    return r;
  }

  /**
   * Where a run stands at its last step boundary: its stored checkpoint and the events logged for
   * it after that (see `lastBoundary`). Reads the run's events after the checkpoint: for a
   * recovery or a run's record, never on the hot path.
   */
  async boundary(
    run: Pick<RunRecord, 'id' | 'sessionId'>,
    ops: StoreOps = this.store,
  ): Promise<RunBoundary & { at: { step: number; seq: number } | undefined }> {
    const { checkpoint, tail } = await readBoundary(ops, this, run);
    return { checkpoint, tail, at: lastBoundary(checkpoint, tail) };
  }

  /** The message as its event's schema parses it; InvalidEventError when it is not a user message, or says nothing. */
  checkedMessage(message: UserMessage): UserMessage {
    return checkedMessage(this, message);
  }

  /** A status change inside the caller's transaction `tx` (see transition.ts). */
  transition(
    tx: StoreOps,
    run: RunRecord,
    to: RunStatus,
    o: TransitionOptions = {},
  ): Promise<{ run: RunRecord; events: SessionEvent[] }> {
    return transition(tx, this, run, to, o);
  }

  /**
   * A user message for a session: a new run, or (when a run is active) what `ifBusy` says.
   * `enqueue` stores the message; it becomes the next run in the same transaction as the active
   * run's end. A waiting run never takes a message as its answer: answers go through `input`.
   */
  send(
    sessionId: string,
    input: UserInput | UserMessage,
    agent: AgentDefinition,
    o: { ifBusy?: IfBusy } & SendInTx = {},
  ): Promise<Accepted> {
    const message = userMessage(input);
    const { ifBusy, ...rest } = o;
    return this.log.transaction((tx) => send(tx, this, sessionId, message, agent, ifBusy ?? 'reject', rest));
  }

  /**
   * A rerun (see rerun.ts): a new session forked from `sourceSessionId` at `entryId` (null: empty)
   * and the rerun's queued run in it, in one transaction.
   */
  async rerun(
    sourceSessionId: string,
    entryId: string | null,
    r: NewRerun,
    title?: string,
  ): Promise<{ run: RunRecord; events: SessionEvent[] }> {
    let created: { run: RunRecord; events: SessionEvent[] } | undefined;
    await this.sessions.forkIntoSession(sourceSessionId, entryId, {
      ...(title !== undefined ? { title } : {}),
      within: async (tx, sessionId) => {
        created = await createRerun(tx, this, sessionId, r);
      },
    });
    return created!;
  }

  /** Claims the oldest claimable run for a worker, in a transaction of its own (see claim.ts). */
  claim(owner: string, leaseMs: number, options?: ClaimOptions): Promise<Claimed | undefined> {
    return this.log.transaction((tx) => claim(tx, this, owner, leaseMs, options));
  }

  /**
   * `claim` inside another transaction (a message's, see `send`'s `claim`; a turn end's, see
   * `DurablePoint.claimNext`), which holds rows of its own: it takes only a run it can lock
   * without waiting.
   */
  claimIn(tx: StoreOps, owner: string, leaseMs: number, options: ClaimOptions = {}): Promise<Claimed | undefined> {
    return claim(tx, this, owner, leaseMs, { ...options, neverWait: true });
  }

  /**
   * A durable point of a run's turn (see append-durable-point.ts). A point that neither ends the
   * turn, nor takes steering, nor settles a model call's quota reservation is one fenced append,
   * with no transaction of its own (a step's `step/end` is its checkpoint, ADR-0021).
   */
  async appendDurablePoint(p: DurablePoint): Promise<DurablePointCommitted> {
    if (!p.end && p.steered.length === 0 && !(p.settleQuotas && p.events.some((e) => e.type === 'assistant/message'))) {
      const fence = { runId: p.run.id, token: p.token };
      return { appended: await this.log.append(p.run.sessionId, p.events, { fence, trusted: true, runId: p.run.id }) };
    }
    return this.log.transaction((tx) => appendDurablePoint(tx, this, p));
  }

  /**
   * Ends a run (completed, failed, cancelled, timed_out) in one transaction: tool calls left open
   * get a result (no dangling call), the turn is closed in the log if the loop could not do it,
   * the usage of children is rolled up, the parent learns its child's cost, and the session's
   * next enqueued message becomes the next run.
   */
  finish(
    run: RunRecord,
    to: FinalStatus,
    o: FinishOptions,
  ): Promise<{ run: RunRecord; next?: RunRecord; events: SessionEvent[] }> {
    return this.log.transaction((tx) => finish(tx, this, run, to, o));
  }

  /** A simple status change (pause, resume, a run handed back) with its event, in one transaction. */
  async move(
    runId: string,
    to: RunStatus,
    o: { reason?: string; patch?: RunPatch; guard?: RunGuard } = {},
  ): Promise<RunRecord> {
    return (await this.log.transaction((tx) => move(tx, this, runId, to, o))).run;
  }

  /** Sets a request flag on a run (cancel, pause) for the worker that holds it. */
  async request(runId: string, patch: Pick<RunPatch, 'cancelRequested' | 'pauseRequested'>): Promise<RunRecord> {
    const run = await this.get(runId);
    if (isTerminal(run.status)) return run;
    return this.store.runs.update(runId, patch, { statuses: statusesLeadingTo('cancelled') });
  }

  /** Withdraws the pause requested of a run that still runs (it was to pause at its next step boundary). */
  withdrawPause(runId: string): Promise<RunRecord> {
    return this.store.runs.update(runId, { pauseRequested: false }, { statuses: ['running'] });
  }

  /** Renews a worker's lease on a run it holds with `token`, until `until`; false when it no longer holds it. */
  renewLease(runId: string, owner: string, token: number, until: number): Promise<boolean> {
    return this.store.claims.renewLease(runId, owner, token, until);
  }

  /** Records an approval decision or an answer once; the run is queued again when nothing is left to decide. */
  async decide(runId: string, toolCallId: string, d: DecisionInput): Promise<RunRecord> {
    return (await this.log.transaction((tx) => decide(tx, this, runId, toolCallId, d))).run;
  }

  /** Approves a tool call the run waits for (with its input edited, if given). */
  approve(runId: string, toolCallId: string, input?: DecisionInput['input']): Promise<RunRecord> {
    return this.decide(runId, toolCallId, { approved: true, ...(input !== undefined ? { input } : {}) });
  }

  /** Denies a tool call the run waits for (with a reason, if given). */
  deny(runId: string, toolCallId: string, reason?: string): Promise<RunRecord> {
    return this.decide(runId, toolCallId, { approved: false, ...(reason !== undefined ? { reason } : {}) });
  }

  /** Answers a question the run asked. */
  answer(runId: string, toolCallId: string, answer: JsonValue): Promise<RunRecord> {
    return this.decide(runId, toolCallId, { answer });
  }

  /** Ends the waits of a run whose deadline is at or before `now` (see expire-wait.ts). */
  expireWait(runId: string, now: number, resolveAgent: FinishOptions['resolveAgent']): Promise<RunRecord | undefined> {
    return this.log.transaction((tx) => expireWait(tx, this, runId, now, resolveAgent));
  }

  /** Wakes the sleeps of a waiting run that wake on steering (see wake-on-steer.ts). */
  wakeOnSteer(runId: string, now: number): Promise<RunRecord | undefined> {
    return this.log.transaction((tx) => wakeOnSteer(tx, this, runId, now));
  }

  /** Delivers a signal to a run, exactly once (see deliver-signal.ts). */
  deliverSignal(
    runId: string,
    name: string,
    payload: unknown,
    source: 'api' | 'callback' | 'library',
    now: number,
  ): Promise<{ run: RunRecord; consumed: boolean }> {
    return this.log.transaction((tx) => deliverSignal(tx, this, runId, name, payload, source, now));
  }

  /** Stores steering for a run (see steer.ts); returns the run as it was. */
  steer(runId: string, message: UserMessage, idempotency?: IdempotencyClaim): Promise<RunRecord> {
    return this.store.transaction((tx) => steer(tx, runId, message, idempotency));
  }

  /** Fires the earliest due schedule's tick, in one transaction (see fire-schedule.ts). */
  fireDueSchedule(f: ScheduleFiring): Promise<Attempt> {
    return this.log.transaction((tx) => fireDueSchedule(tx, this, f));
  }

  /** Records a tick that could not fire (see fire-schedule.ts). */
  recordFailedFire(
    scheduleId: string,
    tick: number,
    now: number,
    error: unknown,
    nextTick: ScheduleFiring['nextTick'],
  ): Promise<ScheduleFireRecord | undefined> {
    return this.store.transaction((tx) => recordFailedFire(tx, scheduleId, tick, now, error, nextTick));
  }
}
