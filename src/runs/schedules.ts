/**
 * Schedules (ADR-0016): a message sent to a session (or to a new session) at each tick of a cron
 * expression in a time zone, or of an interval. Every worker's runtime checks for due schedules
 * (one indexed query on `next_fire_at`); a tick fires exactly once across workers and processes,
 * because its fire row (UNIQUE (schedule_id, tick)), the run it creates and the `schedule/fired`
 * event commit in one transaction.
 */
import { Cron } from 'croner';
import { newId, userMessage, type AgentDefinition, type UserInput } from '../core/index.ts';
import {
  NotFoundError,
  StoreError,
  type JsonObject,
  type RunRecord,
  type ScheduleCatchUp,
  type ScheduleFireRecord,
  type ScheduleOverlap,
  type ScheduleRecord,
  type ScheduleTarget,
  type Store,
} from '../store/index.ts';
import type { Attempt } from './lifecycle/fire-schedule.ts';
import type { RunLifecycle } from './lifecycle/run-lifecycle.ts';
import type { RunOptions } from './lifecycle/types.ts';
import { hasNul, isClosedStore, isStoreUnavailable, NUL_REFUSAL } from '../store/index.ts';
import type { Clock } from '../core/clock.ts';
import { WakeUp } from './wake-up.ts';
import { FieldValidationError } from './field-validation-error.ts';

/** The shortest interval (seconds): the scheduler looks for due schedules about once a second. */
export const MIN_INTERVAL_SECONDS = 1;
/** The longest interval (seconds): a year. Use a cron expression for anything rarer. */
export const MAX_INTERVAL_SECONDS = 366 * 24 * 3600;

export interface SchedulerOptions {
  /** How often a runtime with a worker looks for due schedules (default 1000 ms); `wake()` looks at once. */
  checkEveryMs?: number;
  /**
   * A tick fired later than this after its time was missed (the scheduler was down): the catch-up
   * policy decides whether it fires (`once`) or not (`skip`). Default 60 s.
   */
  missedAfterMs?: number;
  /** At most this many fires per check (default 100); the next check goes on. */
  batch?: number;
}

export interface CreateScheduleInput {
  /** Default `default`. */
  tenant?: string;
  name?: string;
  /** A cron expression (5 fields, or 6 with seconds) read in an IANA time zone (default UTC)… */
  cron?: { expression: string; timezone?: string };
  /** …or an interval from the schedule's creation, at least MIN_INTERVAL_SECONDS. */
  interval?: { seconds: number };
  /** The message each fire sends. */
  message: UserInput;
  /** One session (every fire goes to it), or a new session for each fire. */
  target: { sessionId: string } | { newSession: { title?: string; metadata?: JsonObject } };
  /** `name` or `name@version`; default: the runtime's default agent. */
  agent?: string;
  /** When the target session's run is still active at a tick (one-session targets only). Default `skip`. */
  overlap?: ScheduleOverlap;
  /** After downtime: the latest missed tick fires once (`once`, the default), or none (`skip`). */
  catchUp?: ScheduleCatchUp;
}

/** Bad input to a schedule: what is wrong, and with which field. */
export class ScheduleValidationError extends FieldValidationError {}

/** What the schedules need of the runtime. */
export interface SchedulesHost {
  readonly store: Store;
  readonly lifecycle: RunLifecycle;
  readonly clock: Clock;
  readonly defaultAgent: AgentDefinition;
  resolveAgent(name: string, version?: string): AgentDefinition | undefined;
  wake(): void;
  readonly runs: { cancel(id: string, o?: { graceMs?: number; reason?: string }): Promise<RunRecord> };
}

/** The pause reason of the schedules of a tenant whose sessions were erased. */
export { PAUSED_FOR_ERASED_TENANT } from '../store/index.ts';

function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

const cronOf = (c: { expression: string; timezone: string }): Cron =>
  new Cron(c.expression, { timezone: c.timezone, paused: true });

