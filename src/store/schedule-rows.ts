/**
 * Schedules as the SQL backends store them (tables `schedules` and `schedule_fires`: SQLite schema
 * v11, PostgreSQL v6), their mapping to the port's records, and the DDL both share.
 */
import type { ScheduleFireRecord, ScheduleRecord, ScheduleTarget } from './port/index.ts';

export type ScheduleRow = {
  id: string;
  tenant: string;
  name: string | null;
  cron_expression: string | null;
  cron_timezone: string | null;
  interval_seconds: number | null;
  message: string;
  target: string;
  agent: string | null;
  overlap: ScheduleRecord['overlap'];
  catch_up: ScheduleRecord['catchUp'];
  paused_at: number | null;
  paused_reason: string | null;
  next_fire_at: number | null;
  last_tick: number | null;
  last_run_id: string | null;
  created_at: number;
  updated_at: number;
};

export type ScheduleFireRow = {
  schedule_id: string;
  tick: number;
  fired_at: number;
  outcome: ScheduleFireRecord['outcome'];
  reason: string | null;
  run_id: string | null;
  session_id: string | null;
};

export const SCHEDULE_COLUMNS = [
  'id',
  'tenant',
  'name',
  'cron_expression',
  'cron_timezone',
  'interval_seconds',
  'message',
  'target',
  'agent',
  'overlap',
  'catch_up',
  'paused_at',
  'paused_reason',
  'next_fire_at',
  'last_tick',
  'last_run_id',
  'created_at',
  'updated_at',
] as const;

export const toSchedule = (r: ScheduleRow): ScheduleRecord => ({
  id: r.id,
  tenant: r.tenant,
  name: r.name,
  cron: r.cron_expression !== null ? { expression: r.cron_expression, timezone: r.cron_timezone ?? 'UTC' } : null,
  intervalSeconds: r.interval_seconds === null ? null : Number(r.interval_seconds),
  message: JSON.parse(r.message) as unknown,
  target: JSON.parse(r.target) as ScheduleTarget,
  agent: r.agent,
  overlap: r.overlap,
  catchUp: r.catch_up,
  pausedAt: r.paused_at === null ? null : Number(r.paused_at),
  pausedReason: r.paused_reason ?? null,
  nextFireAt: r.next_fire_at === null ? null : Number(r.next_fire_at),
  lastTick: r.last_tick === null ? null : Number(r.last_tick),
  lastRunId: r.last_run_id,
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
});

/** The row's values, in SCHEDULE_COLUMNS order. */
export const scheduleValues = (s: ScheduleRecord): unknown[] => [
  s.id,
  s.tenant,
  s.name,
  s.cron?.expression ?? null,
  s.cron?.timezone ?? null,
  s.intervalSeconds,
  JSON.stringify(s.message ?? null),
  JSON.stringify(s.target),
  s.agent,
  s.overlap,
  s.catchUp,
  s.pausedAt,
  s.pausedReason,
  s.nextFireAt,
  s.lastTick,
  s.lastRunId,
  s.createdAt,
  s.updatedAt,
];

export const toScheduleFire = (r: ScheduleFireRow): ScheduleFireRecord => ({
  scheduleId: r.schedule_id,
  tick: Number(r.tick),
  firedAt: Number(r.fired_at),
  outcome: r.outcome,
  reason: r.reason,
  runId: r.run_id,
  sessionId: r.session_id,
});

/** Why the schedules that target a session are paused when the session is erased (in the erasure's transaction). */
export const PAUSED_FOR_ERASED_SESSION = 'its target session was erased';

/** Why a tenant's schedules are paused when its sessions are erased (before they go). */
export const PAUSED_FOR_ERASED_TENANT = "its tenant's sessions were erased";

/** The columns a SchedulePatch sets, by field. */
export const SCHEDULE_PATCH_COLUMNS = {
  pausedAt: 'paused_at',
  pausedReason: 'paused_reason',
  nextFireAt: 'next_fire_at',
  lastTick: 'last_tick',
  lastRunId: 'last_run_id',
  updatedAt: 'updated_at',
} as const;

/** The DDL of both backends; `int` is the 64-bit integer type (INTEGER in SQLite, BIGINT in PostgreSQL). */
export const schedulesDdl = (int: string): string => `
  CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT,
    cron_expression TEXT,
    cron_timezone TEXT,
    interval_seconds ${int},
    message TEXT NOT NULL,
    target TEXT NOT NULL,
    agent TEXT,
    overlap TEXT NOT NULL CHECK (overlap IN ('skip', 'enqueue', 'interrupt')),
    catch_up TEXT NOT NULL CHECK (catch_up IN ('once', 'skip')),
    paused_at ${int},
    next_fire_at ${int},
    last_tick ${int},
    last_run_id TEXT,
    created_at ${int} NOT NULL,
    updated_at ${int} NOT NULL
  );
  -- A check for due schedules reads this index only: never a scan of all schedules.
  CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE paused_at IS NULL AND next_fire_at IS NOT NULL;
  CREATE INDEX schedules_tenant ON schedules (tenant, id);
  -- One fire per tick: a second worker's insert for the same tick finds this row and writes nothing.
  CREATE TABLE schedule_fires (
    schedule_id TEXT NOT NULL,
    tick ${int} NOT NULL,
    fired_at ${int} NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('fired', 'skipped', 'failed')),
    reason TEXT,
    run_id TEXT,
    session_id TEXT,
    UNIQUE (schedule_id, tick)
  );
`;
