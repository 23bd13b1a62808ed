/**
 * The one live feed of a session: `follow` composes its parts: feed-queue.ts (the live items
 * waiting), feed-cursor.ts (what was yielded), feed-hold.ts (when to let deltas of another node
 * come first) and feed-reader.ts (its phases: the replay of the log, then the live items).
 */
import { FeedCursor } from './feed-cursor.ts';
import { DeltaHold } from './feed-hold.ts';
import { FeedQueue } from './feed-queue.ts';
import { FeedReader, type FeedReadOptions } from './feed-reader.ts';
import type { LiveItem } from './live-items.ts';
import type { SessionLog } from './log.ts';

export type { FeedReadOptions } from './feed-reader.ts';

/** What a feed yields: durable events (id: their seq) and token deltas (id: `seq.n`), as the log's live side carries them. */
export type FeedItem = LiveItem;

export interface FollowOptions extends FeedReadOptions {
  /**
   * How long to wait for deltas on their way from another node when the store cannot confirm that
   * its notices caught up (its connection for notices is down); default NOTICE_WAIT_MS.
   */
  noticeWaitMs?: number;
  /**
   * How long an event committed while another node's message streams waits for that node to
   * number its deltas past it, when the message neither goes on nor ends (its writer died, say);
   * default WRITER_WAIT_MS.
   */
  writerWaitMs?: number;
  /**
   * Backpressure: the items a consumer may leave waiting. One more and the feed overflows: it
   * calls `onOverflow` at once (a server drops the connection, even while a write to it is stuck)
   * and throws FeedOverflowError at the next read. The client resumes from the log.
   */
  queueLimit?: number;
  onOverflow?: () => void;
  /**
   * Called (and awaited) once the replay is over and the live items begin: what was yielded so far
   * is everything up to now. A consumer that folds the replay into one snapshot (an A2A
   * resubscription) sends it here. Not called when the feed ends with its replay (`isDone`).
   */
  onReplayed?: () => void | Promise<void>;
}

export { FeedOverflowError } from './feed-queue.ts';

export { NOTICE_WAIT_MS, WRITER_WAIT_MS } from './feed-hold.ts';

/**
 * The one live feed of a session (or of one run in it): what the log has after the cursor, with
 * the deltas of the message streaming now where a live reader got them, then live events and
 * deltas as they are committed and made, here or on other nodes. Every reader of live events uses
 * it: the SSE streams, the AI SDK chat stream, `runs.stream` and `runs.wait`.
 *
 * Guarantees: every durable event once, in seq order, without a gap (a gap in what arrives live is
 * filled from the log); a delta never before the event it follows, never twice, never after its
 * message's durable version; ids only grow. Live items wait in a queue bounded by `queueLimit`.
 *
 * Across nodes, a commit can be in the log before this node has heard the deltas streamed before
 * it (they come by another path, see `Store.broadcast`). While the deltas of another node's message
 * were yielded and its durable version was not, the feed does not read the log past what this node
 * has heard of (`SessionLog.deltasHeardUpTo`): the rest of the message's deltas come first, then
 * the notice of its commit. It waits until the store confirms that every notice committed before
 * the read has arrived (`SessionLog.noticesCaughtUp`), however long that takes: deltas that were
 * not among them were lost on the way (too big to relay, say), and the commit is read without them.
 * Only when no confirmation comes (the store's connection for notices is down) does it stop
 * waiting after `noticeWaitMs`.
 */
export async function* follow(
  log: SessionLog,
  sessionId: string,
  o: FollowOptions = {},
): AsyncGenerator<FeedItem, void, undefined> {
  const queue = new FeedQueue(o.queueLimit, o.onOverflow);
  // Subscribed before the log is read: nothing committed in between is missed.
  const off = log.subscribe(sessionId, (item) => {
    if (item.kind !== 'event' || o.runId === undefined || item.event.runId === o.runId) queue.push(item);
  });
  const onAbort = () => queue.wakeUp();
  o.signal?.addEventListener('abort', onAbort);
  const cursor = new FeedCursor(o.after);
  // How far the reader has heard is taken now, with the subscription (see DeltaHold.heard).
  const hold = new DeltaHold(log, sessionId, cursor, queue, o);
  // The deltas the node heard before the reader subscribed, taken now, with the subscription: the
  // node's recent deltas move on while the log is read (a delta of the next message drops those of
  // a message that became durable meanwhile), and what it hears from now on is in the queue. The
  // replay yields them after the events they follow; what it has not yielded goes ahead of the
  // queue. (Taken only after the reads, they once lost a message's first deltas whose later ones
  // then came from the queue: test/session/feed-resumed-mid-message.test.ts.)
  const recent = log.recentDeltas(sessionId).slice();
  const feed = new FeedReader(log, sessionId, o, queue, cursor, hold, recent);
  try {
    if (yield* feed.replay()) {
      await o.onReplayed?.();
      yield* feed.live();
    }
  } finally {
    off();
    o.signal?.removeEventListener('abort', onAbort);
  }
}
