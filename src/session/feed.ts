/**
 * The one live feed of a session: `follow` composes the parts of feed-queue.ts (the live items
 * waiting), feed-cursor.ts (what was yielded) and feed-hold.ts (when to let deltas of another node
 * come first) into its three phases: the replay of the log, what the replay left, and the live items.
 */
import type { SessionEvent } from './event-types.ts';
import { FeedCursor } from './feed-cursor.ts';
import { DeltaHold } from './feed-hold.ts';
import { parsePosition, type FeedPosition } from './feed-position.ts';
import { FeedQueue } from './feed-queue.ts';
import type { LiveDelta, LiveItem } from './live-items.ts';
import type { SessionLog } from './log.ts';
import type { RecentDelta } from './recent-deltas.ts';

/** What a feed yields: durable events (id: their seq) and token deltas (id: `seq.n`), as the log's live side carries them. */
export type FeedItem = LiveItem;

export interface FollowOptions {
  /** Resume after this position: durable event `seq`, and `n` deltas after it (default: the start). */
  after?: FeedPosition;
  /** Only this run's events (and the session's deltas). */
  runId?: string;
  /** The feed ends after yielding a live event for which this holds (a run's end, say). */
  endAt?: (event: SessionEvent) => boolean;
  /**
   * Asked once the log is replayed, and whenever nothing arrived for `pollMs`: when it answers true
   * the feed reads the log once more, yields what it finds and ends.
   */
  isDone?: () => boolean | Promise<boolean>;
  /** Also read the log when nothing arrived for this long (a safety net for a missed notice); default: never. */
  pollMs?: number;
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
  signal?: AbortSignal;
}

export class FeedOverflowError extends Error {
  constructor() {
    super('the reader fell too far behind: resume from the last id received');
    this.name = 'FeedOverflowError';
  }
}

const PAGE = 500;

/** How many events before a resumed feed's cursor tell whether a run runs there. */
const LOOKBACK = 200;

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
  const feed = new Feed(log, sessionId, o, queue, cursor, hold, recent);
  try {
    if (yield* feed.replay()) yield* feed.live();
  } finally {
    off();
    o.signal?.removeEventListener('abort', onAbort);
  }
}

/** One feed's reading of the log and of its live items, in phases (see `follow`). */
class Feed {
  private readonly log: SessionLog;
  private readonly sessionId: string;
  private readonly o: FollowOptions;
  private readonly queue: FeedQueue;
  private readonly cursor: FeedCursor;
  private readonly hold: DeltaHold;
  private readonly recent: readonly RecentDelta[];
  /** The recent deltas replayed (or passed) so far. */
  private recentAt = 0;
  /** How far the log was read for a delta's sake. */
  private readUpTo = 0;
  /** Deltas that came while a read of the log was held back, after events not yet yielded. */
  private readonly deferred: LiveDelta[] = [];
  /** Set once a live event the feed ends at was yielded (see `endAt`). */
  private ended = false;

  constructor(
    log: SessionLog,
    sessionId: string,
    o: FollowOptions,
    queue: FeedQueue,
    cursor: FeedCursor,
    hold: DeltaHold,
    recent: readonly RecentDelta[],
  ) {
    this.log = log;
    this.sessionId = sessionId;
    this.o = o;
    this.queue = queue;
    this.cursor = cursor;
    this.hold = hold;
    this.recent = recent;
  }

  private stopped(): boolean {
    return this.o.signal?.aborted === true;
  }

  /**
   * The replay: what the log has after the cursor, with the deltas of the message streaming now,
   * then the deltas heard before subscribing that wait for events not yielded yet. False when the
   * feed is over (done before it subscribed).
   */
  async *replay(): AsyncGenerator<FeedItem, boolean> {
    const { log, sessionId, o, hold } = this;
    // 0. Resuming a session's feed across nodes: whether a run runs at the cursor (see DeltaHold.before),
    // from the events just before it.
    if (hold.crossNode && o.after && o.runId === undefined) {
      for (const e of await log.read(sessionId, {
        afterSeq: Math.max(0, o.after.seq - LOOKBACK),
        untilSeq: o.after.seq,
      }))
        hold.noteRunStatus(e);
    }
    // 1. What the log has after the cursor, with the deltas of the message streaming now.
    for (const d of this.recent) hold.deltaAfter(d.seq);
    replay: for (;;) {
      const page = await this.read({ limit: PAGE });
      for (let i = 0; i < page.length; i++) {
        const e = page[i]!;
        yield* this.recentBefore(e.seq);
        if (hold.before(page, i)) break replay;
        const item = this.eventItem(e);
        if (item) yield item;
      }
      if (page.length < PAGE || this.stopped()) break;
    }
    // 2. The rest of the message being streamed right now, once what it follows was yielded.
    yield* this.recentBefore(Infinity);
    if (hold.heldBefore === undefined && o.isDone && (await o.isDone())) {
      // Done before we subscribed and after our read: read the rest once more.
      yield* this.fromLog();
      if (hold.heldBefore === undefined) return false;
    }
    // The deltas heard before subscribing that follow events not yielded yet (held back, or not in
    // the page read): first in the queue, where a delta waits for the events it follows.
    this.queue.unshift(this.recent.slice(this.recentAt));
    return true;
  }

