/** SQLite: the events operations of the port (`store.events`), synchronous, on the connection's shared state. */
import { NotFoundError, type StoredEvent } from '../port/index.ts';
import { decodeBatch } from './event-batch-codec.ts';
import { idKey } from './id-keys.ts';
import { limitOf } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function eventOps(c: Shared): SyncOpsOf<'events'> {
  const { st, openEntriesOf, headOf, sealOpenRows, append, eventsAt } = c;
  return {
    append: append,
    readEvents: (sessionId, o = {}) => {
      const limit = o.limit === undefined || o.limit < 0 ? Infinity : limitOf(o.limit);
      let after = o.afterSeq ?? 0;
      const until = o.untilSeq ?? Number.MAX_SAFE_INTEGER;
      if (o.runId !== undefined) {
        // A run's events all follow its first one (see the runs table's first_seq).
        const first = st.runFirstSeq.get(o.runId)?.first_seq;
        if (first !== undefined && first !== null) after = Math.max(after, first - 1);
      }
      const out: StoredEvent[] = [];
      if (limit === 0 || after >= until) return out;
      for (const b of st.readBatches.iterate({ session: idKey(sessionId), from: after + 1, until })) {
        for (const e of decodeBatch(sessionId, b.first_seq, b.codec, b.data)) {
          if (e.seq <= after || e.seq > until || (o.runId !== undefined && e.runId !== o.runId)) continue;
          out.push(e);
          if (out.length >= limit) return out;
        }
      }
      return out;
    },
    getEntries: (sessionId, ids) => {
      const head = headOf(sessionId);
      if (!head) return [];
      const sessionKey = idKey(sessionId);
      const open = openEntriesOf(sessionId, head);
      const seqs: number[] = [];
      for (const id of ids) {
        const seq = open.get(id)?.seq ?? st.getEntry.get(idKey(id), sessionKey)?.seq;
        if (seq !== undefined) seqs.push(seq);
      }
      return eventsAt(sessionId, seqs);
    },
    ancestors: (sessionId, fromId, limit) => {
      const head = headOf(sessionId);
      if (!head) return [];
      // Nearest first: through the open rows' entries, then (from the first indexed one) in `entries`.
      const open = openEntriesOf(sessionId, head);
      const seqs: number[] = [];
      let id: string | null = fromId;
      for (let e = open.get(id); e && seqs.length < limit; e = id === null ? undefined : open.get(id)) {
        seqs.push(e.seq);
        id = e.parent;
      }
      if (id !== null && seqs.length < limit) {
        for (const r of st.ancestors.all({ session: idKey(sessionId), from: idKey(id), limit: limit - seqs.length }))
          seqs.push(r.seq);
      }
      return eventsAt(sessionId, seqs);
    },
    sealEvents: (sessionId) => {
      const s = headOf(sessionId);
      if (!s) throw new NotFoundError('session', sessionId);
      const sealed = sealOpenRows(sessionId, idKey(sessionId), s.sealed_seq, s.last_seq, openEntriesOf(sessionId, s));
      // The open rows that carried the head are gone: it goes into the sessions row (ADR-0026).
      if (sealed !== s.sealed_seq) st.setHead.run(s.last_seq, s.leaf_id, s.last_turn, sealed, sessionId);
    },
    putBlobs: (blobs) => {
      const now = Date.now();
      for (const b of blobs) st.putBlob.run(b.hash, b.data, Buffer.byteLength(b.data), now);
    },
    getBlobs: (hashes) => {
      const out = new Map<string, string>();
      for (const h of hashes) {
        const row = st.getBlob.get(h);
        if (row) out.set(h, row.data);
      }
      return out;
    },
    putSnapshot: (s) => {
      st.putSnapshot.run({
        session_id: s.sessionId,
        projection: s.projection,
        version: s.version,
        as_of_seq: s.asOfSeq,
        leaf_id: s.leafId,
        state: JSON.stringify(s.state),
        created_at: Date.now(),
      });
    },
    getSnapshot: (sessionId, projection, version) => {
      const row = st.getSnapshot.get(sessionId, projection, version);
      return row
        ? {
            sessionId,
            projection,
            version,
            asOfSeq: row.as_of_seq,
            leafId: row.leaf_id,
            state: JSON.parse(row.state) as unknown,
          }
        : undefined;
    },
  };
}
