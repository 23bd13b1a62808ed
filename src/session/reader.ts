import type { PayloadModelView } from '../core/index.ts';
import type { StoreOps } from '../store/index.ts';
import type { SessionEvent } from './event-types.ts';
import type { SessionLog } from './log.ts';
import { linearTail } from './linear-tail.ts';
import { projectionKey, type KeptState } from './projection-cache.ts';
import { fold, type Projection } from './projections/index.ts';

const PAGE = 1000;
/** A path rebuilt from at least this many entries is stored at once (see readProjection). */
const REBUILD_WORTH_STORING = 64;

export interface ProjectionRead<S> {
  state: S;
  /** The state covers exactly the events up to this seq... */
  asOfSeq: number;
  /** ...on the path ending at this leaf. */
  leafId: string | null;
  /** How many events were folded for this read (the cost of the read). */
  folded: number;
}

/**
 * The entries on the path to `leafId`, root first. With `fromLatestCompaction` the walk stops at
 * the first kept entry of the latest compaction on the path (at the nearest message before it when
 * that entry is a tool result): everything before it is summarized, so the model context never
 * costs more than the path since that compaction.
 */
export async function pathEntries(
  log: SessionLog,
  sessionId: string,
  leafId: string | null,
  fromLatestCompaction: boolean,
  ops: StoreOps = log.store,
  payloads: PayloadModelView = 'whole',
): Promise<SessionEvent[]> {
  const nearestFirst: SessionEvent[] = [];
  let cursor = leafId;
  let stopAt: string | null | undefined;
  // A first kept entry that is a tool result: its later results are ordered by the calls of the
  // message before it, so the walk goes on to the nearest entry that starts a message of its own.
  let stopAtMessage = false;
  walk: while (cursor) {
    const batch = await log.decode(await ops.events.ancestors(sessionId, cursor, PAGE), ops, { payloads });
    if (batch.length === 0) break;
    for (const e of batch) {
      nearestFirst.push(e);
      if (!fromLatestCompaction) continue;
      if (stopAtMessage) {
        if (e.type === 'user/message' || e.type === 'assistant/message' || e.type === 'branch/summary') break walk;
      } else if (stopAt === undefined && e.type === 'compaction') {
        stopAt = e.data.firstKeptEntryId;
        if (stopAt === null) break walk;
      } else if (stopAt !== undefined && e.id === stopAt) {
        if (e.type !== 'tool/result') break walk;
        stopAtMessage = true;
      }
    }
    cursor = batch.at(-1)!.parentId ?? null;
  }
  return nearestFirst.reverse();
}

/**
 * Reads a projection: its latest state plus the events after it. The latest state is the copy
 * this process keeps in memory from its last read (for projections that can be copied cheaply,
 * like the model context: then a run's start costs the events since the last run, not the
 * history), or else the last snapshot. A path projection whose branch moved since is rebuilt from
 * the path instead. A new snapshot is written (state and asOfSeq in one row, so in one
 * transaction) once the events since the last one reach `snapshotEvery` or the state's own size,
 * whichever is more: so writing snapshots costs a constant amount per event however long the
 * history grows, and a cold read folds at most about as many events as the snapshot holds.
 */
export async function readProjection<S>(
  log: SessionLog,
  sessionId: string,
  p: Projection<S>,
  snapshotEvery: number,
  ops: StoreOps = log.store,
): Promise<ProjectionRead<S>> {
  const payloads = payloadsOf(log, p);
  // A state folded through a truncating view is stored and kept under a name of its own.
  const name = payloads === 'whole' ? p.name : `${p.name}~truncate-${payloads.truncateTo}`;
  const key = projectionKey(sessionId, name, p.version);
  const kept = p.clone ? (log.projections.get(key) as KeptState<S> | undefined) : undefined;
  // Without a state kept here, the stored snapshot is read with the session (one round trip).
  const snapshot = kept ? undefined : ops.events.getSnapshot(sessionId, name, p.version);
  snapshot?.catch(() => {});
  const session = await log.session(sessionId, ops);
  const lastSeq = session.lastSeq;
  let from: { asOfSeq: number; leafId: string | null; state: S } | undefined;
  let storedSeq = 0;
  if (kept && kept.asOfSeq <= lastSeq) {
    from = { asOfSeq: kept.asOfSeq, leafId: kept.leafId, state: p.clone!(kept.state) };
    storedSeq = kept.storedSeq;
  } else {
    const snap = await (snapshot ?? ops.events.getSnapshot(sessionId, name, p.version));
    if (snap && snap.asOfSeq <= lastSeq) {
      from = { asOfSeq: snap.asOfSeq, leafId: snap.leafId, state: snap.state as S };
      storedSeq = snap.asOfSeq;
    }
  }
  let state = from ? from.state : p.init();
  let folded = 0;
  // A rebuilt path costs the path's length to fold again: keep it even before snapshotEvery.
  let mustSnapshot = false;

  if (p.scope === 'log') {
    for (let after = from?.asOfSeq ?? 0; after < lastSeq;) {
      const page = await log.read(sessionId, { afterSeq: after, untilSeq: lastSeq, limit: PAGE, payloads }, ops);
      if (page.length === 0) break;
      state = fold(p, page, state);
      folded += page.length;
      after = page.at(-1)!.seq;
    }
  } else {
    let linear = from !== undefined;
    if (from) {
      // A state as of the last seq (kept up to date by this process's commits, FollowedProjections) reads nothing.
      const tail =
        from.asOfSeq < lastSeq
          ? await log.read(sessionId, { afterSeq: from.asOfSeq, untilSeq: lastSeq, payloads }, ops)
          : [];
      const extended = linearTail(from.leafId, tail);
      // A move the scan could not see (an event type this reader skips) still moved the leaf.
      if (!extended || extended.leafId !== session.leafId) linear = false;
      else {
        state = fold(p, extended.entries, state);
        folded = tail.length;
      }
    }
    if (!linear) {
      const path = await pathEntries(
        log,
        sessionId,
        session.leafId,
        p.pathStart === 'latest-compaction',
        ops,
        payloads,
      );
      state = fold(p, path, p.init());
      folded = path.length;
      // Worth storing unless it is short (a new session's first read is not).
      mustSnapshot = folded >= Math.min(snapshotEvery, REBUILD_WORTH_STORING);
    }
  }

  if (mustSnapshot || lastSeq - storedSeq >= Math.max(snapshotEvery, p.size?.(state) ?? 0)) {
    await ops.events.putSnapshot({
      sessionId,
      projection: name,
      version: p.version,
      asOfSeq: lastSeq,
      leafId: session.leafId,
      state,
    });
    storedSeq = lastSeq;
  }
  // Only what is committed is kept: a read inside a transaction may see writes that roll back.
  if (p.clone && ops === log.store)
    log.projections.keep(key, {
      asOfSeq: lastSeq,
      leafId: session.leafId,
      state: p.clone(state),
      storedSeq,
      size: p.size?.(state) ?? 1,
    });
  return { state, asOfSeq: lastSeq, leafId: session.leafId, folded };
}

/** How a projection reads large tool results: the model's view for those that fold what the model sees, else whole. */
export function payloadsOf(log: SessionLog, p: Projection<unknown>): PayloadModelView {
  return p.payloads === 'model' ? log.payloads.modelView : 'whole';
}

export type { KeptState } from './projection-cache.ts';
