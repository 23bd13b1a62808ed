/**
 * What the live side of the session log carries: committed events, deltas (their id is their feed
 * position, see feed-position.ts) and notices that another process committed. A feed (feed.ts)
 * yields the events and deltas as they are.
 */
import type { DeltaEvent } from '../core/index.ts';
import type { SessionEvent } from './event-types.ts';

/**
 * A delta's `id` is `seq.n`: the n-th delta after durable event `seq`, the latest of the session
 * that the process making the model call committed or heard of (another node's commit, by the
 * store's notice) before it; numbered there, once, so every node that relays it gives it the same id.
 */
export type LiveItem = { kind: 'event'; event: SessionEvent } | LiveDelta;
/** `fromAnotherNode`: the model call runs on another node, and its deltas come through the store. */
export type LiveDelta = { kind: 'delta'; delta: DeltaEvent; id: string; fromAnotherNode?: true };
/** What a follower of a session hears: an event or delta, or that another process committed to it. */
export type LiveChange = { kind: 'changed'; sessionId: string; upTo: number; own?: true };
/**
 * `changed`: another process committed to the session, up to seq `upTo`. A reader reads the log up
 * to there, not further: what was committed after may follow deltas still on their way. `own`:
 * the store's notice of commits that were all this process's, published already (a reader has them).
 */
export type LiveListener = (e: LiveItem | LiveChange) => void;
