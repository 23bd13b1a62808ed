/**
 * SQLite: the retention operations of the port (`store.retention`), synchronous, on the
 * connection's shared state. Moving a session to its archive deletes its log rows under the
 * erasure guard (`erased_logs`, ADR-0010) for the length of its transaction only. Each pruning
 * deletes a bounded batch in one short write transaction.
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
import { TERMINAL_SQL } from '../rows.ts';
import type { ArchivedSessionQuery, StoredRetentionPolicy } from '../port/index.ts';
import type { FlatOpsOf } from '../port/layout.ts';
import { idKey } from './id-keys.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

/** How each operation runs (see PLAN in store.ts). */
export const RETENTION_PLAN: {
  readonly [K in keyof FlatOpsOf<'retention'>]: {
    outside: 'serial' | 'write' | 'immediate' | 'autocommit';
    savepoint?: true;
  };
} = {
  idleSessions: { outside: 'serial' },
  // Reads the session's head and runs, then removes its log, under the write lock.
  moveToArchive: { outside: 'immediate', savepoint: true },
  archiveOf: { outside: 'serial' },
  listArchivedSessions: { outside: 'serial' },
  restoredFromArchive: { outside: 'write', savepoint: true },
  forgetArchive: { outside: 'autocommit' },
  pruneTable: { outside: 'immediate', savepoint: true },
  countPrunable: { outside: 'serial' },
  leadRetention: { outside: 'immediate' },
  resignRetention: { outside: 'autocommit' },
  getRetentionPolicy: { outside: 'serial' },
  listRetentionPolicies: { outside: 'serial' },
  putRetentionPolicy: { outside: 'write', savepoint: true },
  deleteRetentionPolicy: { outside: 'autocommit' },
};

type PolicyRow = { tenant: string; agent: string; policy: string; updated_at: number };
const toPolicy = (r: PolicyRow): StoredRetentionPolicy => ({
  tenant: r.tenant,
  agent: r.agent === '' ? null : r.agent,
  policy: JSON.parse(r.policy) as Record<string, unknown>,
  updatedAt: r.updated_at,
});

