/** The waits of a run whose deadline has passed, ended inside a transaction (the worker's sweep): each by its policy. */
import type { NewEvent } from '../../session/index.ts';
import type { RunRecord, StoreOps } from '../../store/index.ts';
import { applyDecisions } from './apply-decisions.ts';
import type { LifecycleContext } from './context.ts';
import { finish } from './finish.ts';
import { isWaiting } from './run-status.ts';
import { transition } from './transition.ts';
import type { FinishOptions } from './types.ts';
import { resolution, undecided, type DeadlineAction, type Decision, type Waiting } from './waiting.ts';

/**
 * Ends the waits of the run whose deadline is at or before `now`: each by its policy; a policy of
 * `timed_out` ends the run. Returns the run as it is after, or undefined when nothing was due.
 */
export async function expireWait(
  tx: StoreOps,
  c: LifecycleContext,
  runId: string,
  now: number,
  resolveAgent: FinishOptions['resolveAgent'],
): Promise<RunRecord | undefined> {
  const run = await tx.runs.get(runId);
  const waiting = run?.waiting as unknown as Waiting | null;
  if (!run || !waiting || !isWaiting(run.status)) return undefined;
  if (run.status === 'waiting_for_quota') {
    // Its quota may have freed (ADR-0043): it goes back to the queue, and its next model call reserves again.
    if (waiting.expiresAt === null || waiting.expiresAt > now) return undefined;
    return (
      await transition(tx, c, run, 'queued', {
        reason: 'its quota may have freed',
        patch: { waiting: null },
      })
    ).run;
  }
  const due = undecided(waiting).filter((call) => call.deadline && call.deadline.at <= now);
  if (due.length === 0) return undefined;
  if (due.some((call) => call.deadline!.on === 'timed_out')) {
    const what = due.find((call) => call.deadline!.on === 'timed_out')!;
    return (
      await finish(tx, c, run, 'timed_out', {
        reason: `the wait for ${what.kind === 'signal' ? 'a signal' : 'a decision'} expired`,
        closeOpenCalls: true,
        resolveAgent,
      })
    ).run;
  }
  const added: Record<string, Decision> = {};
  const events: NewEvent[] = [];
  for (const call of due) {
    const r = resolution(
      run,
      call,
      { by: 'deadline', on: call.deadline!.on as Exclude<DeadlineAction, 'timed_out'> },
      now,
    );
    added[call.toolCallId] = r.decision;
    events.push(r.event);
  }
  const woke = due.every((call) => call.kind === 'sleep');
  return (await applyDecisions(tx, c, run, waiting, added, events, woke ? 'woke up' : 'the wait passed its deadline'))
    .run;
}
