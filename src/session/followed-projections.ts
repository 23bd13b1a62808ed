import type { SessionEvent } from './event-types.ts';
import { linearTail } from './linear-tail.ts';
import { projectionKey, type ProjectionCache } from './projection-cache.ts';
import { fold, type Projection } from './projections/index.ts';

/**
 * Path projections this process keeps up to date with the events it commits, in its projection
 * cache: a session's state is started from nothing with the session's first event (seq 1, its
 * creation), and every later commit of the session that follows the state's seq is folded into it.
 * A read then finds the state as of the last seq and folds nothing (readProjection): the transcript
 * of a run this process executed costs no log read, where rebuilding it decoded the whole turn's
 * sealed row (~40 KB of JSON for 20 tool steps) and walked the path's entries.
 *
 * Only what is committed is folded (the log calls `committed` when it publishes). A state is left
 * as it is when a commit does not follow it (another process appended in between, or the state was
 * read at an older seq): a read folds the tail from the log then, as for any kept state. A commit
 * that leaves the state's path (a branch, a move of the leaf) drops it: the next read rebuilds the
 * path. Large tool results are folded whole, so projections that read them through the model's
 * view are not followed.
 */
export class FollowedProjections {
  private readonly followed: Array<Projection<unknown>> = [];
  private readonly cache: ProjectionCache;
  /** The keys of the last session committed to (a run commits to one session step after step). */
  private last: { sessionId: string; keys: string[] } | undefined;

  constructor(cache: ProjectionCache) {
    this.cache = cache;
  }

  follow<S>(p: Projection<S>): void {
    if (p.scope !== 'path' || !p.clone || p.payloads === 'model')
      throw new Error(
        `projection ${p.name}: only path projections that can be copied and read payloads whole are followed`,
      );
    this.followed.push(p as Projection<unknown>);
    this.last = undefined;
  }

  /** Events of one append of the session, committed (contiguous seqs). Never throws: a state it cannot fold is dropped. */
  committed(sessionId: string, events: readonly SessionEvent[]): void {
    if (this.followed.length === 0 || events.length === 0) return;
    const first = events[0]!.seq;
    if (this.last?.sessionId !== sessionId)
      this.last = { sessionId, keys: this.followed.map((p) => projectionKey(sessionId, p.name, p.version)) };
    const keys = this.last.keys;
    for (let i = 0; i < this.followed.length; i++) {
      const p = this.followed[i]!;
      const key = keys[i]!;
      const kept = this.cache.get(key);
      // Not kept: started only from the session's first event; kept: only a commit right after it.
      if (kept ? kept.asOfSeq !== first - 1 : first !== 1) continue;
      try {
        const extended = linearTail(kept ? kept.leafId : null, events);
        if (!extended) {
          this.cache.drop(key);
          continue;
        }
        // The cached state is the cache's own (a read folds a copy of it), so it is folded in place.
        const state = fold(p, extended.entries, kept ? kept.state : p.init());
        this.cache.keep(key, {
          asOfSeq: events.at(-1)!.seq,
          leafId: extended.leafId,
          state,
          storedSeq: kept?.storedSeq ?? 0,
          size: p.size?.(state) ?? 1,
        });
      } catch {
        this.cache.drop(key);
      }
    }
  }
}
