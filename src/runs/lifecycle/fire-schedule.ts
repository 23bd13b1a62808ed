/**
 * A schedule's fire, inside its transaction (ADR-0016): the earliest due schedule's tick recorded
 * once (its fire row, UNIQUE (schedule_id, tick)) with the message it sends (a run, or one queued
 * behind the session's active run) and its `schedule/fired` event; or a tick that could not fire,
 * recorded `failed`.
 */
import { newId, userMessage, type AgentDefinition, type UserInput } from '../../core/index.ts';
import type { UserMessage } from '../../model/index.ts';
import {
  NotFoundError,
  StoreError,
  type ScheduleFireRecord,
  type ScheduleRecord,
  type StoreOps,
} from '../../store/index.ts';
import { accept } from './accept.ts';
import type { LifecycleContext } from './context.ts';
import type { IfBusy, RunOptions } from './types.ts';

/** What one attempt at the earliest due schedule did. */
export type Attempt =
  | { kind: 'none' }
  | { kind: 'done'; fire?: ScheduleFireRecord }
  | { kind: 'interrupt'; scheduleId: string; tick: number; sessionId: string }
  | { kind: 'failed'; scheduleId: string; tick: number; error: unknown };

/** Thrown inside a fire's transaction when another worker recorded the tick first: everything rolls back. */
export class TickTaken extends Error {}

/** Why a fire's error means its target session takes no message any more (the schedule pauses), or undefined. */
function targetGone(e: unknown): string | undefined {
  if (!(e instanceof StoreError)) return undefined;
  if (e.code === 'session_archived') return 'its target session is archived';
  if (e.code === 'session_erased') return 'its target session was erased';
  if (e instanceof NotFoundError && /^session /.test(e.message)) return 'its target session does not exist';
  return undefined;
}

/** How the scheduler fires: its time, its policies, and the schedule arithmetic (schedules.ts). */
export interface ScheduleFiring {
  now: number;
  /** The ticks whose session run was interrupted in this check: their next attempt enqueues. */
  interrupted: ReadonlySet<string>;
  /** A tick fired later than this after its time was missed: the catch-up policy decides. */
  missedAfterMs: number;
  runDefaults: RunOptions;
  /** The agent a schedule names (its default when null); throws when none is registered. */
  agentFor(spec: string | null): AgentDefinition;
  /** The latest tick of `s` at or before `now`, from its due tick `first`. */
  latestTick(s: ScheduleRecord, now: number, first: number): number;
  /** The first tick of `s` after `now` (null when there is none). */
  nextTick(s: ScheduleRecord, now: number): number | null;
  /** Told of the tick this transaction fires, before it fires it (a failure is recorded for it). */
  firing(tick: { scheduleId: string; tick: number }): void;
}

/** Takes the earliest due schedule (skipping those another worker is firing) and fires it, inside `tx`. */
export async function fireDueSchedule(tx: StoreOps, c: LifecycleContext, f: ScheduleFiring): Promise<Attempt> {
  const [s] = await tx.schedules.due(f.now, 1);
  if (!s || s.nextFireAt === null) return { kind: 'none' };
  const tick = f.latestTick(s, f.now, s.nextFireAt);
  f.firing({ scheduleId: s.id, tick });
  return fireTick(tx, c, f, s, tick);
}

