/** SQLite: the sessions operations of the port (`store.sessions`), synchronous, on the connection's shared state. */
import { PAUSED_FOR_ERASED_SESSION } from '../schedule-rows.ts';
import { RunBusyError } from '../port/index.ts';
import { erasedTotals } from '../records.ts';
import { idKey } from './id-keys.ts';
import { toSession } from '../rows.ts';
import { NO_OPEN_HEAD, guard, withSecureDelete } from './shared.ts';
import type { Shared } from './shared.ts';
import type { SyncOpsOf } from './context.ts';

export function sessionOps(c: Shared): SyncOpsOf<'sessions'> {
  const { db, st, knownRefs, openEntries, withOpenHead, headOf, sessionRow } = c;
  return {
    createSession: (s) => {
      guard(`session ${s.id} already exists`, () =>
        st.insertSession.run({
          id: s.id,
          tenant: s.tenant ?? 'default',
          created_at: s.createdAt,
          title: s.title ?? null,
          metadata: JSON.stringify(s.metadata ?? {}),
          agent: s.agent ?? null,
          origin_session_id: s.origin?.sessionId ?? null,
          origin_entry_id: s.origin?.entryId ?? null,
        }),
      );
      return toSession(sessionRow(s.id));
    },
    getSession: (id) => {
      const row = st.getSession.get(idKey(id), id);
      return row ? toSession(withOpenHead(row)) : undefined;
    },
    listSessions: (page) =>
      (page.tenant !== undefined
        ? st.listTenantSessions.all(page.tenant, page.after ?? '', page.includeArchived ? 1 : 0, page.limit)
        : st.listSessions.all(page.after ?? '', page.includeArchived ? 1 : 0, page.limit)
      ).map((r) => toSession(withOpenHead({ ...r, ...(st.openHead.get(idKey(r.id), r.last_seq) ?? NO_OPEN_HEAD) }))),
    updateSession: (id, patch) => {
      const row = sessionRow(id);
      st.updateSession.run(
        patch.title !== undefined ? patch.title : row.title,
        patch.metadata !== undefined ? JSON.stringify(patch.metadata) : row.metadata,
        patch.archivedAt !== undefined ? patch.archivedAt : row.archived_at,
        id,
      );
    },
    eraseSession: (sessionId, erasedAt) => {
      knownRefs.forget(sessionId);
      openEntries.forget(sessionId);
      const row = sessionRow(sessionId);
      if (row.erased_at !== null) return toSession(row);
      const live = st.liveRun.get(sessionId);
      if (live) throw new RunBusyError(sessionId, live.id);
      // What it consumed stays, for billing.
      const totals = erasedTotals(st.runsOfSession.all(sessionId));
      // Its pages are overwritten with zeros as they are freed, not left in the file (ADR-0041).
      return withSecureDelete(db, () => {
        const key = idKey(sessionId);
        // The head into the sessions row before the open rows that carry it go (its last seq stays).
        const head = headOf(sessionId)!;
        st.setHead.run(head.last_seq, head.leaf_id, head.last_turn, head.sealed_seq, sessionId);
        st.markErasing.run(key);
        st.eraseBatches.run(key);
        st.eraseEntries.run(key);
        st.eraseSnapshots.run(sessionId);
        st.eraseCheckpoints.run(sessionId);
        st.eraseInputs.run(sessionId);
        st.eraseSignals.run(sessionId);
        st.eraseCallbacks.run(sessionId);
        st.eraseScheduleFires.run(sessionId, sessionId);
        st.pauseTargetSchedules.run(erasedAt, PAUSED_FOR_ERASED_SESSION, erasedAt, sessionId);
        st.scrubRuns.run(sessionId);
        st.eraseOwnBlobs.run(key, key);
        st.eraseOwnBlobHeads.run(key, key);
        st.eraseBlobRefs.run(key);
        st.eraseIdempotency.run(sessionId);
        st.eraseWebhookAttempts.run(sessionId);
        st.eraseWebhookDeliveries.run(sessionId);
        st.eraseRunWebhooks.run(sessionId);
        st.eraseDatasetItems.run(sessionId);
        st.completeBatchesLeftDone.run(erasedAt, sessionId, sessionId);
        st.eraseBatchItems.run(sessionId);
        st.eraseLooseWebhookAttempts.run(sessionId);
        st.eraseLooseWebhookDeliveries.run(sessionId);
        st.unlinkForks.run(sessionId);
        st.unlinkReruns.run(sessionId, sessionId);
        st.unlinkScheduleRuns.run(sessionId);
        st.scrubBatchItemResults.run(sessionId);
        st.unlinkDatasetSources.run(sessionId, sessionId);
        st.tombstone.run(erasedAt, JSON.stringify(totals), sessionId);
        return toSession(sessionRow(sessionId));
      });
    },
  };
}
