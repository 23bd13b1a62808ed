/** PostgreSQL: the sessions operations of the port (`store.sessions`). */
import { PAUSED_FOR_ERASED_SESSION } from '../schedule-rows.ts';
import { NotFoundError, RunBusyError, StoreError } from '../port/index.ts';
import { hasNul } from '../plain-text.ts';
import { erasedTotals } from '../records.ts';
import { toSession, type SessionRow } from '../rows.ts';
import { sqlState, UNIQUE_VIOLATION } from './sql.ts';
import { TERMINAL, specJson, limitOf, sessionRow } from './shared.ts';
import type { PgOpsOf } from './context.ts';

export const pgSessionsOps: PgOpsOf<'sessions'> = {
  createSession: async ({ guarded }, s) => {
    try {
      const row = await guarded((q) =>
        q.one<SessionRow>(
          `INSERT INTO sessions (id, tenant, created_at, title, metadata, agent, origin_session_id, origin_entry_id)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
          [
            s.id,
            s.tenant ?? 'default',
            s.createdAt,
            s.title ?? null,
            JSON.stringify(s.metadata ?? {}),
            s.agent ?? null,
            s.origin?.sessionId ?? null,
            s.origin?.entryId ?? null,
          ],
        ),
      );
      return toSession(row!);
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError('conflict', `session ${s.id} already exists`, { cause: e });
      throw e;
    }
  },

  /** Inside a transaction the session is read FOR UPDATE, as a run is (see getRun): decisions made on it (is a run active?) hold until commit. */
  // An id with NUL cannot be stored (plain-text.ts), so nothing has one: not found, as on SQLite.
  getSession: async ({ sql, inTransaction }, id) => {
    if (hasNul(id)) return undefined;
    const row = await sql.one<SessionRow>(`SELECT * FROM sessions WHERE id = $1${inTransaction ? ' FOR UPDATE' : ''}`, [
      id,
    ]);
    return row ? toSession(row) : undefined;
  },

  // A tenant's sessions from the index of them (a cached plan of `$3 IS NULL OR tenant = $3` would
  // read every tenant's sessions in id order).
  listSessions: async ({ sql }, page) =>
    (page.tenant !== undefined
      ? await sql.rows<SessionRow>(
          'SELECT * FROM sessions WHERE tenant = $1 AND id > $2 AND (archived_at IS NULL OR $3) ORDER BY id LIMIT $4',
          [page.tenant, page.after ?? '', page.includeArchived === true, limitOf(page.limit)],
        )
      : await sql.rows<SessionRow>(
          'SELECT * FROM sessions WHERE id > $1 AND (archived_at IS NULL OR $2) ORDER BY id LIMIT $3',
          [page.after ?? '', page.includeArchived === true, limitOf(page.limit)],
        )
    ).map(toSession),

  updateSession: async ({ sql }, id, patch) => {
    const n = await sql.run(
      `UPDATE sessions SET title = CASE WHEN $2 THEN $3 ELSE title END, metadata = CASE WHEN $4 THEN $5 ELSE metadata END,
                           archived_at = CASE WHEN $6 THEN $7::bigint ELSE archived_at END
       WHERE id = $1`,
      [
        id,
        patch.title !== undefined,
        patch.title ?? null,
        patch.metadata !== undefined,
        patch.metadata !== undefined ? JSON.stringify(patch.metadata) : null,
        patch.archivedAt !== undefined,
        patch.archivedAt ?? null,
      ],
    );
    if (n === 0) throw new NotFoundError('session', id);
  },

  eraseSession: ({ atomic }, sessionId, erasedAt) =>
    atomic(async (q) => {
      const row = await sessionRow(q, sessionId, true);
      if (row.erased_at !== null) return toSession(row);
      const live = await q.one<{ id: string }>(
        `SELECT id FROM runs WHERE session_id = $1 AND status NOT IN (${TERMINAL}) LIMIT 1`,
        [sessionId],
      );
      if (live) throw new RunBusyError(sessionId, live.id);
      const totals = erasedTotals(
        await q.rows<{ usage: string; cost: number }>('SELECT usage, cost FROM runs WHERE session_id = $1', [
          sessionId,
        ]),
      );
      // The schedules that target it take no message from now on: paused, saying why (they keep its
      // id, as its tombstone does). First: a tick being recorded holds its schedule's row (without
      // the session's, when it skips), so this waits for it to commit, and the delete of the
      // session's fires below sees its row.
      await q.run(
        "UPDATE schedules SET paused_at = coalesce(paused_at, $2), paused_reason = $3, next_fire_at = NULL, updated_at = $2 WHERE (target::jsonb ->> 'sessionId') = $1",
        [sessionId, erasedAt, PAUSED_FOR_ERASED_SESSION],
      );
      await q.run('INSERT INTO erased_logs (session_id) VALUES ($1) ON CONFLICT DO NOTHING', [sessionId]);
      await q.run('DELETE FROM events WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM snapshots WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM run_checkpoints WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1)', [
        sessionId,
      ]);
      await q.run('DELETE FROM run_inputs WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM run_signals WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1)', [sessionId]);
      await q.run('DELETE FROM run_callbacks WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1)', [sessionId]);
      await q.run(
        'DELETE FROM schedule_fires WHERE session_id = $1 OR run_id IN (SELECT id FROM runs WHERE session_id = $1)',
        [sessionId],
      );
      // The model stays, for billing (usageTotals groups by it).
      await q.run(
        `UPDATE runs SET agent_spec = CASE WHEN ${specJson('agent_spec')} ? 'model' THEN jsonb_build_object('model', ${specJson('agent_spec')} -> 'model')::text ELSE '{}' END,
                         options = '{}', error = NULL, waiting = NULL, trigger_message_id = NULL, parent_tool_call_id = NULL WHERE session_id = $1`,
        [sessionId],
      );
      await q.run(
        'DELETE FROM blobs WHERE hash IN (SELECT hash FROM blob_refs WHERE session_id = $1) AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blobs.hash AND r.session_id <> $1)',
        [sessionId],
      );
      await q.run(
        'DELETE FROM blob_heads WHERE hash IN (SELECT hash FROM blob_refs WHERE session_id = $1) AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blob_heads.hash AND r.session_id <> $1)',
        [sessionId],
      );
      await q.run('DELETE FROM blob_refs WHERE session_id = $1', [sessionId]);
      await q.run('DELETE FROM idempotency_keys WHERE strpos(body, $1) > 0', [sessionId]);
      // The session's webhook deliveries (their bodies describe its runs), their attempts first.
      await q.run(
        'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE session_id = $1)',
        [sessionId],
      );
      await q.run('DELETE FROM webhook_deliveries WHERE session_id = $1', [sessionId]);
      // Its runs' own subscriptions (A2A push notification configs: a URL and credentials the client gave).
      await q.run('DELETE FROM webhooks WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1)', [sessionId]);
      // The dataset items and batch items copied from it (issue 40). A batch whose unfinished items
      // were all its is completed: nothing would finish it once they are gone. Its row is locked
      // after its items, oldest batch first, before its items are counted, as a finish does (batches.ts).
      await q.run('DELETE FROM dataset_items WHERE source_session_id = $1', [sessionId]);
      const touched = await q.rows<{ batch_id: string }>(
        'WITH gone AS (DELETE FROM batch_items WHERE source_session_id = $1 RETURNING batch_id) SELECT DISTINCT batch_id FROM gone',
        [sessionId],
      );
      if (touched.length > 0) {
        const batchIds = touched.map((r) => r.batch_id);
        await q.rows(
          "SELECT id FROM batches WHERE id = ANY($1::text[]) AND status = 'running' ORDER BY created_at, id FOR UPDATE",
          [batchIds],
        );
        await q.run(
          `UPDATE batches b SET status = 'completed', ended_at = $2
           WHERE b.id = ANY($1::text[]) AND b.status = 'running'
             AND NOT EXISTS (SELECT 1 FROM batch_items i WHERE i.status IN ('pending', 'running') AND i.batch_id = b.id)`,
          [batchIds, erasedAt],
        );
      }
      // What other rows say of it (ADR-0041): their links to it go, so that a scan finds it only in its tombstone.
      await q.run(
        'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE session_id IS NULL AND strpos(body, $1) > 0)',
        [sessionId],
      );
      await q.run('DELETE FROM webhook_deliveries WHERE session_id IS NULL AND strpos(body, $1) > 0', [sessionId]);
      await q.run('UPDATE sessions SET origin_session_id = NULL, origin_entry_id = NULL WHERE origin_session_id = $1', [
        sessionId,
      ]);
      await q.run(
        'UPDATE runs SET rerun_of = NULL WHERE session_id <> $1 AND rerun_of IN (SELECT id FROM runs WHERE session_id = $1)',
        [sessionId],
      );
      await q.run(
        'UPDATE schedules SET last_run_id = NULL WHERE last_run_id IN (SELECT id FROM runs WHERE session_id = $1)',
        [sessionId],
      );
      await q.run(
        `UPDATE batch_items SET result = NULL, error = NULL, run_id = NULL
         WHERE run_id IN (SELECT id FROM runs WHERE session_id = $1) AND status IN ('done', 'failed')`,
        [sessionId],
      );
      // A dataset made of its runs lists them in its source: they leave the list.
      await q.run(
        `UPDATE datasets SET source = jsonb_set(source::jsonb, '{runs}', coalesce((
           SELECT jsonb_agg(v) FROM jsonb_array_elements_text(source::jsonb -> 'runs') v
           WHERE v NOT IN (SELECT id FROM runs WHERE session_id = $1)), '[]'::jsonb))::text
         WHERE jsonb_typeof(source::jsonb -> 'runs') = 'array'
           AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(source::jsonb -> 'runs') v WHERE v IN (SELECT id FROM runs WHERE session_id = $1))`,
        [sessionId],
      );
      const tomb = await q.one<SessionRow>(
        "UPDATE sessions SET title = NULL, metadata = '{}', agent = NULL, leaf_id = NULL, origin_session_id = NULL, origin_entry_id = NULL, erased_at = $2, erased_totals = $3 WHERE id = $1 RETURNING *",
        [sessionId, erasedAt, JSON.stringify(totals)],
      );
      return toSession(tomb!);
    }),
};