/** The first tick strictly after `t`, or null when there is none (a cron that never fires again). */
export function nextTickAfter(
  s: Pick<ScheduleRecord, 'cron' | 'intervalSeconds' | 'createdAt'>,
  t: number,
): number | null {
  if (s.intervalSeconds !== null) {
    const p = s.intervalSeconds * 1000;
    return s.createdAt + (Math.floor((t - s.createdAt) / p) + 1) * p;
  }
  const next = cronOf(s.cron!).nextRun(new Date(t));
  return next ? next.getTime() : null;
}

/** The latest tick at or before `now`, given that `first` (the stored next fire) is one and is due. */
function latestTickAtOrBefore(s: ScheduleRecord, now: number, first: number): number {
  if (s.intervalSeconds !== null) {
    const p = s.intervalSeconds * 1000;
    return Math.max(first, s.createdAt + Math.floor((now - s.createdAt) / p) * p);
  }
  let latest = first;
  // Walk forward a while (the usual case: a tick or two); after long downtime ask croner backwards.
  for (let i = 0; i < 1000; i++) {
    const n = nextTickAfter(s, latest);
    if (n === null || n > now) return latest;
    latest = n;
  }
  const [prev] = cronOf(s.cron!).previousRuns(1, new Date(now + 1));
  return prev && prev.getTime() <= now && prev.getTime() > latest ? prev.getTime() : latest;
}

/**
 * The schedules API (`rt.schedules`) and the scheduler: started with the runtime's first worker,
 * it checks for due schedules every `checkEveryMs` and at each `wake()`. `check()` does one check
 * (tests call it after moving their manual clock).
 */
export class Schedules {
  private readonly host: SchedulesHost;
  private readonly options: Required<SchedulerOptions>;
  private readonly runDefaults: RunOptions;
  private loopDone: Promise<void> | undefined;
  private stopping = false;
  private readonly wakeUp = new WakeUp();

  constructor(host: SchedulesHost, options: SchedulerOptions & { runDefaults?: RunOptions } = {}) {
    this.host = host;
    const { runDefaults, ...o } = options;
    this.runDefaults = runDefaults ?? {};
    this.options = { checkEveryMs: 1000, missedAfterMs: 60_000, batch: 100, ...o };
  }

  private get store(): Store {
    return this.host.store;
  }

  private now(): number {
    return this.host.clock.now();
  }

  /** The agent for `name` or `name@version`; `unknown_agent` when none is registered. */
  private agentFor(spec: string | null): AgentDefinition {
    if (spec === null) return this.host.defaultAgent;
    const [name, version] = spec.split('@') as [string, string | undefined];
    const agent = this.host.resolveAgent(name, version);
    if (!agent) throw new StoreError('unknown_agent', `no agent ${spec} is registered`);
    return agent;
  }

