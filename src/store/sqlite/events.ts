/** SQLite: the events operations of the port (`store.events`), synchronous, on the connection's shared state. */
import {
  BLOB_HEAD_CHARS,
  keptHead,
  NotFoundError,
  type StoredEvent,
  FencedError,
  SeqConflictError,
  StoreError,
  type AppendOptions,
  type BlobInfo,
  type EventDraft,
  type NewBlob,
} from '../port/index.ts';
import { decodeBatch, encodeOpen, OPEN_CODEC } from './event-batch-codec.ts';
import { idKey, type IdKey } from './id-keys.ts';
import { limitOf, SEAL_AT } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';
import { blobHashesIn } from '../blob-refs.ts';
import { storedEvent } from '../records.ts';
import { type At } from './session-heads.ts';
import { type OpenEntrySet, type TreeEntry } from './open-entries.ts';

export function eventOps(c: Shared): SyncOpsOf<'events'> {
  const { st, openEntriesOf, headOf, sealOpenRows, hooks, knownRefs, heads, openEntries, withOpenHead } = c;

  /** Whether the session has this entry: among its open rows' or indexed. */
  const hasEntry = (sessionKey: IdKey, open: OpenEntrySet, id: string): boolean =>
    open.has(id) || st.getEntry.get(idKey(id), sessionKey) !== undefined;

  const putBlobs = (blobs: readonly NewBlob[]): void => {
    const now = Date.now();
    for (const b of blobs) {
      st.putBlob.run(b.hash, b.data, Buffer.byteLength(b.data), now, b.mediaType ?? null, b.encoding ?? null);
      if (b.mediaType !== undefined && b.data.length > BLOB_HEAD_CHARS) st.putBlobHead.run(b.hash, keptHead(b.data));
    }
  };

  /** The returned events' `data` is the draft's own object, not a copy: the caller owns the drafts. */
  const append = (sessionId: string, drafts: readonly EventDraft[], options: AppendOptions = {}): StoredEvent[] => {
    const { expectLastSeq, fence, blobs } = options;
    if (blobs && blobs.length > 0) putBlobs(blobs);
    const sessionKey = idKey(sessionId);
    // A fenced append reads its run's token with its session's head; the fence is checked first.
    let s;
    let at: At | undefined;
    if (fence) {
      // The head this run's last append left, when nothing can have changed it since; else read.
      at = heads.now();
      let head = heads.lookup(sessionId, fence.runId, at);
      if (!head) {
        const row = st.fencedSessionHead.get(fence.runId, sessionKey, sessionId);
        head = row && withOpenHead(row);
      }
      const token = head ? head.fencing_token : (st.fenceOf.get(fence.runId)?.fencing_token ?? null);
      if (token !== fence.token) throw new FencedError(fence.runId, fence.token, token ?? undefined);
      s = head;
    } else s = headOf(sessionId);
    if (!s) throw new NotFoundError('session', sessionId);
    if (s.erased_at !== null)
      throw new StoreError('session_erased', `session ${sessionId} was erased: its log takes nothing more`);
    if (expectLastSeq !== undefined && s.last_seq !== expectLastSeq)
      throw new SeqConflictError(sessionId, expectLastSeq, s.last_seq);
    const open = openEntriesOf(sessionId, s);
    let seq = s.last_seq;
    let leaf = s.leaf_id;
    let lastTurn = 0;
    const out: StoredEvent[] = [];
    const added = new Map<string, TreeEntry>();
    for (const d of drafts) {
      seq++;
      if (d.turn !== undefined && d.turn > lastTurn) lastTurn = d.turn;
      let parent: string | null = null;
      if (d.entry) {
        parent = d.parentId !== undefined ? d.parentId : leaf;
        // The tree never spans sessions (an explicit parent is checked; the leaf always belongs).
        if (d.parentId && !added.has(d.parentId) && !hasEntry(sessionKey, open, d.parentId)) {
          throw new StoreError(
            'invalid_parent',
            `event ${d.id}: parent ${d.parentId} is not an entry of session ${sessionId}`,
          );
        }
        // Entry ids are unique in their session (one lookup per id: `id IN (?, ?)` measured dearer
        // than two). An id minted for this draft cannot be taken: not looked up.
        if (added.has(d.id) || (!d.minted && hasEntry(sessionKey, open, d.id)))
          throw new StoreError('conflict', `event ${d.id} already exists`);
        added.set(d.id, { seq, parent });
        leaf = d.id;
      } else if (d.leaf !== undefined) {
        leaf = d.leaf;
      }
      out.push(storedEvent(d, sessionId, seq, parent));
    }
    if (out.length === 0) return out;
    // The session's open entries after this append (indexed in `entries` at the seal).
    const entries = added.size > 0 ? open.with(added, seq) : open;
    const json = encodeOpen(out);
    // The row carries the session's head after it: the sessions row is not written (ADR-0026).
    const turn = Math.max(s.last_turn, lastTurn);
    st.insertOpenRow.run(sessionKey, out[0]!.seq, seq, OPEN_CODEC, json, leaf, turn);
    // Which blobs the session refers to, for erasure: in the append's own transaction, once per
    // session and blob (the pairs known are learnt when their commit is done: a rollback undoes
    // them, and erasure would then miss a reference).
    for (const hash of blobHashesIn(json)) {
      if (knownRefs.has(sessionId, hash)) continue;
      st.insertBlobRef.run(sessionKey, hash);
      hooks.whenCommitted(() => knownRefs.add(sessionId, hash));
    }
    const sealed =
      seq - s.sealed_seq >= SEAL_AT ? sealOpenRows(sessionId, sessionKey, s.sealed_seq, seq, entries) : s.sealed_seq;
    // Sealed: no open row is left to carry the head.
    if (sealed !== s.sealed_seq) st.setHead.run(seq, leaf, turn, sealed, sessionId);
    if (fence && at) {
      const known = heads.learn(
        sessionId,
        fence.runId,
        {
          last_seq: seq,
          leaf_id: leaf,
          last_turn: turn,
          sealed_seq: sealed,
          erased_at: null,
          fencing_token: fence.token,
        },
        at,
      );
      hooks.whenCommitted(() => heads.keep(known));
    }
    openEntries.wrote(sessionId, seq, sealed, entries);
    if (sealed !== seq) hooks.whenCommitted(() => openEntries.keep(sessionId, seq, sealed, entries));
    return out;
  };

  /** The events at these seqs of a session, in the order given; each batch is decoded once. */
  const eventsAt = (sessionId: string, seqs: readonly number[]): StoredEvent[] => {
    const sessionKey = idKey(sessionId);
    const decoded = new Map<number, StoredEvent[]>();
    let last: StoredEvent[] | undefined;
    const out: StoredEvent[] = [];
    for (const seq of seqs) {
      if (!last || seq < last[0]!.seq || seq > last.at(-1)!.seq) {
        const row = st.batchAt.get(sessionKey, seq);
        if (!row) throw new StoreError('corrupt_log', `session ${sessionId}: no stored batch holds seq ${seq}`);
        last = decoded.get(row.first_seq);
        if (!last) decoded.set(row.first_seq, (last = decodeBatch(sessionId, row.first_seq, row.codec, row.data)));
      }
      const e = last[seq - last[0]!.seq];
      if (!e) throw new StoreError('corrupt_log', `session ${sessionId}: no stored batch holds seq ${seq}`);
      out.push(e);
    }
    return out;
  };

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
    putBlobs,
    blobInfo: (hashes) => {
      const out = new Map<string, BlobInfo>();
      for (const hash of hashes) {
        const row = st.blobInfo.get(hash);
        if (row)
          out.set(hash, {
            hash,
            size: row.size,
            mediaType: row.media_type,
            encoding: row.encoding === 'base64' ? 'base64' : null,
          });
      }
      return out;
    },
    blobHead: (hash, chars) => {
      const n = Math.max(0, Math.floor(chars));
      return ((n <= BLOB_HEAD_CHARS ? st.blobHeadKept.get(n, hash) : undefined) ?? st.blobHead.get(n, hash))?.head;
    },
    blobTenant: (hash, tenant) => st.blobTenant.get(hash, tenant) !== undefined,
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
