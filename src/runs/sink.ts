import type { DeltaEvent, EventSink, TurnCheckpoint, TurnEvent } from '../core/index.ts';
import type { NewEvent, SessionEvent } from '../session/index.ts';
import type { JsonObject, RunRecord, RunStatus, StoreOps } from '../store/index.ts';
import type { FinalStatus, FinishOptions, RunBook, Waiting } from './book.ts';

export interface RunSinkHooks {
  /** How a turn end maps to the run's next status, decided by the execution (timeouts, shutdown). */
  outcome(end: TurnEvent & { type: 'turn/end' }): RunEnd;
  resolveAgent: FinishOptions['resolveAgent'];
  waitTimeoutMs: number | undefined;
}

export type RunEnd =
  | { status: FinalStatus; reason?: string; error?: JsonObject }
  | { status: 'waiting' }
  | { status: 'paused' | 'queued'; reason: string; /** Counts as an interrupted attempt (a retry). */ interrupted?: boolean };

/**
 * The event sink of a run's loop. Every append is fenced with the worker's token (a worker that
 * lost the run can write nothing more, so it can start no tool); step ends commit the run's
 * checkpoint with them; and the turn's end commits the run's next status in the same transaction,
 * so a crash can never leave a finished turn in a run that looks unfinished.
 */
export class RunSink implements EventSink {
  private readonly book: RunBook;
  private readonly run: RunRecord;
  private readonly token: number;
  private readonly hooks: RunSinkHooks;
  /** Set when this worker must write nothing more (it let go of the run). */
  closed = false;
  /** The run as the turn's end left it. */
  ended: RunRecord | undefined;

  constructor(book: RunBook, run: RunRecord, token: number, hooks: RunSinkHooks) {
    this.book = book;
    this.run = run;
    this.token = token;
    this.hooks = hooks;
  }

  private get log() {
    return this.book.sessions.log;
  }

  private toNew(e: TurnEvent): NewEvent {
    return { type: e.type, data: e.data, time: e.time, turn: e.turn, runId: this.run.id, ...(e.step !== undefined ? { step: e.step } : {}) } as NewEvent;
  }

  async append(events: readonly TurnEvent[], checkpoint?: TurnCheckpoint): Promise<void> {
    if (this.closed) throw new Error('this worker has let go of the run');
    const fence = { runId: this.run.id, token: this.token };
    const end = events.find((e): e is TurnEvent & { type: 'turn/end' } => e.type === 'turn/end');
    // Steering that came through the store leaves it in the transaction that logs it: exactly once.
    const steered = events.flatMap((e) => (e.type === 'user/message' && e.data.via === 'steer' ? [e.data.message.id] : []));
    if (!checkpoint && !end && steered.length === 0) {
      await this.log.append(this.run.sessionId, events.map((e) => this.toNew(e)), { fence });
      return;
    }
    const published: SessionEvent[] = [];
    await this.book.store.transaction(async (tx) => {
      const appended = await this.log.append(this.run.sessionId, events.map((e) => this.toNew(e)), { fence, tx });
      published.push(...appended);
      for (const id of steered) await tx.removeInput(id);
      // A failed turn's end is no step boundary: its working state may hold a step whose calls
      // started but have no result. The retry resumes from the last boundary and the log after it,
      // which tells which calls started (so none runs again unless it is idempotent).
      if (checkpoint && end?.data.reason !== 'failed') {
        await tx.putCheckpoint({
          runId: this.run.id,
          step: checkpoint.step,
          seq: appended.at(-1)!.seq,
          state: { conversation: checkpoint.conversation, usage: checkpoint.usage, cost: checkpoint.cost },
        });
      }
      if (end) published.push(...(await this.settle(tx, end)));
    });
    this.log.publish(this.run.sessionId, published);
  }

  /** The run's status after its turn ended, in the turn end's transaction. */
  private async settle(tx: StoreOps, end: TurnEvent & { type: 'turn/end' }): Promise<SessionEvent[]> {
    const outcome = this.hooks.outcome(end);
    const current = (await tx.getRun(this.run.id))!;
    const guard = { fencingToken: this.token };
    // The run's own usage and that of its children that ended (as a finish records it).
    const total = await this.book.withChildren(tx, this.run.id, end.data.usage, end.data.cost);
    const usage = total.usage as unknown as JsonObject;
    if (outcome.status === 'waiting') {
      const pending = end.data.pending ?? [];
      const status: RunStatus = pending.some((p) => p.kind === 'approval') ? 'waiting_approval' : 'waiting_for_user';
      const waiting: Waiting = {
        kind: status === 'waiting_approval' ? 'approval' : 'input',
        calls: pending,
        decisions: {},
        expiresAt: this.hooks.waitTimeoutMs !== undefined ? Date.now() + this.hooks.waitTimeoutMs : null,
      };
      const t = await this.book.transition(tx, current, status, {
        reason: waiting.kind === 'approval' ? 'approval needed' : 'question for the user',
        patch: { waiting: waiting as unknown as JsonObject, lease: null, usage, cost: total.cost },
        guard,
      });
      this.ended = t.run;
      return t.events;
    }
    if (outcome.status === 'paused' || outcome.status === 'queued') {
      const t = await this.book.transition(tx, current, outcome.status, {
        reason: outcome.reason,
        patch: { lease: null, pauseRequested: false, usage, cost: total.cost, ...(outcome.status === 'queued' && outcome.interrupted ? { attempt: current.attempt + 1 } : {}) },
        guard,
      });
      this.ended = t.run;
      return t.events;
    }
    const final = outcome as Extract<RunEnd, { status: FinalStatus }>;
    const f = await this.book.finishIn(tx, this.run.id, final.status, {
      ...(final.reason ? { reason: final.reason } : {}),
      ...(final.error ? { error: final.error } : {}),
      usage: end.data.usage,
      cost: end.data.cost,
      fencingToken: this.token,
      resolveAgent: this.hooks.resolveAgent,
    });
    this.ended = f.run;
    return f.events;
  }

  delta(event: DeltaEvent): void {
    if (!this.closed) this.log.publishDelta(this.run.sessionId, event);
  }
}
