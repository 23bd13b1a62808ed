import type { SessionEvent } from '../event-types.ts';

/**
 * A projection is a deterministic fold over session events. `log` projections fold every event in
 * seq order; `path` projections fold the conversational entries on the current branch path, root
 * to leaf. `apply` may update the state in place (states are owned by the fold) and must depend on
 * nothing but the state and the event, so that snapshot + tail always equals a fold from scratch.
 * Bump `version` whenever the fold changes: snapshots of other versions are ignored.
 */
export interface Projection<S> {
  readonly name: string;
  readonly version: number;
  readonly scope: 'log' | 'path';
  /**
   * For path projections: fold from the root, or only from the first entry the latest compaction
   * on the path kept (enough for a projection whose compaction handling discards what is before).
   */
  readonly pathStart?: 'root' | 'latest-compaction';
  /**
   * `model`: large tool results are folded as the model sees them (the policy's view, ADR-0040),
   * not whole: a 50 MB result costs this projection its first bytes. Others read them whole.
   */
  readonly payloads?: 'model';
  init(): S;
  apply(state: S, event: SessionEvent): S;
  /**
   * A copy that folding more events into leaves the original as it was (for the in-memory copy of
   * the latest state a process keeps; see reader.ts). Projections without it are not kept.
   */
  clone?(state: S): S;
  /** How big the state is, in events' worth (snapshots are written about that often, see reader.ts). */
  size?(state: S): number;
}

export function fold<S>(p: Projection<S>, events: Iterable<SessionEvent>, state: S = p.init()): S {
  let s = state;
  for (const e of events) s = p.apply(s, e);
  return s;
}