export function retentionOps(c: Shared): SyncOpsOf<'retention'> {
  const { db, st, knownRefs, openEntries, headOf, prepared } = c;
  const idle = db.prepare<unknown[], IdleSessionRow>(IDLE_SESSIONS_SQL);
  const session = db.prepare<[string], { erased_at: number | null; in_archive_at: number | null }>(
    'SELECT erased_at, in_archive_at FROM sessions WHERE id = ?',
  );
  const live = db.prepare<[string], { id: string }>(
    `SELECT id FROM runs WHERE session_id = ? AND status NOT IN (${TERMINAL_SQL}) LIMIT 1`,
  );
  const insertArchive = db.prepare(
    'INSERT OR REPLACE INTO session_archives (session_id, tenant, agent, store, key, bytes, events, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const markInArchive = db.prepare(
    'UPDATE sessions SET in_archive_at = ?, last_seq = 0, leaf_id = NULL, last_turn = 0, sealed_seq = 0 WHERE id = ?',
  );
  const unmark = db.prepare('UPDATE sessions SET in_archive_at = NULL, restored_at = ? WHERE id = ?');
  const unguard = db.prepare('DELETE FROM erased_logs WHERE session_id = ?');
  const archiveOf = db.prepare<[string], SessionArchiveRow>('SELECT * FROM session_archives WHERE session_id = ?');
  const forget = db.prepare('DELETE FROM session_archives WHERE session_id = ?');
  const lease = db.prepare(
    `INSERT INTO retention_leases (name, holder, expires_at) VALUES (?, ?, ?)
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
     WHERE retention_leases.holder = excluded.holder OR retention_leases.expires_at < ?`,
  );
  const resign = db.prepare('DELETE FROM retention_leases WHERE name = ? AND holder = ?');
  const getPolicy = db.prepare<[string, string], PolicyRow>(
    'SELECT * FROM retention_policies WHERE tenant = ? AND agent = ?',
  );
  const putPolicy = db.prepare(
    `INSERT INTO retention_policies (tenant, agent, policy, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (tenant, agent) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at`,
  );
  const deletePolicy = db.prepare('DELETE FROM retention_policies WHERE tenant = ? AND agent = ?');

  return {
    idleSessions: (q) => idle.all(...idleSessionsArgs(q)).map(toIdleSession),

    moveToArchive: (a) => {
      const row = session.get(a.sessionId);
      if (!row || row.erased_at !== null || row.in_archive_at !== null) return false;
      if (live.get(a.sessionId)) return false;
      const head = headOf(a.sessionId);
      if (!head || head.last_seq !== a.events) return false;
      knownRefs.forget(a.sessionId);
      openEntries.forget(a.sessionId);
      const key = idKey(a.sessionId);
      // The log's rows may go only under the erasure guard: listed for this transaction alone.
      st.markErasing.run(key);
      st.eraseBatches.run(key);
      st.eraseEntries.run(key);
      st.eraseSnapshots.run(a.sessionId);
      st.eraseOwnBlobs.run(key, key);
      st.eraseOwnBlobHeads.run(key, key);
      st.eraseBlobRefs.run(key);
      unguard.run(key);
      markInArchive.run(a.archivedAt, a.sessionId);
      insertArchive.run(a.sessionId, a.tenant, a.agent, a.store, a.key, a.bytes, a.events, a.archivedAt);
      return true;
    },

    archiveOf: (sessionId) => {
      const r = archiveOf.get(sessionId);
      return r ? toArchivedSession(r) : undefined;
    },

    listArchivedSessions: (q: ArchivedSessionQuery) => {
      const where = ['session_id > ?'];
      const args: unknown[] = [q.after ?? ''];
      const add = (condition: string, value: unknown) => {
        where.push(condition);
        args.push(value);
      };
      if (q.cutoff !== undefined) add('archived_at < ?', q.cutoff);
      if (q.tenant !== undefined) add('tenant = ?', q.tenant);
      if (q.agent !== undefined) add('agent = ?', q.agent);
      return (
        prepared(`SELECT * FROM session_archives WHERE ${where.join(' AND ')} ORDER BY session_id LIMIT ?`).all(
          ...args,
          q.limit,
        ) as SessionArchiveRow[]
      ).map(toArchivedSession);
    },

    restoredFromArchive: (sessionId, restoredAt) => {
      knownRefs.forget(sessionId);
      openEntries.forget(sessionId);
      unmark.run(restoredAt, sessionId);
      forget.run(sessionId);
    },

    forgetArchive: (sessionId) => {
      forget.run(sessionId);
    },

    pruneTable: (table, cutoff, limit) => {
      const p = PRUNE_SQL[table];
      const keys = prepared(p.select).all(cutoff, limit) as Array<Record<string, unknown>>;
      if (keys.length === 0) return 0;
      const match = p.key.map((k) => `${k} = ?`).join(' AND ');
      const del = prepared(`DELETE FROM ${p.table} WHERE ${match}`);
      const before = p.before?.split(':');
      const delBefore = before ? prepared(`DELETE FROM ${before[0]} WHERE ${before[1]} = ?`) : undefined;
      let n = 0;
      for (const k of keys) {
        const values = p.key.map((name) => k[name]);
        delBefore?.run(values[0]);
        n += del.run(...values).changes;
      }
      return n;
    },

    countPrunable: (table, cutoff, limit) =>
      (prepared(`SELECT count(*) AS n FROM (${PRUNE_SQL[table].select})`).get(cutoff, limit) as { n: number }).n,

    leadRetention: (name, holder, now, ttlMs) => {
      lease.run(name, holder, now + ttlMs, now);
      const r = db
        .prepare<[string], { holder: string }>('SELECT holder FROM retention_leases WHERE name = ?')
        .get(name);
      return r?.holder === holder;
    },

    resignRetention: (name, holder) => {
      resign.run(name, holder);
    },

    getRetentionPolicy: (tenant, agent) => {
      const r = getPolicy.get(tenant, agent ?? '');
      return r ? toPolicy(r) : undefined;
    },

    listRetentionPolicies: (tenant) =>
      (tenant === undefined
        ? (db.prepare('SELECT * FROM retention_policies ORDER BY tenant, agent').all() as PolicyRow[])
        : (db
            .prepare<[string], PolicyRow>('SELECT * FROM retention_policies WHERE tenant = ? ORDER BY agent')
            .all(tenant) as PolicyRow[])
      ).map(toPolicy),

    putRetentionPolicy: (p) => {
      putPolicy.run(p.tenant, p.agent ?? '', JSON.stringify(p.policy), p.updatedAt);
      return toPolicy(getPolicy.get(p.tenant, p.agent ?? '')!);
    },

    deleteRetentionPolicy: (tenant, agent) => deletePolicy.run(tenant, agent ?? '').changes > 0,
  };
}
