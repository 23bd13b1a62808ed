/** Schedules (ADR-0016) and their fires. */
import type { JsonObject } from './json.ts';

export type ScheduleOverlap = 'skip' | 'enqueue' | 'interrupt';

export type ScheduleCatchUp = 'once' | 'skip';

export type ScheduleTarget = { sessionId: string } | { newSession: { title?: string | null; metadata?: JsonObject } };

/** A schedule: when it fires (cron with a time zone, or an interval), what it sends, and where. */
export interface ScheduleRecord {
  id: string;
  tenant: string;
  name: string | null;
  cron: { expression: string; timezone: string } | null;
  intervalSeconds: number | null;
  /** The message sent at each fire (a UserInput, as JSON). */
  message: unknown;
  target: ScheduleTarget;
  /** `name` or `name@version`; null: the runtime's default agent. */
  agent: string | null;
  overlap: ScheduleOverlap;
  catchUp: ScheduleCatchUp;
  pausedAt: number | null;
  /** Why Keel paused it by itself (its target session was archived or erased, its tenant's sessions were erased); null when a person paused it, or it runs. */
  pausedReason: string | null;
  /** The next tick (ms); null when paused or when the cron has no next time. */
  nextFireAt: number | null;
  /** The tick of the last fire (any outcome), and the run it created. */
  lastTick: number | null;
  lastRunId: string | null;
  createdAt: number;
  updatedAt: number;
}

export type SchedulePatch = Partial<
  Pick<ScheduleRecord, 'pausedAt' | 'pausedReason' | 'nextFireAt' | 'lastTick' | 'lastRunId' | 'updatedAt'>
>;

export interface ScheduleQuery {
  tenant?: string;
  /** Schedules with an id after this one (cursor). */
  after?: string;
  limit: number;
}

export interface ScheduleQuery {
  tenant?: string;
  /** Schedules with an id after this one (cursor). */
  after?: string;
  limit: number;
}

/** One tick of a schedule and what it did: a run (`fired`), nothing (`skipped`, with why), or an error (`failed`). */
export interface ScheduleFireRecord {
  scheduleId: string;
  tick: number;
  firedAt: number;
  outcome: 'fired' | 'skipped' | 'failed';
  reason: string | null;
  runId: string | null;
  sessionId: string | null;
}

/** The schedules namespace of the port (`store.schedules`). */
export interface ScheduleOps {
  /** Schedules (runs/schedules.ts, ADR-0016). `conflict` when the id exists. */
  create(s: ScheduleRecord): Promise<ScheduleRecord>;
  /** Inside a transaction, PostgreSQL locks the row until it ends (fires of one schedule take turns). */
  get(id: string): Promise<ScheduleRecord | undefined>;
  /** By id, after the cursor; only a tenant's when given. */
  list(q: ScheduleQuery): Promise<ScheduleRecord[]>;
  /** NotFoundError when there is no such schedule. */
  update(id: string, patch: SchedulePatch): Promise<ScheduleRecord>;
  /** Removes the schedule and its fires; false when it did not exist. */
  delete(id: string): Promise<boolean>;
  /**
   * Schedules not paused whose next fire is at or before `now`, earliest first, from the index on
   * `next_fire_at`. Inside a transaction, PostgreSQL locks them and skips those another transaction
   * holds (FOR UPDATE SKIP LOCKED): two workers never fire one schedule at once.
   */
  due(now: number, limit: number): Promise<ScheduleRecord[]>;
  /** Records a fire; false (and nothing written) when that tick of that schedule has one already (UNIQUE (schedule_id, tick)). */
  addFire(f: ScheduleFireRecord): Promise<boolean>;
  /** The schedule's fires, newest tick first, before the `before` tick when given. */
  listFires(scheduleId: string, q: { before?: number; limit: number }): Promise<ScheduleFireRecord[]>;
}
