import type { DeltaEvent, TurnEvent } from '../core/index.ts';
import { BufferedSink, type HeldCheckpoint } from '../session/index.ts';
import { FencedError, type RunRecord } from '../store/index.ts';
import type { RunSpans } from '../telemetry/run-spans.ts';
import type { RunEnd } from './lifecycle/end-turn.ts';
import type { RunLifecycle } from './lifecycle/run-lifecycle.ts';
import type { FinishOptions } from './lifecycle/types.ts';
import type { RunCheckpointState } from './resume.ts';
import type { OfferedSlot } from './worker-slot.ts';

export interface RunSinkHooks {
  /** How a turn end maps to the run's next status, decided by the execution (timeouts, shutdown). */
  outcome(end: TurnEvent & { type: 'turn/end' }): RunEnd;
  resolveAgent: FinishOptions['resolveAgent'];
  waitTimeoutMs: number | undefined;
  /** Steering is waiting for the run (its turn's end was refused): take it at the next boundary. */
  steeringWaiting?: () => void;
  /** The run's lease surely still holds (no other worker can have claimed it). */
  leaseHolds?: () => boolean;
  /** The run's lease has not run out by this process's clock (it may be claimed by another worker after). */
  leaseRunning?: () => boolean;
  /** The execution's spans, told of every commit (only when a tracer records). */
  spans?: RunSpans | undefined;
  /** Ends a wait at once when what it waits for already came (see lifecycle/apply-decisions.ts: settleWait). */
  settleWaits?: boolean;
  /** Whether to settle the quota reservations of the model calls each durable point records (ADR-0043): only when one was made. */
  settleQuotas?: () => boolean;
  /** At the turn's end, the worker slot the run leaves, for the next run claimed in the end's transaction (ADR-0050). */
  handOver?: () => OfferedSlot | undefined;
}

export type { RunEnd } from './lifecycle/end-turn.ts';

/**
 * The event sink of a run's loop. The events of each durable point commit together, fenced with
 * the worker's token (a worker that lost the run can write nothing more, so it can start no tool
 * that needs a durable point); a step's `step/end` is its checkpoint, and the turn's end stores
 * the run's checkpoint row (counters and a log position, never messages) with it (ADR-0021);
 * steering taken into the turn leaves the inbox in the same commit; and the
 * turn's end commits the run's next status with it, so a crash can never leave a finished turn
 * in a run that looks unfinished.
 */
export class RunSink extends BufferedSink {
  private readonly lifecycle: RunLifecycle;
  private readonly run: RunRecord;
  private readonly token: number;
  private readonly hooks: RunSinkHooks;
  /** Set when this worker must write nothing more (it let go of the run). */
  closed = false;
  /** The run as the turn's end left it. */
  ended: RunRecord | undefined;
  /** The id of the `run/status` event that moved the run to `ended`'s status, in the same commit. */
  endEventId: string | undefined;

  constructor(lifecycle: RunLifecycle, run: RunRecord, token: number, hooks: RunSinkHooks) {
    super();
    this.lifecycle = lifecycle;
    this.run = run;
    this.token = token;
    this.hooks = hooks;
  }

  private get log() {
    return this.lifecycle.sessions.log;
  }

  protected override check(): void {
    if (this.closed) throw new Error('this worker has let go of the run');
  }

  /**
   * Before idempotent tools start (no durable point, so no fenced write, comes before them): the
   * run must still be this worker's. Free while the lease surely holds; one read otherwise.
   */
  async beforeEffects(): Promise<void> {
    this.check();
    // Within its lease no other worker can have claimed the run; near or past its end, ask the store.
    if (this.hooks.leaseHolds?.()) return;
    const now = await this.lifecycle.store.runs.get(this.run.id);
    if (!now || now.fencingToken !== this.token) throw new FencedError(this.run.id, this.token, now?.fencingToken);
  }

  protected async commit(events: readonly TurnEvent[], held: HeldCheckpoint | undefined): Promise<void> {
    this.check();
    const end = events.find((e): e is TurnEvent & { type: 'turn/end' } => e.type === 'turn/end');
    // Steering that came through the store leaves it in the transaction that logs it: exactly once.
    const steered = events.flatMap((e) =>
      e.type === 'user/message' && e.data.via === 'steer' ? [e.data.message.id] : [],
    );
    const state: RunCheckpointState | undefined = held
      ? { v: 2, usage: held.checkpoint.usage, cost: held.checkpoint.cost }
      : undefined;
    // The run's slot goes to the next run, claimed in the turn end's transaction: it starts when that commits.
    const slot = end ? this.hooks.handOver?.() : undefined;
    // Published when it commits, by the log.
    const committed = await this.lifecycle
      .appendDurablePoint({
        run: this.run,
        token: this.token,
        events,
        steered,
        ...(this.hooks.settleQuotas?.() ? { settleQuotas: true } : {}),
        ...(held && state ? { checkpoint: { step: held.checkpoint.step, index: held.index, state } } : {}),
        ...(end
          ? {
              end: {
                event: end,
                // Decided in the turn end's transaction, as late as it can be (a timeout may come meanwhile).
                outcome: () => this.hooks.outcome(end),
                resolveAgent: this.hooks.resolveAgent,
                waitTimeoutMs: this.hooks.waitTimeoutMs,
                settleWaits: this.hooks.settleWaits === true,
              },
            }
          : {}),
        // Before the commit publishes the run's status event (see Execution.endedWith).
        onSettled: (run, endEventId) => {
          this.ended = run;
          this.endEventId = endEventId;
        },
        onSteeringWaiting: () => this.hooks.steeringWaiting?.(),
        ...(slot ? { claimNext: (tx) => slot.claim(tx) } : {}),
      })
      .catch((e: unknown) => {
        slot?.release();
        throw e;
      });
    if (committed.next) slot!.start(committed.next);
    else slot?.release();
    this.hooks.spans?.committed(events, committed.appended);
  }

  /** Deltas made while the lease had run out by this process's clock, until it is renewed. */
  private heldDeltas: DeltaEvent[] = [];

  /**
   * A token delta, told to the streams while the lease runs. Past it, the run may have another
   * owner streaming its own call, whose deltas are numbered after the same events (these would
   * take their ids): they wait for the lease's renewal (`leaseRenewed`), and go with the run when
   * it is lost.
   */
  delta(event: DeltaEvent): void {
    if (this.closed) return;
    if (this.hooks.leaseRunning?.() === false) {
      this.heldDeltas.push(event);
      return;
    }
    this.releaseDeltas();
    this.log.publishDelta(this.run.sessionId, event);
  }

  /** The lease was renewed: the deltas held while it had run out go to the streams, in order. */
  leaseRenewed(): void {
    if (!this.closed) this.releaseDeltas();
  }

  private releaseDeltas(): void {
    for (const d of this.heldDeltas.splice(0)) this.log.publishDelta(this.run.sessionId, d);
  }
}
