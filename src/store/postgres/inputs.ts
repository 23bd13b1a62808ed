/** PostgreSQL: the inputs operations of the port (`store.inputs`). */
import { toInput, type InputRow } from '../rows.ts';
import { limitOf, TERMINAL } from './shared.ts';
import type { PgOpsOf } from './context.ts';

export const pgInputsOps: PgOpsOf<'inputs'> = {
  addInput: async ({ sql }, i) => {
    await sql.run(
      'INSERT INTO run_inputs (id, session_id, kind, run_id, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
      [i.id, i.sessionId, i.kind, i.runId, JSON.stringify(i.payload), i.createdAt],
    );
  },

  /**
   * Taken once: the rows are locked, then deleted, in one statement; a concurrent take waits and
   * finds them gone. `unlessEnded`: only while the run has no final status (as this transaction
   * sees it: after its own read of the run, FOR UPDATE, which holds it).
   */
  takeInputs: async ({ sql }, sessionId, kind, runId, limit = 1000, options) => {
    const unlessEnded = options?.unlessEnded === true && typeof runId === 'string';
    const rows = await sql.rows<InputRow>(
      `DELETE FROM run_inputs WHERE id IN (
         SELECT id FROM run_inputs WHERE session_id = $1 AND kind = $2 AND (NOT $3 OR run_id IS NOT DISTINCT FROM $4)
           AND (NOT $6 OR EXISTS (SELECT 1 FROM runs WHERE id = $4 AND status NOT IN (${TERMINAL})))
         ORDER BY created_at, id LIMIT $5 FOR UPDATE)
       RETURNING *`,
      [sessionId, kind, runId !== undefined, runId ?? null, limitOf(limit), unlessEnded],
    );
    return rows.sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map(toInput);
  },

  listInputs: async ({ sql }, sessionId, kind, runId, limit = 1000) =>
    (
      await sql.rows<InputRow>(
        'SELECT * FROM run_inputs WHERE session_id = $1 AND kind = $2 AND (NOT $3 OR run_id IS NOT DISTINCT FROM $4) ORDER BY created_at, id LIMIT $5',
        [sessionId, kind, runId !== undefined, runId ?? null, limitOf(limit)],
      )
    ).map(toInput),

  removeInput: async ({ sql }, id) => (await sql.run('DELETE FROM run_inputs WHERE id = $1', [id])) === 1,

  countInputs: async ({ sql }, sessionId, kind) =>
    (await sql.one<{ n: number }>('SELECT count(*)::bigint AS n FROM run_inputs WHERE session_id = $1 AND kind = $2', [
      sessionId,
      kind,
    ]))!.n,
};
