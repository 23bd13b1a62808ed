import type Database from 'better-sqlite3';
import { NotFoundError, StoreError } from '../port/index.ts';
import {
  SCHEDULE_COLUMNS,
  SCHEDULE_PATCH_COLUMNS,
  scheduleValues,
  toSchedule,
  toScheduleFire,
  type ScheduleFireRow,
  type ScheduleRow,
} from '../schedule-rows.ts';
import type { SyncOps } from './context.ts';

type ScheduleOps = Pick<
  SyncOps,
  | 'createSchedule'
  | 'getSchedule'
  | 'listSchedules'
  | 'updateSchedule'
  | 'deleteSchedule'
  | 'dueSchedules'
  | 'addScheduleFire'
  | 'listScheduleFires'
>;

/**
 * The schedule operations of the SQLite store (ADR-0016). A fire is exactly once because its row
 * is unique per (schedule, tick) and SQLite runs one write transaction at a time across processes:
 * the second fire of a tick finds the first's row (or the schedule moved on) and writes nothing.
 */
export function scheduleOperations(prepared: (sql: string) => Database.Statement): ScheduleOps {
  const insert = `INSERT INTO schedules (${SCHEDULE_COLUMNS.join(', ')}) VALUES (${SCHEDULE_COLUMNS.map(() => '?').join(', ')})`;
  const ops: ScheduleOps = {
    createSchedule: (s) => {
      try {
        prepared(insert).run(...scheduleValues(s));
      } catch (e) {
        if ((e as { code?: unknown }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
          throw new StoreError('conflict', `schedule ${s.id} already exists`, { cause: e });
        throw e;
      }
      return ops.getSchedule(s.id)!;
    },
    getSchedule: (id) => {
      const row = prepared('SELECT * FROM schedules WHERE id = ?').get(id) as ScheduleRow | undefined;
      return row ? toSchedule(row) : undefined;
    },
    // A tenant's from the index of them: `? IS NULL OR tenant = ?` would read every tenant's.
    listSchedules: (q) => {
      const where = [...(q.tenant !== undefined ? ['tenant = ?'] : []), ...(q.after !== undefined ? ['id > ?'] : [])];
      const args = [...(q.tenant !== undefined ? [q.tenant] : []), ...(q.after !== undefined ? [q.after] : [])];
      return (
        prepared(
          `SELECT * FROM schedules ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ?`,
        ).all(...args, Math.max(0, Math.floor(q.limit))) as ScheduleRow[]
      ).map(toSchedule);
    },
    updateSchedule: (id, patch) => {
      const sets: string[] = [];
      const args: unknown[] = [];
      for (const [k, v] of Object.entries(patch)) {
        const col = SCHEDULE_PATCH_COLUMNS[k as keyof typeof SCHEDULE_PATCH_COLUMNS];
        if (!col) throw new StoreError('invalid_patch', `schedules have no field ${k} to update`);
        if (v === undefined) continue;
        sets.push(`${col} = ?`);
        args.push(v);
      }
      const row = (
        sets.length
          ? prepared(`UPDATE schedules SET ${sets.join(', ')} WHERE id = ? RETURNING *`).get(...args, id)
          : prepared('SELECT * FROM schedules WHERE id = ?').get(id)
      ) as ScheduleRow | undefined;
      if (!row) throw new NotFoundError('schedule', id);
      return toSchedule(row);
    },
    deleteSchedule: (id) => {
      prepared('DELETE FROM schedule_fires WHERE schedule_id = ?').run(id);
      return prepared('DELETE FROM schedules WHERE id = ?').run(id).changes === 1;
    },
    dueSchedules: (now, limit) =>
      (
        prepared(
          'SELECT * FROM schedules WHERE next_fire_at <= ? AND paused_at IS NULL AND next_fire_at IS NOT NULL ORDER BY next_fire_at, id LIMIT ?',
        ).all(now, Math.max(0, Math.floor(limit))) as ScheduleRow[]
      ).map(toSchedule),
    addScheduleFire: (f) =>
      prepared(
        `INSERT INTO schedule_fires (schedule_id, tick, fired_at, outcome, reason, run_id, session_id) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (schedule_id, tick) DO NOTHING`,
      ).run(f.scheduleId, f.tick, f.firedAt, f.outcome, f.reason, f.runId, f.sessionId).changes === 1,
    listScheduleFires: (scheduleId, q) =>
      (
        prepared(
          'SELECT * FROM schedule_fires WHERE schedule_id = ? AND (? IS NULL OR tick < ?) ORDER BY tick DESC LIMIT ?',
        ).all(scheduleId, q.before ?? null, q.before ?? null, Math.max(0, Math.floor(q.limit))) as ScheduleFireRow[]
      ).map(toScheduleFire),
  };
  return ops;
}
