/**
 * PostgreSQL: the retention operations of the port (`store.retention`). Moving a session to its
 * archive locks its row, then deletes its log under the erasure guard (`erased_logs`, ADR-0010)
 * for the length of its transaction only. Each pruning deletes a bounded batch in one short
 * transaction.
 */
import {
  IDLE_SESSIONS_SQL,
  idleSessionsArgs,
  PRUNE_SQL,
  toArchivedSession,
  toIdleSession,
  type IdleSessionRow,
  type SessionArchiveRow,
} from '../retention-rows.ts';
import type { StoredRetentionPolicy } from '../port/index.ts';
import { TERMINAL } from './shared.ts';
import type { PgOpsOf } from './context.ts';

/** `?` placeholders as PostgreSQL's `$1`, `$2`, … */
const numbered = (sql: string, from = 1): string => {
  let n = from - 1;
  return sql.replace(/\?/g, () => `$${++n}`);
};

const IDLE = numbered(IDLE_SESSIONS_SQL)
  .replace('$1', '$1::bigint')
  .replace('($3 IS NULL', '($3::text IS NULL')
  .replace('($5 IS NULL', '($5::text IS NULL');

type PolicyRow = { tenant: string; agent: string; policy: string; updated_at: number | string };
const toPolicy = (r: PolicyRow): StoredRetentionPolicy => ({
  tenant: r.tenant,
  agent: r.agent === '' ? null : r.agent,
  policy: JSON.parse(r.policy) as Record<string, unknown>,
  updatedAt: Number(r.updated_at),
});

