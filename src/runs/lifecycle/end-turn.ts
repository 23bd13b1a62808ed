/**
 * The run's next status at its turn's end, inside the turn end's transaction (settle): a final
 * status ends it, a suspended turn makes it wait (its wait ended at once when what it waits for
 * already came), a pause or a hand-back leaves it paused or queued.
 */
import type { TurnEvent } from '../../core/index.ts';
import type { SessionEvent } from '../../session/index.ts';
import { NotFoundError, type JsonObject, type RunRecord, type RunStatus, type StoreOps } from '../../store/index.ts';
import { settleWait } from './apply-decisions.ts';
import type { LifecycleContext } from './context.ts';
import { endedChildren, finish, withChildren } from './finish.ts';
import type { FinalStatus } from './run-status.ts';
import { transition } from './transition.ts';
import type { FinishOptions } from './types.ts';
import { newWaiting, statusOf, type Waiting } from './waiting.ts';

/** How a turn's end maps to the run's next status, decided by the execution (timeouts, shutdown). */
export type RunEnd =
  | { status: FinalStatus; reason?: string; error?: JsonObject }
  | { status: 'waiting' }
  /** A quota refused the next model call (ADR-0043): the run waits, no worker holding it, until `wakeAt`. */
  | { status: 'waiting_for_quota'; wakeAt: number; quota: JsonObject }
  | {
      status: 'paused' | 'queued';
      reason: string;
      /** Counts as an interrupted attempt (a retry). */ interrupted?: boolean;
    };

/** What a turn's end settles with: the run, the worker's token, and what the execution decided. */
export interface TurnEnd {
  run: RunRecord;
  token: number;
  event: TurnEvent & { type: 'turn/end' };
  /** Decided by the execution, in the transaction: how its turn's end maps to the run's next status. */
  outcome: () => RunEnd;
  resolveAgent: FinishOptions['resolveAgent'];
  waitTimeoutMs: number | undefined;
  /** End a wait at once when what it waits for already came (see settleWait). */
  settleWaits: boolean;
  /** Settles before the turn's end writes anything (see FinishOptions.mayEnd). */
  mayEnd?: Promise<void>;
}

const WAIT_REASONS: Record<Waiting['kind'], string> = {
  approval: 'approval needed',
  input: 'question for the user',
  sleep: 'sleeping',
  signal: 'waiting for a signal',
  quota: 'waiting for quota',
};

/** The run's status after its turn ended, in the turn end's transaction. */
export async function endTurn(
  tx: StoreOps,
  c: LifecycleContext,
  t: TurnEnd,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const { run, event: end } = t;
  const outcome = t.outcome();
  if (
    outcome.status !== 'waiting' &&
    outcome.status !== 'waiting_for_quota' &&
    outcome.status !== 'paused' &&
    outcome.status !== 'queued'
  ) {
    // A final status: `finish` reads the run and adds its children's usage itself.
    const final = outcome as Extract<RunEnd, { status: FinalStatus }>;
    const f = await finish(tx, c, run, final.status, {
      ...(final.reason ? { reason: final.reason } : {}),
      ...(final.error ? { error: final.error } : {}),
      usage: end.data.usage,
      cost: end.data.cost,
      fencingToken: t.token,
      ...(t.mayEnd ? { mayEnd: t.mayEnd } : {}),
      resolveAgent: t.resolveAgent,
    });
    return { run: f.run, events: f.events };
  }
  // The run's own usage and that of its children that ended (as a finish records it), read with the run.
  const [current, children] = await Promise.all([tx.runs.get(run.id), endedChildren(tx, run.id), t.mayEnd]);
  if (!current) throw new NotFoundError('run', run.id);
  const guard = { fencingToken: t.token };
  const total = withChildren(children, end.data.usage, end.data.cost);
  const usage = total.usage as unknown as JsonObject;
  if (outcome.status === 'waiting') {
    // The waiting model (ADR-0015): each pending call with its deadline; no worker holds the run.
    const pending = end.data.pending ?? [];
    const agent = t.resolveAgent(run.agent.name, run.agent.version);
    const waiting = newWaiting(pending, agent, t.waitTimeoutMs, c.clock.now());
    const status: RunStatus = statusOf(pending);
    const moved = await transition(tx, c, current, status, {
      reason: WAIT_REASONS[waiting.kind],
      patch: { waiting: waiting as unknown as JsonObject, lease: null, usage, cost: total.cost },
      guard,
    });
    // A signal that came before the wait, or a time already past: the wait ends at once.
    const settled = t.settleWaits ? await settleWait(tx, c, moved.run) : { run: moved.run, events: [] };
    return { run: settled.run, events: [...moved.events, ...settled.events] };
  }
  if (outcome.status === 'waiting_for_quota') {
    // A wait with no pending call: it ends by itself at `expiresAt` (the sweep wakes it, see expire-wait.ts).
    const waiting: Waiting = {
      kind: 'quota',
      calls: [],
      decisions: {},
      expiresAt: outcome.wakeAt,
      quota: outcome.quota,
    };
    return transition(tx, c, current, 'waiting_for_quota', {
      reason: WAIT_REASONS.quota,
      patch: { waiting: waiting as unknown as JsonObject, lease: null, pauseRequested: false, usage, cost: total.cost },
      guard,
    });
  }
  const moved = await transition(tx, c, current, outcome.status, {
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
  return moved;
}
