/** A run's status change inside a transaction: the row (a compare-and-set) and its `run/status` event. */
import type { SessionEvent } from '../../session/index.ts';
import {
  NotFoundError,
  type JsonObject,
  type RunGuard,
  type RunPatch,
  type RunRecord,
  type RunStatus,
  type StoreOps,
} from '../../store/index.ts';
import type { LifecycleContext } from './context.ts';
import { assertTransition, isTerminal } from './run-status.ts';

export interface TransitionOptions {
  reason?: string;
  error?: JsonObject;
  patch?: RunPatch;
  guard?: RunGuard;
  fence?: boolean;
}

/**
 * Validates and applies a status change inside `tx`: the row (a compare-and-set on the status it
 * was read with, and the fencing token when a worker writes) and a `run/status` event.
 */
export async function transition(
  tx: StoreOps,
  c: LifecycleContext,
  run: RunRecord,
  to: RunStatus,
  o: TransitionOptions = {},
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  assertTransition(run.id, run.status, to);
  const now = Date.now();
  const patch: RunPatch = { ...o.patch, status: to };
  if (isTerminal(to)) {
    patch.endedAt = now;
    patch.lease = null;
    patch.waiting = null;
    patch.fence = true;
  }
  if (o.error) patch.error = o.error;
  if (o.fence) patch.fence = true;
  const guard: RunGuard = { statuses: [run.status], ...o.guard };
  // The event, then the row (whose fence it checks before the row's update moves it), asked for
  // together: a transition refused either way fails its transaction, so the row's update is sent
  // without waiting for the append (one round trip where the store pipelines).
  const fencingToken = o.guard?.fencingToken;
  const appending = c.log.append(
    run.sessionId,
    [
      {
        type: 'run/status',
        runId: run.id,
        ...(run.turn !== null ? { turn: run.turn } : {}),
        data: {
          from: run.status,
          to,
          attempt: run.attempt,
          ...(o.reason ? { reason: o.reason } : {}),
          ...(o.error ? { error: o.error as Record<string, never> } : {}),
        },
      },
    ],
    {
      tx,
      // Built here from typed values: no schema check.
      trusted: true,
      abortsTransaction: true,
      ...(fencingToken !== undefined ? { fence: { runId: run.id, token: fencingToken } } : {}),
    },
  );
  appending.catch(() => {});
  const updating = tx.runs.update(run.id, patch, guard);
  updating.catch(() => {});
  // The append's refusal (a stale fence) is what the transition is refused with.
  const events = await appending;
  return { run: await updating, events };
}

/** A simple status change (pause, resume, park) of the run `runId` as it is now, with its event. */
export async function move(
  tx: StoreOps,
  c: LifecycleContext,
  runId: string,
  to: RunStatus,
  o: Pick<TransitionOptions, 'reason' | 'patch' | 'guard'> = {},
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const run = await tx.runs.get(runId);
  if (!run) throw new NotFoundError('run', runId);
  return transition(tx, c, run, to, o);
}