export const pgRetentionOps: PgOpsOf<'retention'> = {
  idleSessions: async ({ sql }, q) => (await sql.rows<IdleSessionRow>(IDLE, idleSessionsArgs(q))).map(toIdleSession),

  moveToArchive: ({ atomic }, a) =>
    atomic(async (q) => {
      const row = await q.one<{ last_seq: number | string; erased_at: unknown; in_archive_at: unknown }>(
        'SELECT last_seq, erased_at, in_archive_at FROM sessions WHERE id = $1 FOR UPDATE',
        [a.sessionId],
      );
      if (!row || row.erased_at !== null || row.in_archive_at !== null) return false;
      if (Number(row.last_seq) !== a.events) return false;
      const live = await q.one(`SELECT 1 FROM runs WHERE session_id = $1 AND status NOT IN (${TERMINAL}) LIMIT 1`, [
        a.sessionId,
      ]);
      if (live) return false;
      // The log's rows may go only under the erasure guard: listed for this transaction alone.
      await q.run('INSERT INTO erased_logs (session_id) VALUES ($1) ON CONFLICT DO NOTHING', [a.sessionId]);
      await q.run('DELETE FROM events WHERE session_id = $1', [a.sessionId]);
      await q.run('DELETE FROM snapshots WHERE session_id = $1', [a.sessionId]);
      await q.run(
        'DELETE FROM blobs WHERE hash IN (SELECT hash FROM blob_refs WHERE session_id = $1) AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blobs.hash AND r.session_id <> $1)',
        [a.sessionId],
      );
      // Their kept heads too (ADR-0040): the archive holds the payloads whole.
      await q.run(
        'DELETE FROM blob_heads WHERE hash IN (SELECT hash FROM blob_refs WHERE session_id = $1) AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blob_heads.hash AND r.session_id <> $1)',
        [a.sessionId],
      );
      await q.run('DELETE FROM blob_refs WHERE session_id = $1', [a.sessionId]);
      await q.run('DELETE FROM erased_logs WHERE session_id = $1', [a.sessionId]);
      await q.run('UPDATE sessions SET in_archive_at = $2, last_seq = 0, leaf_id = NULL, last_turn = 0 WHERE id = $1', [
        a.sessionId,
        a.archivedAt,
      ]);
      await q.run(
        `INSERT INTO session_archives (session_id, tenant, agent, store, key, bytes, events, archived_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (session_id) DO UPDATE SET tenant = $2, agent = $3, store = $4, key = $5, bytes = $6, events = $7, archived_at = $8`,
        [a.sessionId, a.tenant, a.agent, a.store, a.key, a.bytes, a.events, a.archivedAt],
      );
      return true;
    }),

  archiveOf: async ({ sql }, sessionId) => {
    const r = await sql.one<SessionArchiveRow>('SELECT * FROM session_archives WHERE session_id = $1', [sessionId]);
    return r ? toArchivedSession(r) : undefined;
  },

  listArchivedSessions: async ({ sql }, q) => {
    const args: unknown[] = [q.after ?? ''];
    const where = ['session_id > $1'];
    const add = (column: string, op: string, value: unknown) => {
      args.push(value);
      where.push(`${column} ${op} $${args.length}`);
    };
    if (q.cutoff !== undefined) add('archived_at', '<', q.cutoff);
    if (q.tenant !== undefined) add('tenant', '=', q.tenant);
    if (q.agent !== undefined) add('agent', '=', q.agent);
    args.push(q.limit);
    return (
      await sql.rows<SessionArchiveRow>(
        `SELECT * FROM session_archives WHERE ${where.join(' AND ')} ORDER BY session_id LIMIT $${args.length}`,
        args,
      )
    ).map(toArchivedSession);
  },

  restoredFromArchive: ({ atomic }, sessionId, restoredAt) =>
    atomic(async (q) => {
      await q.run('UPDATE sessions SET in_archive_at = NULL, restored_at = $2 WHERE id = $1', [sessionId, restoredAt]);
      await q.run('DELETE FROM session_archives WHERE session_id = $1', [sessionId]);
    }),

  forgetArchive: async ({ sql }, sessionId) => {
    await sql.run('DELETE FROM session_archives WHERE session_id = $1', [sessionId]);
  },

  pruneTable: ({ atomic }, table, cutoff, limit) =>
    atomic(async (q) => {
      const p = PRUNE_SQL[table];
      const keys = await q.rows<Record<string, unknown>>(numbered(p.select), [cutoff, limit]);
      if (keys.length === 0) return 0;
      const before = p.before?.split(':');
      let n = 0;
      for (const k of keys) {
        const values = p.key.map((name) => k[name]);
        if (before) await q.run(`DELETE FROM ${before[0]} WHERE ${before[1]} = $1`, [values[0]]);
        n += await q.run(
          `DELETE FROM ${p.table} WHERE ${p.key.map((c, i) => `${c} = $${i + 1}`).join(' AND ')}`,
          values,
        );
      }
      return n;
    }),

  countPrunable: async ({ sql }, table, cutoff, limit) =>
    Number(
      (await sql.one<{ n: string }>(`SELECT count(*) AS n FROM (${numbered(PRUNE_SQL[table].select)}) AS t`, [
        cutoff,
        limit,
      ]))!.n,
    ),

  leadRetention: async ({ sql }, name, holder, now, ttlMs) => {
    const r = await sql.one<{ holder: string }>(
      `INSERT INTO retention_leases AS l (name, holder, expires_at) VALUES ($1, $2, $3)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE l.holder = excluded.holder OR l.expires_at < $4
       RETURNING holder`,
      [name, holder, now + ttlMs, now],
    );
    return r?.holder === holder;
  },

  resignRetention: async ({ sql }, name, holder) => {
    await sql.run('DELETE FROM retention_leases WHERE name = $1 AND holder = $2', [name, holder]);
  },

  getRetentionPolicy: async ({ sql }, tenant, agent) => {
    const r = await sql.one<PolicyRow>('SELECT * FROM retention_policies WHERE tenant = $1 AND agent = $2', [
      tenant,
      agent ?? '',
    ]);
    return r ? toPolicy(r) : undefined;
  },

  listRetentionPolicies: async ({ sql }, tenant) =>
    (tenant === undefined
      ? await sql.rows<PolicyRow>('SELECT * FROM retention_policies ORDER BY tenant, agent')
      : await sql.rows<PolicyRow>('SELECT * FROM retention_policies WHERE tenant = $1 ORDER BY agent', [tenant])
    ).map(toPolicy),

  putRetentionPolicy: async ({ sql }, p) =>
    toPolicy(
      (await sql.one<PolicyRow>(
        `INSERT INTO retention_policies (tenant, agent, policy, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant, agent) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at
         RETURNING *`,
        [p.tenant, p.agent ?? '', JSON.stringify(p.policy), p.updatedAt],
      ))!,
    ),

  deleteRetentionPolicy: async ({ sql }, tenant, agent) =>
    (await sql.run('DELETE FROM retention_policies WHERE tenant = $1 AND agent = $2', [tenant, agent ?? ''])) > 0,
};
