/**
 * What ends a wait, inside its transaction: decisions recorded on a waiting run's calls, what
 * already came for the calls left taken, and the run moved (queued, or the status of what is left).
 */
import type { NewEvent, SessionEvent } from '../../session/index.ts';
import type { JsonObject, RunRecord, StoreOps } from '../../store/index.ts';
import type { LifecycleContext } from './context.ts';
import { isWaiting } from './run-status.ts';
import { transition } from './transition.ts';
import {
  expiresAtOf,
  kindOf,
  resolution,
  signalOutput,
  statusOf,
  undecided,
  wokenBySteer,
  type Decision,
  type Ending,
  type Waiting,
  type WaitingCall,
} from './waiting.ts';

/**
 * What already came for the calls still waiting, ended in the caller's transaction: a signal kept
 * before its wait is taken (whatever the run waited for when it came), a sleep whose time passed
 * wakes, and a sleep that wakes on steering wakes when a message steered into the run waits for
 * it. A run takes each signal name once: a wait for a name an earlier wait of the run took, or
 * that another call of the same wait already waits for, is refused at once (an error result), so
 * that it never waits for a delivery that cannot come.
 */
async function takeWhatCame(
  tx: StoreOps,
  run: RunRecord,
  waiting: Waiting,
  now: number,
): Promise<{ added: Record<string, Decision>; events: NewEvent[] }> {
  const added: Record<string, Decision> = {};
  const events: NewEvent[] = [];
  const end = (call: WaitingCall, how: Ending) => {
    const r = resolution(run, call, how, now);
    added[call.toolCallId] = r.decision;
    events.push(r.event);
  };
  const awaited = new Set<string>();
  // A message steered into the run before its sleep started (while the step ran) wakes a sleep that wakes on steering.
  const wakers = undecided(waiting).filter(
    (c) => c.wait?.kind === 'sleep' && c.wait.wakeOnSteer === true && c.wait.until > now,
  );
  const steered = wakers.length > 0 && (await tx.inputs.list(run.sessionId, 'steer', run.id, 1)).length > 0;
  for (const call of undecided(waiting)) {
    if (call.wait?.kind === 'sleep' && call.wait.until <= now) end(call, { by: 'deadline', on: 'wake' });
    else if (steered && wakers.includes(call)) end(call, { by: 'steer', output: wokenBySteer(call, now) });
    if (call.wait?.kind !== 'signal') continue;
    const name = call.wait.name;
    const kept = await tx.waits.getSignal(run.id, name);
    if (awaited.has(name) || kept?.consumedAt != null) {
      const why = awaited.has(name)
        ? 'another call of this step waits for it already'
        : 'an earlier wait of this run took it';
      end(call, {
        by: 'signal',
        output: {
          type: 'error',
          code: 'execution_error',
          message: `signal ${name} is already taken: ${why}; a run waits for each signal name once (wait for a new name, such as ${name}-2)`,
        },
      });
      continue;
    }
    awaited.add(name);
    if (!kept) continue;
    await tx.waits.consumeSignal(run.id, name, now);
    end(call, { by: kept.source === 'callback' ? 'callback' : 'signal', output: signalOutput(call, kept.payload) });
  }
  return { added, events };
}

/**
 * Records decisions on a waiting run's calls (their events first), takes what already came for the
 * calls left (see takeWhatCame), and moves the run: queued when nothing is left to wait for, else
 * to the status of what is left. Every path that ends a wait comes here (a decision, an answer, a
 * deadline, a wake-up, a steer, a signal, a turn's end), so none can leave a run waiting for
 * something it already has. Guarded by the status and the fencing token the run was read with: of
 * two that try, one wins and the other's transaction rolls back.
 */
export async function applyDecisions(
  tx: StoreOps,
  c: LifecycleContext,
  run: RunRecord,
  waiting: Waiting,
  decided: Record<string, Decision>,
  decidedEvents: readonly NewEvent[],
  reason: string,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const next: Waiting = { ...waiting, decisions: { ...waiting.decisions, ...decided } };
  const came = await takeWhatCame(tx, run, next, c.clock.now());
  const events = [...decidedEvents, ...came.events];
  if (events.length === 0) return { run, events: [] };
  next.decisions = { ...next.decisions, ...came.added };
  const appended = await c.log.append(run.sessionId, events, { tx });
  const left = undecided(next);
  const guard = { statuses: [run.status], fencingToken: run.fencingToken };
  if (left.length === 0) {
    // The decisions are in the log (the resumed turn reads them there): nothing of the wait stays.
    const t = await transition(tx, c, run, 'queued', { reason, patch: { waiting: null }, guard });
    return { run: t.run, events: [...appended, ...t.events] };
  }
  next.kind = kindOf(left);
  next.expiresAt = expiresAtOf(next);
  const status = statusOf(left);
  if (status !== run.status) {
    const t = await transition(tx, c, run, status, {
      reason,
      patch: { waiting: next as unknown as JsonObject },
      guard,
    });
    return { run: t.run, events: [...appended, ...t.events] };
  }
  const updated = await tx.runs.update(run.id, { waiting: next as unknown as JsonObject }, guard);
  return { run: updated, events: appended };
}

/**
 * Inside the transaction that put the run in a waiting status (its turn's end): a signal that
 * came before the wait started, or a time already past, ends the wait at once.
 */
export async function settleWait(
  tx: StoreOps,
  c: LifecycleContext,
  run: RunRecord,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const waiting = run.waiting as unknown as Waiting | null;
  if (!waiting || !isWaiting(run.status)) return { run, events: [] };
  return applyDecisions(tx, c, run, waiting, {}, [], 'what it waited for had already come');
}