  /** Validates and stores a schedule; its first tick is the first after now. */
  async create(input: CreateScheduleInput): Promise<ScheduleRecord> {
    const i = input as Partial<CreateScheduleInput> & Record<string, unknown>;
    if (typeof i !== 'object' || i === null) throw new ScheduleValidationError('schedule', 'an object is required');
    const tenant = i.tenant ?? 'default';
    if (typeof tenant !== 'string' || tenant.length === 0)
      throw new ScheduleValidationError('tenant', 'a non-empty string is required');
    if (i.name !== undefined && (typeof i.name !== 'string' || i.name.length > 200))
      throw new ScheduleValidationError('name', 'a string of at most 200 characters is required');
    // Text the store keeps as text never holds NUL (see store/plain-text.ts).
    const plain = (field: string, v: unknown) => {
      if (typeof v === 'string' && hasNul(v)) throw new ScheduleValidationError(field, NUL_REFUSAL);
    };
    plain('tenant', tenant);
    plain('name', i.name);
    plain('agent', i.agent);
    plain('cron.expression', (i.cron as { expression?: unknown } | undefined)?.expression);
    plain('cron.timezone', (i.cron as { timezone?: unknown } | undefined)?.timezone);
    const t = i.target as { sessionId?: unknown; newSession?: { title?: unknown } } | undefined;
    plain('target.session_id', t?.sessionId);
    plain('target.new_session.title', t?.newSession?.title);
    if ((i.cron === undefined) === (i.interval === undefined))
      throw new ScheduleValidationError('cron', 'give exactly one of cron and interval');
    let cron: ScheduleRecord['cron'] = null;
    let intervalSeconds: number | null = null;
    if (i.cron !== undefined) {
      const { expression, timezone = 'UTC' } = i.cron ?? ({} as { expression?: unknown; timezone?: unknown });
      if (typeof expression !== 'string' || expression.trim() === '')
        throw new ScheduleValidationError('cron.expression', 'a cron expression is required');
      if (typeof timezone !== 'string' || !validTimeZone(timezone))
        throw new ScheduleValidationError(
          'cron.timezone',
          `unknown time zone ${JSON.stringify(timezone)} (an IANA name, e.g. Europe/Paris)`,
        );
      let c: Cron;
      try {
        c = cronOf({ expression, timezone });
      } catch (e) {
        throw new ScheduleValidationError(
          'cron.expression',
          `${JSON.stringify(expression)} is not a valid cron expression: ${(e as Error).message}`,
        );
      }
      const [a, b] = c.nextRuns(2, new Date(this.now()));
      if (!a) throw new ScheduleValidationError('cron.expression', `${JSON.stringify(expression)} never fires`);
      if (b && b.getTime() - a.getTime() < MIN_INTERVAL_SECONDS * 1000)
        throw new ScheduleValidationError('cron.expression', `fires more often than every ${MIN_INTERVAL_SECONDS} s`);
      cron = { expression, timezone };
    } else {
      const seconds = (i.interval as { seconds?: unknown } | null)?.seconds;
      if (
        typeof seconds !== 'number' ||
        !Number.isInteger(seconds) ||
        seconds < MIN_INTERVAL_SECONDS ||
        seconds > MAX_INTERVAL_SECONDS
      ) {
        throw new ScheduleValidationError(
          'interval.seconds',
          `a whole number of seconds from ${MIN_INTERVAL_SECONDS} to ${MAX_INTERVAL_SECONDS} is required`,
        );
      }
      intervalSeconds = seconds;
    }
    const message = i.message;
    const okMessage =
      (typeof message === 'string' && message.length > 0) || (Array.isArray(message) && message.length > 0);
    if (!okMessage)
      throw new ScheduleValidationError(
        'message',
        'a non-empty string or a non-empty array of content parts is required',
      );
    try {
      // What each fire would send, checked once here: a part no user message may hold would fail every fire.
      this.host.lifecycle.checkedMessage(userMessage(message as UserInput));
    } catch (e) {
      throw new ScheduleValidationError('message', (e as Error).message);
    }
    const overlap = i.overlap ?? 'skip';
    if (!['skip', 'enqueue', 'interrupt'].includes(overlap))
      throw new ScheduleValidationError('overlap', 'one of skip, enqueue, interrupt');
    const catchUp = i.catchUp ?? 'once';
    if (!['once', 'skip'].includes(catchUp)) throw new ScheduleValidationError('catch_up', 'one of once, skip');
    const agent = i.agent ?? null;
    if (agent !== null && typeof agent !== 'string')
      throw new ScheduleValidationError('agent', 'an agent name is required');
    this.agentFor(agent);
    const target = i.target as ScheduleTarget | undefined;
    if (!target || typeof target !== 'object' || 'sessionId' in target === 'newSession' in target) {
      throw new ScheduleValidationError(
        'target',
        'give exactly one of {sessionId} and {newSession: {title?, metadata?}}',
      );
    }
    if ('sessionId' in target) {
      const s = typeof target.sessionId === 'string' ? await this.store.sessions.get(target.sessionId) : undefined;
      if (!s || s.tenant !== tenant)
        throw new ScheduleValidationError('target.session_id', `session ${String(target.sessionId)} does not exist`);
      if (s.erasedAt !== null || s.archivedAt !== null)
        throw new ScheduleValidationError(
          'target.session_id',
          `session ${s.id} is ${s.erasedAt !== null ? 'erased' : 'archived'}: it takes no messages`,
        );
    } else {
      const ns = target.newSession as { title?: unknown; metadata?: unknown } | null;
      if (typeof ns !== 'object' || ns === null)
        throw new ScheduleValidationError('target.new_session', 'an object is required');
      if (ns.title !== undefined && typeof ns.title !== 'string')
        throw new ScheduleValidationError('target.new_session.title', 'a string is required');
      if (
        ns.metadata !== undefined &&
        (typeof ns.metadata !== 'object' || ns.metadata === null || Array.isArray(ns.metadata))
      ) {
        throw new ScheduleValidationError('target.new_session.metadata', 'an object is required');
      }
    }
    const now = this.now();
    const record: ScheduleRecord = {
      id: newId(),
      tenant,
      name: i.name ?? null,
      cron,
      intervalSeconds,
      message: message as unknown,
      target:
        'sessionId' in target
          ? { sessionId: target.sessionId }
          : {
              newSession: {
                ...(target.newSession.title !== undefined ? { title: target.newSession.title } : {}),
                ...(target.newSession.metadata ? { metadata: target.newSession.metadata } : {}),
              },
            },
      agent,
      overlap,
      catchUp,
      pausedAt: null,
      pausedReason: null,
      nextFireAt: null,
      lastTick: null,
      lastRunId: null,
      createdAt: now,
      updatedAt: now,
    };
    record.nextFireAt = nextTickAfter(record, now);
    const created = await this.store.schedules.create(record);
    this.wake();
    return created;
  }

