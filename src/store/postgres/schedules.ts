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
import type { PgOps } from './context.ts';
import { sqlState, UNIQUE_VIOLATION } from './sql.ts';
import { hasNul } from '../plain-text.ts';

type ScheduleOps = Pick<
  PgOps,
  | 'createSchedule'
  | 'getSchedule'
  | 'listSchedules'
  | 'updateSchedule'
  | 'deleteSchedule'
  | 'dueSchedules'
  | 'addScheduleFire'
  | 'listScheduleFires'
>;

const INSERT = `INSERT INTO schedules (${SCHEDULE_COLUMNS.join(', ')}) VALUES (${SCHEDULE_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING *`;

/**
 * The schedule operations of the PostgreSQL store (ADR-0016). Inside a transaction a schedule read
 * is locked until the transaction ends, and due schedules are claimed with FOR UPDATE SKIP LOCKED:
 * two nodes never fire one schedule at once, and the UNIQUE (schedule_id, tick) of its fires makes
 * a second fire of one tick write nothing, whatever happens.
 */
export const scheduleOperations: ScheduleOps = {
  createSchedule: async ({ guarded }, s) => {
    try {
      return toSchedule((await guarded((q) => q.one<ScheduleRow>(INSERT, scheduleValues(s))))!);
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError('conflict', `schedule ${s.id} already exists`, { cause: e });
      throw e;
    }
  },

  getSchedule: async ({ sql, inTransaction }, id) => {
    // An id with NUL cannot be stored (plain-text.ts): not found, as on SQLite.
    if (hasNul(id)) return undefined;
    const row = await sql.one<ScheduleRow>(
      `SELECT * FROM schedules WHERE id = $1${inTransaction ? ' FOR UPDATE' : ''}`,
      [id],
    );
    return row ? toSchedule(row) : undefined;
  },

  // A tenant's from the index of them: a cached plan of `$1 IS NULL OR tenant = $1` would read every tenant's.
  listSchedules: async ({ sql }, q) => {
    const args: unknown[] = [];
    const where = [
      ...(q.tenant !== undefined ? [`tenant = $${args.push(q.tenant)}`] : []),
      ...(q.after !== undefined ? [`id > $${args.push(q.after)}`] : []),
    ];
    const text = `SELECT * FROM schedules ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT $${args.push(Math.max(0, Math.floor(q.limit)))}`;
    return (await sql.rows<ScheduleRow>(text, args)).map(toSchedule);
  },

  updateSchedule: async ({ sql }, id, patch) => {
    const sets: string[] = [];
    const args: unknown[] = [];
    for (const [k, v] of Object.entries(patch)) {
      const col = SCHEDULE_PATCH_COLUMNS[k as keyof typeof SCHEDULE_PATCH_COLUMNS];
      if (!col) throw new StoreError('invalid_patch', `schedules have no field ${k} to update`);
      if (v === undefined) continue;
      args.push(v);
      sets.push(`${col} = $${args.length}`);
    }
    args.push(id);
    const row = sets.length
      ? await sql.one<ScheduleRow>(
          `UPDATE schedules SET ${sets.join(', ')} WHERE id = $${args.length} RETURNING *`,
          args,
        )
      : await sql.one<ScheduleRow>('SELECT * FROM schedules WHERE id = $1', [id]);
    if (!row) throw new NotFoundError('schedule', id);
    return toSchedule(row);
  },

  deleteSchedule: ({ atomic }, id) =>
    atomic(async (q) => {
      await q.run('DELETE FROM schedule_fires WHERE schedule_id = $1', [id]);
      return (await q.run('DELETE FROM schedules WHERE id = $1', [id])) === 1;
    }),

  dueSchedules: async ({ sql, inTransaction }, now, limit) =>
    (
      await sql.rows<ScheduleRow>(
        `SELECT * FROM schedules WHERE next_fire_at <= $1 AND paused_at IS NULL AND next_fire_at IS NOT NULL ORDER BY next_fire_at, id LIMIT $2${inTransaction ? ' FOR UPDATE SKIP LOCKED' : ''}`,
        [now, Math.max(0, Math.floor(limit))],
      )
    ).map(toSchedule),

  // ON CONFLICT DO NOTHING: a concurrent insert of the same tick waits for the first to commit (or roll back), then writes nothing (or its row).
  addScheduleFire: async ({ sql }, f) =>
    (await sql.run(
      `INSERT INTO schedule_fires (schedule_id, tick, fired_at, outcome, reason, run_id, session_id) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (schedule_id, tick) DO NOTHING`,
      [f.scheduleId, f.tick, f.firedAt, f.outcome, f.reason, f.runId, f.sessionId],
    )) === 1,

  listScheduleFires: async ({ sql }, scheduleId, q) =>
    (
      await sql.rows<ScheduleFireRow>(
        'SELECT * FROM schedule_fires WHERE schedule_id = $1 AND ($2::bigint IS NULL OR tick < $2) ORDER BY tick DESC LIMIT $3',
        [scheduleId, q.before ?? null, Math.max(0, Math.floor(q.limit))],
      )
    ).map(toScheduleFire),
};