/** One tick of one schedule, inside the fire's transaction. */
async function fireTick(
  tx: StoreOps,
  c: LifecycleContext,
  f: ScheduleFiring,
  s: ScheduleRecord,
  tick: number,
): Promise<Attempt> {
  const { now, interrupted } = f;
  const next = f.nextTick(s, now);
  const missed = now - tick > f.missedAfterMs;
  if (missed && s.catchUp === 'skip') {
    // Downtime: the missed ticks are not fired; the schedule goes on from now.
    await tx.schedules.update(s.id, { nextFireAt: next, updatedAt: now });
    return { kind: 'done' };
  }
  const record = async (
    f: Omit<ScheduleFireRecord, 'scheduleId' | 'tick' | 'firedAt'>,
    lastRunId?: string,
  ): Promise<Attempt> => {
    const fire: ScheduleFireRecord = { scheduleId: s.id, tick, firedAt: now, ...f };
    if (!(await tx.schedules.addFire(fire)))
      throw new TickTaken(`tick ${new Date(tick).toISOString()} of schedule ${s.id} has fired already`);
    await tx.schedules.update(s.id, {
      nextFireAt: next,
      lastTick: tick,
      updatedAt: now,
      ...(lastRunId ? { lastRunId } : {}),
    });
    return { kind: 'done', fire };
  };
  const agent = f.agentFor(s.agent);
  const options: RunOptions = { ...f.runDefaults };
  const message: UserMessage = userMessage(s.message as UserInput);
  const lateBy = missed ? ` (caught up ${Math.round((now - tick) / 1000)} s late)` : '';
  let sessionId: string;
  let ifBusy: IfBusy = 'reject';
  let reason: string | null = null;
  if ('sessionId' in s.target) {
    sessionId = s.target.sessionId;
    const active = await tx.runs.active(sessionId);
    if (active) {
      if (s.overlap === 'skip')
        return record({
          outcome: 'skipped',
          reason: `run ${active.id} of the session is still active`,
          runId: null,
          sessionId,
        });
      if (s.overlap === 'interrupt' && !interrupted.has(`${s.id}:${tick}`))
        return { kind: 'interrupt', scheduleId: s.id, tick, sessionId };
      // enqueue, or interrupt when a run is active again after the cancel: the message queues behind it.
      ifBusy = 'enqueue';
      reason = `queued behind run ${active.id}`;
    } else if (interrupted.has(`${s.id}:${tick}`)) {
      reason = 'interrupted the active run';
    }
  } else {
    // A new session per fire: nothing can be active in it, so overlap does not apply.
    const ns = s.target.newSession;
    sessionId = newId();
    const title = ns.title ?? `${s.name ?? `schedule ${s.id}`} @ ${new Date(tick).toISOString()}`;
    const metadata = { ...ns.metadata, scheduleId: s.id, scheduleTick: tick };
    const createdAt = Date.now();
    await tx.sessions.create({
      id: sessionId,
      tenant: s.tenant,
      createdAt,
      title,
      metadata,
      agent: agent.name,
      origin: null,
    });
    await c.log.append(
      sessionId,
      [
        {
          type: 'session/created',
          time: createdAt,
          data: { title, metadata: metadata as unknown as Record<string, never>, agent: agent.name, origin: null },
        },
      ],
      { tx },
    );
  }
  const accepted = await accept(tx, c, sessionId, message, agent, ifBusy, { options });
  await c.log.append(
    sessionId,
    [{ type: 'schedule/fired', data: { scheduleId: s.id, tick, runId: accepted.run.id } }],
    { tx },
  );
  return record(
    {
      outcome: 'fired',
      reason: reason || lateBy ? `${reason ?? ''}${lateBy}`.trim() : null,
      runId: accepted.run.id,
      sessionId,
    },
    accepted.run.id,
  );
}

/**
 * A tick that could not fire, inside `tx`: recorded `failed`. When its target session can take no
 * message any more (archived, erased, gone) the schedule pauses itself, saying why: one failed
 * fire, not one a tick. Otherwise (the agent is not registered, say) it goes on.
 */
export async function recordFailedFire(
  tx: StoreOps,
  scheduleId: string,
  tick: number,
  now: number,
  error: unknown,
  nextTick: ScheduleFiring['nextTick'],
): Promise<ScheduleFireRecord | undefined> {
  const s = await tx.schedules.get(scheduleId);
  if (!s || s.pausedAt !== null || s.nextFireAt === null || s.nextFireAt > now) return undefined;
  const fire: ScheduleFireRecord = {
    scheduleId,
    tick,
    firedAt: now,
    outcome: 'failed',
    reason: (error as Error).message ?? String(error),
    runId: null,
    sessionId: 'sessionId' in s.target ? s.target.sessionId : null,
  };
  // Another worker fired it (TickTaken): only move on.
  const recorded = error instanceof TickTaken ? false : await tx.schedules.addFire(fire);
  const gone = targetGone(error);
  await tx.schedules.update(
    scheduleId,
    gone
      ? {
          pausedAt: now,
          pausedReason: `${gone}: ${fire.reason}`,
          nextFireAt: null,
          lastTick: tick,
          updatedAt: now,
        }
      : { nextFireAt: nextTick(s, now), lastTick: tick, updatedAt: now },
  );
  return recorded ? fire : undefined;
}