  async get(id: string): Promise<ScheduleRecord> {
    const s = await this.store.schedules.get(id);
    if (!s) throw new NotFoundError('schedule', id);
    return s;
  }

  /** The schedule, or undefined. */
  find(id: string): Promise<ScheduleRecord | undefined> {
    return this.store.schedules.get(id);
  }

  list(q: { tenant?: string; after?: string; limit?: number } = {}): Promise<ScheduleRecord[]> {
    return this.store.schedules.list({ limit: 100, ...q });
  }

  /** No tick fires while paused (they are not caught up on resume). Pausing a paused schedule changes nothing. */
  async pause(id: string): Promise<ScheduleRecord> {
    const s = await this.get(id);
    if (s.pausedAt !== null) return s;
    const now = this.now();
    return this.store.schedules.update(id, { pausedAt: now, pausedReason: null, nextFireAt: null, updatedAt: now });
  }

  /** Resumes from now: the next tick is the first after now. Resuming a running schedule changes nothing. */
  async resume(id: string): Promise<ScheduleRecord> {
    const s = await this.get(id);
    if (s.pausedAt === null) return s;
    const now = this.now();
    const updated = await this.store.schedules.update(id, {
      pausedAt: null,
      pausedReason: null,
      nextFireAt: nextTickAfter(s, now),
      updatedAt: now,
    });
    this.wake();
    return updated;
  }

  /** Deletes the schedule and its history of fires (the runs and sessions it created stay). */
  async delete(id: string): Promise<void> {
    if (!(await this.store.schedules.delete(id))) throw new NotFoundError('schedule', id);
  }

  /** The schedule's fires, newest first. */
  async fires(id: string, q: { before?: number; limit?: number } = {}): Promise<ScheduleFireRecord[]> {
    await this.get(id);
    return this.store.schedules.listFires(id, { limit: 100, ...q });
  }

  /** Checks for due schedules now (the scheduler's loop calls it; tests too). Returns the fires recorded. */
  async check(): Promise<ScheduleFireRecord[]> {
    const now = this.now();
    const fires: ScheduleFireRecord[] = [];
    // Nothing due (the usual case): one indexed read, no write transaction.
    if ((await this.store.schedules.due(now, 1)).length === 0) return fires;
    // The ticks whose session run was interrupted in this check: their next attempt enqueues.
    const interrupted = new Set<string>();
    for (let i = 0; i < this.options.batch; i++) {
      let a: Attempt;
      try {
        a = await this.attempt(now, interrupted);
      } catch (e) {
        process.emitWarning(`keel scheduler: ${(e as Error).message}`);
        break;
      }
      if (a.kind === 'none') break;
      if (a.kind === 'done') {
        if (a.fire) fires.push(a.fire);
        continue;
      }
      if (a.kind === 'interrupt') {
        interrupted.add(`${a.scheduleId}:${a.tick}`);
        await this.interrupt(a.scheduleId, a.tick, a.sessionId);
        continue;
      }
      const fire = await this.recordFailure(a.scheduleId, a.tick, now, a.error);
      if (fire) fires.push(fire);
    }
    if (fires.some((f) => f.outcome === 'fired')) this.host.wake();
    return fires;
  }

