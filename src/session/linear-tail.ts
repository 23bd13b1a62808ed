import type { SessionEvent } from './event-types.ts';

/**
 * The entries of `tail` (events in seq order after a path projection's state) that extend the path
 * ending at `leafId`, and the leaf they end at; undefined when the tail leaves that path (an entry
 * on another parent, or a move of the leaf elsewhere): the path has to be rebuilt then. What a
 * kept or snapshotted state can fold on its own (see readProjection and FollowedProjections).
 */
export function linearTail(
  leafId: string | null,
  tail: readonly SessionEvent[],
): { entries: SessionEvent[]; leafId: string | null } | undefined {
  let leaf = leafId;
  const entries: SessionEvent[] = [];
  for (const e of tail) {
    if (e.entry) {
      if ((e.parentId ?? null) !== leaf) return undefined;
      leaf = e.id;
      entries.push(e);
    } else if (e.type === 'leaf/move' && e.data.entryId !== leaf) {
      return undefined;
    }
  }
  return { entries, leafId: leaf };
}
