/** A waiting run's sleeps that wake on steering, woken inside a transaction because a message steered into it. */
import type { NewEvent } from '../../session/index.ts';
import type { RunRecord, StoreOps } from '../../store/index.ts';
import { applyDecisions } from './apply-decisions.ts';
import type { LifecycleContext } from './context.ts';
import { isWaiting } from './run-status.ts';
import { resolution, undecided, wokenBySteer, type Decision, type Waiting } from './waiting.ts';

/** A steering message came for a waiting run: a sleep of it that wakes on steering wakes now (undefined when none does). */
export async function wakeOnSteer(
  tx: StoreOps,
  c: LifecycleContext,
  runId: string,
  now: number,
): Promise<RunRecord | undefined> {
  const run = await tx.runs.get(runId);
  const waiting = run?.waiting as unknown as Waiting | null;
  if (!run || !waiting || !isWaiting(run.status)) return undefined;
  const woken = undecided(waiting).filter((call) => call.wait?.kind === 'sleep' && call.wait.wakeOnSteer === true);
  if (woken.length === 0) return undefined;
  const added: Record<string, Decision> = {};
  const events: NewEvent[] = [];
  for (const call of woken) {
    const r = resolution(run, call, { by: 'steer', output: wokenBySteer(call, now) }, now);
    added[call.toolCallId] = r.decision;
    events.push(r.event);
  }
  return (await applyDecisions(tx, c, run, waiting, added, events, 'woken by a message')).run;
}