  /** Takes the earliest due schedule (skipping those another worker is firing) and fires it, in one transaction. */
  private async attempt(now: number, interrupted: ReadonlySet<string>): Promise<Attempt> {
    let current: { scheduleId: string; tick: number } | undefined;
    try {
      return await this.host.lifecycle.fireDueSchedule({
        now,
        interrupted,
        missedAfterMs: this.options.missedAfterMs,
        runDefaults: this.runDefaults,
        agentFor: (spec) => this.agentFor(spec),
        latestTick: latestTickAtOrBefore,
        nextTick: nextTickAfter,
        firing: (tick) => (current = tick),
      });
    } catch (e) {
      if (!current) throw e;
      return { kind: 'failed', ...current, error: e };
    }
  }

  /**
   * `interrupt`: cancels the session's active run (outside the fire's transaction: a cancel waits
   * for the worker that holds the run), then the tick is tried again. The active run is read
   * before whether the tick fired meanwhile: a run another worker's fire of this tick created is
   * never the one cancelled.
   */
  private async interrupt(scheduleId: string, tick: number, sessionId: string): Promise<void> {
    const active = await this.store.runs.active(sessionId);
    const [last] = await this.store.schedules.listFires(scheduleId, { before: tick + 1, limit: 1 });
    if (last?.tick === tick || !active) return;
    await this.host.runs
      .cancel(active.id, { reason: `interrupted by schedule ${scheduleId}` })
      .catch((e: unknown) => process.emitWarning(`keel scheduler: cancel ${active.id}: ${(e as Error).message}`));
  }

  /**
   * A tick that could not fire: recorded `failed`. When its target session can take no message any
   * more (archived, erased, gone) the schedule pauses itself, saying why: one failed fire, not one
   * a tick. Otherwise (the agent is not registered, say) it goes on.
   */
  private async recordFailure(
    scheduleId: string,
    tick: number,
    now: number,
    error: unknown,
  ): Promise<ScheduleFireRecord | undefined> {
    try {
      return await this.host.lifecycle.recordFailedFire(scheduleId, tick, now, error, nextTickAfter);
    } catch (e) {
      process.emitWarning(`keel scheduler: schedule ${scheduleId}: ${(e as Error).message}`);
      return undefined;
    }
  }

  /** Starts the scheduler loop (idempotent): a check every `checkEveryMs`, and at each wake-up. */
  start(): void {
    if (this.loopDone) return;
    this.stopping = false;
    this.loopDone = this.loop();
  }

  /** Stops the loop after the check in progress. */
  async stop(): Promise<void> {
    if (!this.loopDone) return;
    this.stopping = true;
    this.wake();
    await this.loopDone;
    this.loopDone = undefined;
  }

  /** Checks at once (a schedule was created or resumed, or a test moved the clock). */
  wake(): void {
    this.wakeUp.wake();
  }

  private async loop(): Promise<void> {
    // Whether the last check found the database unavailable: an outage is told once (ADR-0045).
    let unavailable = false;
    while (!this.stopping) {
      try {
        await this.check();
        unavailable = false;
      } catch (e) {
        // A closed store stays closed: nothing more to check (the runtime was not closed first).
        if (isClosedStore(e)) break;
        if (!(unavailable && isStoreUnavailable(e))) process.emitWarning(`keel scheduler: ${(e as Error).message}`);
        unavailable = isStoreUnavailable(e);
      }
      if (this.stopping) break;
      // Waiting keeps no process alive: its workers do, while they run.
      await this.wakeUp.nap(this.options.checkEveryMs, { unref: true });
    }
  }
}
