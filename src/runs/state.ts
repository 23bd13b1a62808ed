import { isTerminal, StoreError, type ClaimPolicy, type RunStatus } from '../store/index.ts';

/**
 * The run state machine. Terminal statuses (completed, failed, cancelled, timed_out) have no way
 * out, and nothing that waits can be mistaken for something that ended.
 */
const TRANSITIONS: Record<RunStatus, readonly RunStatus[]> = {
  // queued → failed: a run queued behind another whose agent is gone when it comes up.
  queued: ['running', 'paused', 'failed', 'cancelled', 'timed_out'],
  // running → queued: the worker let go (shutdown, or an infrastructure retry) and another takes over.
  running: [
    'waiting_approval',
    'waiting_for_user',
    'sleeping',
    'waiting_for_signal',
    'paused',
    'completed',
    'failed',
    'cancelled',
    'timed_out',
    'queued',
  ],
  // A wait moves to another when what it waits for changes (one step may wait for several things).
  waiting_approval: ['queued', 'waiting_for_user', 'sleeping', 'waiting_for_signal', 'cancelled', 'timed_out'],
  waiting_for_user: ['queued', 'waiting_approval', 'sleeping', 'waiting_for_signal', 'cancelled', 'timed_out'],
  // Waits for time or for a signal (ADR-0015): woken by a guarded transition to queued, exactly once.
  sleeping: ['queued', 'waiting_approval', 'waiting_for_user', 'waiting_for_signal', 'cancelled', 'timed_out'],
  waiting_for_signal: ['queued', 'waiting_approval', 'waiting_for_user', 'sleeping', 'cancelled', 'timed_out'],
  paused: ['queued', 'cancelled', 'timed_out'],
  completed: [],
  failed: [],
  cancelled: [],
  timed_out: [],
};

/**
 * What a worker may claim: a queued run (that is not queued behind another), or a running one whose
 * worker let its lease expire (a recovery: a new attempt). A claimed run is running.
 */
export const CLAIM_POLICY: ClaimPolicy = { ready: ['queued'], recoverable: ['running'], to: 'running' };

export const canTransition = (from: RunStatus, to: RunStatus): boolean => TRANSITIONS[from].includes(to);

/** Statuses from which `to` can be reached: the guard of a transition's compare-and-set. */
export const statusesLeadingTo = (to: RunStatus): RunStatus[] =>
  (Object.keys(TRANSITIONS) as RunStatus[]).filter((from) => TRANSITIONS[from].includes(to));

export class IllegalTransitionError extends StoreError {
  readonly runId: string;
  readonly from: RunStatus;
  readonly to: RunStatus;
  constructor(runId: string, from: RunStatus, to: RunStatus, why?: string) {
    super(
      'illegal_transition',
      `run ${runId} cannot go from ${from} to ${to}${why ? `: ${why}` : isTerminal(from) ? ` (${from} is final)` : ` (allowed from ${from}: ${TRANSITIONS[from].join(', ') || 'nothing'})`}`,
    );
    this.name = 'IllegalTransitionError';
    this.runId = runId;
    this.from = from;
    this.to = to;
  }
}

export function assertTransition(runId: string, from: RunStatus, to: RunStatus): void {
  if (!canTransition(from, to)) throw new IllegalTransitionError(runId, from, to);
}