  /** 3. Live: the items as they come, each in its turn with what the log has before it. */
  async *live(): AsyncGenerator<FeedItem> {
    const { o, queue, hold } = this;
    while (!this.stopped()) {
      if (queue.overflowed) throw new FeedOverflowError();
      const next = queue.shift();
      if (!next) {
        // Held for deltas on their way, and every notice before the held event arrived: read on.
        if (hold.noticesArrived) {
          yield* this.fromLog();
          if (this.ended) return;
          continue;
        }
        // Waiting for deltas: read the log anyway once noticeWaitMs (or writerWaitMs) is over.
        const waitMs = hold.waitMs();
        const timeoutMs = waitMs !== undefined && (o.pollMs === undefined || waitMs < o.pollMs) ? waitMs : o.pollMs;
        const woke = await queue.wait(timeoutMs);
        if (woke || this.stopped()) continue;
        // Nothing for a while: done? Else read the log, in case a notice was missed.
        const done = o.isDone ? await o.isDone() : false;
        yield* this.fromLog();
        if (this.ended || (done && hold.heldBefore === undefined)) return;
        continue;
      }
      if (next.kind === 'changed') {
        // A commit (another process's, or this one's told by the store): what it wrote is in the log.
        // Only up to what the notice says: later commits may follow deltas still on their way, and
        // have notices of their own.
        hold.heardUpTo(next.upTo);
        if (next.upTo <= this.cursor.lastSeq) continue;
        yield* this.fromLog(next.upTo);
        if (this.ended) return;
      } else if (next.kind === 'event') {
        if (yield* this.liveEvent(next.event)) return;
      } else if (yield* this.liveDelta(next)) return;
    }
  }

  /** A live event of this process; true when the feed ends at it. */
  private async *liveEvent(event: SessionEvent): AsyncGenerator<FeedItem, boolean> {
    const { cursor, hold } = this;
    // While another node's message streams (or a run runs, for an event not of that run), this
    // node's own commits come from the log like any other, where they wait for the deltas
    // numbered before them (see DeltaHold.before).
    if (hold.waitsInLog(event) && event.seq > cursor.lastSeq) {
      yield* this.fromLog(event.seq);
      return this.ended;
    }
    // Published out of order, or after events of another process: read the gap from the log first.
    if (event.seq > cursor.lastSeq + 1) {
      yield* this.fromLog(event.seq - 1);
      if (this.ended) return true;
      // Held back before the gap's end: this event comes from the log too, in its turn.
      if (hold.holdsBefore(event.seq)) return false;
    }
    const item = this.eventItem(event);
    if (item) yield item;
    if (item && this.o.endAt?.(event)) return true;
    yield* this.afterHeld();
    return false;
  }

  /** A live delta: after the events it follows, which may have to be read first; true when the feed ends at one of those. */
  private async *liveDelta(d: LiveDelta): AsyncGenerator<FeedItem, boolean> {
    const { cursor, hold } = this;
    // A delta follows its event: one committed by another node may not have been read yet.
    const seq = parsePosition(d.id)!.seq;
    hold.deltaAfter(seq);
    // The writer numbers its deltas past the event the log was held back before: read on.
    if (hold.writerMovedPast(seq)) {
      yield* this.fromLog(seq);
      if (this.ended) return true;
      this.readUpTo = Math.max(this.readUpTo, seq);
    } else if (seq > this.readUpTo && seq > cursor.lastSeq) {
      yield* this.fromLog(seq);
      if (this.ended) return true;
      this.readUpTo = seq;
    }
    // When the log was held back before its event (another node's message streams), it waits.
    this.deferred.push(d);
    yield* this.afterHeld();
    return false;
  }

  private async read(o2: { untilSeq?: number; limit?: number } = {}): Promise<SessionEvent[]> {
    const events = await this.log.read(this.sessionId, {
      afterSeq: this.cursor.lastSeq,
      ...o2,
      ...(this.o.runId !== undefined ? { runId: this.o.runId } : {}),
    });
    if (events.length > 0) this.hold.read(events.at(-1)!.seq);
    return events;
  }

  /** The event as an item, or nothing when it was yielded already. */
  private eventItem(event: SessionEvent): FeedItem | undefined {
    if (!this.cursor.takeEvent(event)) return undefined;
    this.hold.yielded(event);
    return { kind: 'event', event };
  }

  /** The delta as it is, or nothing when it was seen before or its message is complete. */
  private deltaItem(d: LiveDelta): FeedItem | undefined {
    return this.cursor.takeDelta(d) ? d : undefined;
  }

  /** The recent deltas that come before durable event `beforeSeq`, once the event they follow was yielded. */
  private *recentBefore(beforeSeq: number): Generator<FeedItem> {
    for (; this.recentAt < this.recent.length; this.recentAt++) {
      const d = this.recent[this.recentAt]!;
      if (d.seq >= beforeSeq || d.seq > this.cursor.lastSeq) break;
      const item = this.deltaItem(d);
      if (item) yield item;
    }
  }

  /**
   * Yields what the log has after the last event yielded (up to `untilSeq`), stopping at an `endAt`
   * event, and before an event that deltas on their way may precede (see DeltaHold.before).
   */
  private async *fromLog(untilSeq?: number): AsyncGenerator<FeedItem> {
    const events = await this.read(untilSeq !== undefined ? { untilSeq } : {});
    // Read to the end: nothing is held back but what this read holds back.
    if (untilSeq === undefined) this.hold.release();
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      if (this.hold.before(events, i)) break;
      const item = this.eventItem(e);
      if (!item) continue;
      yield item;
      if (this.o.endAt?.(e)) {
        this.ended = true;
        return;
      }
    }
    yield* this.afterHeld();
  }

  /** The deltas that waited for events held back, in order, once those events were yielded. */
  private *afterHeld(): Generator<FeedItem> {
    while (this.deferred.length > 0 && !this.hold.holds(this.deferred[0]!)) {
      const item = this.deltaItem(this.deferred.shift()!);
      if (item) yield item;
    }
  }
}
