/**
 * The run-status vocabulary: which statuses there are, which ends a run and which waits, the state
 * machine's transitions and what a worker may claim. The store keeps a run's status as a string
 * column (`RunStatus` is its value domain) and is handed the lists it filters on from here.
 */
import { RUN_STATUS_VALUES, StoreError, type ClaimPolicy, type RunStatus } from '../../store/index.ts';

export type { RunStatus };

/** Every run status (the order webhooks and metrics list them in; the API's is RUN_STATUS_ORDER). */
export const RUN_STATUSES: readonly RunStatus[] = RUN_STATUS_VALUES;

/** The statuses that end a run: no way out of them. */
export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled', 'timed_out'];
export const isTerminal = (s: RunStatus): boolean => TERMINAL_STATUSES.includes(s);
export type FinalStatus = 'completed' | 'failed' | 'cancelled' | 'timed_out';

/**
 * The statuses of a run that waits (no worker holds it): for approvals, answers, time, a signal, or
 * its tenant's quota (ADR-0043: a wait with no pending call, whose `waiting.expiresAt` is its wake-up).
 */
export const WAITING_STATUSES: readonly RunStatus[] = [
  'waiting_approval',
  'waiting_for_user',
  'sleeping',
  'waiting_for_signal',
  'waiting_for_quota',
];
export const isWaiting = (s: RunStatus): boolean => WAITING_STATUSES.includes(s);

/**
 * The statuses of a run that waits for a person (an approval or an answer): a tenant's inbox. The
 * stores index the runs in these statuses by tenant (see store/run-tenants.ts).
 */
export const WAITING_FOR_PEOPLE: readonly RunStatus[] = ['waiting_approval', 'waiting_for_user'];

/**
 * The statuses a run only reaches by a turn's end that stored its checkpoint (see `resumeCursor`).
 * Not `paused`: a queued run may be paused too, after a turn that failed and stored none.
 */
export const STORED_AT_TURN_END: readonly RunStatus[] = ['completed', ...WAITING_STATUSES];

/** Every status in the order a run goes through them (the order the API and the CLI list them in). */
export const RUN_STATUS_ORDER: readonly RunStatus[] = [
  'queued',
  'running',
  ...WAITING_STATUSES,
  'paused',
  ...TERMINAL_STATUSES,
];

/** The statuses where a run has settled for now: it waits, is paused, or ended (nothing runs it or is about to). */
export const SETTLED_STATUSES: readonly RunStatus[] = [...WAITING_STATUSES, 'paused', ...TERMINAL_STATUSES];

/**
 * The run state machine. Terminal statuses (completed, failed, cancelled, timed_out) have no way
 * out, and nothing that waits can be mistaken for something that ended.
 */
export const TRANSITIONS: Readonly<Record<RunStatus, readonly RunStatus[]>> = {
  // queued → failed: a run queued behind another whose agent is gone when it comes up.
  queued: ['running', 'paused', 'failed', 'cancelled', 'timed_out'],
  // running → queued: the worker let go (shutdown, or an infrastructure retry) and another takes over.
  running: [
    'waiting_approval',
    'waiting_for_user',
    'sleeping',
    'waiting_for_signal',
    'waiting_for_quota',
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
  // Waits for its tenant's quota (ADR-0043): woken (queued) when it frees; it reached it at a step boundary.
  waiting_for_quota: ['queued', 'cancelled', 'timed_out'],
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
