import { TurnNotOverError, type DeltaEvent, type TurnEvent } from '../core/index.ts';
import { BufferedSink, toNewEvent, type HeldCheckpoint, type SessionEvent } from '../session/index.ts';
import { FencedError, type JsonObject, type RunRecord, type RunStatus, type StoreOps } from '../store/index.ts';
import type { RunSpans } from '../telemetry/run-spans.ts';
import type { FinalStatus, FinishOptions, RunBook, Waiting } from './book.ts';
import type { RunCheckpointState } from './resume.ts';
import { newWaiting, statusOf, type Waits } from './waits.ts';

const NONE: readonly SessionEvent[] = [];

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
  /** Ends a wait at once when what it waits for already came (see Waits.settleIn). */
  waits?: Waits;
}

const WAIT_REASONS: Record<Waiting['kind'], string> = {
  approval: 'approval needed',
  input: 'question for the user',
  sleep: 'sleeping',
  signal: 'waiting for a signal',
};

export type RunEnd =
  | { status: FinalStatus; reason?: string; error?: JsonObject }
  | { status: 'waiting' }
  | {
      status: 'paused' | 'queued';
      reason: string;
      /** Counts as an interrupted attempt (a retry). */ interrupted?: boolean;
    };

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
  private readonly book: RunBook;
  private readonly run: RunRecord;
  private readonly token: number;
  private readonly hooks: RunSinkHooks;
  /** Set when this worker must write nothing more (it let go of the run). */
  closed = false;
  /** The run as the turn's end left it. */
  ended: RunRecord | undefined;
  /** The id of the `run/status` event that moved the run to `ended`'s status, in the same commit. */
  endEventId: string | undefined;

  constructor(book: RunBook, run: RunRecord, token: number, hooks: RunSinkHooks) {
    super();
    this.book = book;
    this.run = run;
    this.token = token;
    this.hooks = hooks;
  }

  private get log() {
    return this.book.sessions.log;
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
    const now = await this.book.store.runs.get(this.run.id);
    if (!now || now.fencingToken !== this.token) throw new FencedError(this.run.id, this.token, now?.fencingToken);
  }

  protected async commit(events: readonly TurnEvent[], held: HeldCheckpoint | undefined): Promise<void> {
    this.check();
    const fence = { runId: this.run.id, token: this.token };
    const end = events.find((e): e is TurnEvent & { type: 'turn/end' } => e.type === 'turn/end');
    // Steering that came through the store leaves it in the transaction that logs it: exactly once.
    const steered = events.flatMap((e) =>
      e.type === 'user/message' && e.data.via === 'steer' ? [e.data.message.id] : [],
    );
    const drafts = events.map((e) => toNewEvent(e, this.run.id));
    // A step's end needs no row of its own: its `step/end` is the checkpoint (ADR-0021).
    if (!end && steered.length === 0) {
      const appended = await this.log.append(this.run.sessionId, drafts, { fence, trusted: true });
      this.hooks.spans?.committed(events, appended);
      return;
    }
    // Published when it commits, by the log.
    let appended: readonly SessionEvent[] = NONE;
    await this.log.transaction(async (tx) => {
      appended = await this.log.append(this.run.sessionId, drafts, { fence, tx, trusted: true });
      for (const id of steered) await tx.inputs.remove(id);
      // The stored checkpoint moves at the turn's end, with the run's record. A failed turn's end
      // is no step boundary: its working state may hold a step whose calls started but have no
      // result. The retry resumes from the last boundary and the log after it, which tells which
      // calls started (so none runs again unless it is idempotent).
      if (held && end && end.data.reason !== 'failed') {
        const state: RunCheckpointState = { v: 2, usage: held.checkpoint.usage, cost: held.checkpoint.cost };
        await tx.runs.putCheckpoint({
          runId: this.run.id,
          step: held.checkpoint.step,
          seq: appended[held.index]!.seq,
          state,
        });
      }
      if (end?.data.reason === 'completed') {
        // The turn may only end when no steering is waiting for it (stored meanwhile, here or by
        // another process): then nothing of this commit stands, and the turn goes on to take it.
        // A steer that comes after this commit finds the run ended, and is refused.
        const waiting = await tx.inputs.list(this.run.sessionId, 'steer', this.run.id, 1);
        if (waiting.length > 0) {
          this.hooks.steeringWaiting?.();
          throw new TurnNotOverError(`steering ${waiting[0]!.id} is waiting for run ${this.run.id}`);
        }
      }
      if (end) {
        const settled = await this.settle(tx, end);
        this.endEventId = settled.findLast(
          (e) => e.type === 'run/status' && e.runId === this.run.id && e.data.to === this.ended?.status,
        )?.id;
        // The turn is over: its events are stored compactly from now on (ADR-0009).
        await tx.events.seal(this.run.sessionId);
      }
    });
    this.hooks.spans?.committed(events, appended);
  }

  /** The run's status after its turn ended, in the turn end's transaction. */
  private async settle(tx: StoreOps, end: TurnEvent & { type: 'turn/end' }): Promise<SessionEvent[]> {
    const outcome = this.hooks.outcome(end);
    if (outcome.status !== 'waiting' && outcome.status !== 'paused' && outcome.status !== 'queued') {
      // A final status: `finishIn` reads the run and adds its children's usage itself.
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
    const current = (await tx.runs.get(this.run.id))!;
    const guard = { fencingToken: this.token };
    // The run's own usage and that of its children that ended (as a finish records it).
    const total = await this.book.withChildren(tx, this.run.id, end.data.usage, end.data.cost);
    const usage = total.usage as unknown as JsonObject;
    if (outcome.status === 'waiting') {
      // The waiting model (ADR-0015): each pending call with its deadline; no worker holds the run.
      const pending = end.data.pending ?? [];
      const agent = this.hooks.resolveAgent(this.run.agent.name, this.run.agent.version);
      const waiting = newWaiting(pending, agent, this.hooks.waitTimeoutMs, this.book.clock.now());
      const status: RunStatus = statusOf(pending);
      const t = await this.book.transition(tx, current, status, {
        reason: WAIT_REASONS[waiting.kind],
        patch: { waiting: waiting as unknown as JsonObject, lease: null, usage, cost: total.cost },
        guard,
      });
      // A signal that came before the wait, or a time already past: the wait ends at once.
      const settled = this.hooks.waits ? await this.hooks.waits.settleIn(tx, t.run) : { run: t.run, events: [] };
      this.ended = settled.run;
      return [...t.events, ...settled.events];
    }
    const t = await this.book.transition(tx, current, outcome.status, {
      reason: outcome.reason,
      patch: {
        lease: null,
        pauseRequested: false,
        usage,
        cost: total.cost,
        ...(outcome.status === 'queued' && outcome.interrupted ? { attempt: current.attempt + 1 } : {}),
      },
      guard,
    });
    this.ended = t.run;
    return t.events;
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
