/**
 * A feed's phases (see `follow` in feed.ts): the replay of the log after the cursor, with the
 * recent deltas where a live reader got them, then the live items, each in its turn with what the
 * log has before it; and the reads of the log they share, held back where the hold says.
 */
import type { SessionEvent } from './event-types.ts';
import type { FeedCursor } from './feed-cursor.ts';
import type { DeltaHold } from './feed-hold.ts';
import { parsePosition, type FeedPosition } from './feed-position.ts';
import { FeedOverflowError, type FeedQueue } from './feed-queue.ts';
import type { LiveDelta, LiveItem } from './live-items.ts';
import type { SessionLog } from './log.ts';
import type { RecentDelta } from './recent-deltas.ts';

const PAGE = 500;

/** How many events before a resumed feed's cursor tell whether a run runs there. */
const LOOKBACK = 200;

/** What a feed reads: from where, which run's events, until when. */
export interface FeedReadOptions {
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
  signal?: AbortSignal;
}

/** One feed's reading of the log and of its live items, in phases (see `follow`). */
export class FeedReader {
  private readonly log: SessionLog;
  private readonly sessionId: string;
  private readonly o: FeedReadOptions;
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
    o: FeedReadOptions,
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
  async *replay(): AsyncGenerator<LiveItem, boolean> {
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
  async *live(): AsyncGenerator<LiveItem> {
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
  private async *liveEvent(event: SessionEvent): AsyncGenerator<LiveItem, boolean> {
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
  private async *liveDelta(d: LiveDelta): AsyncGenerator<LiveItem, boolean> {
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
  private eventItem(event: SessionEvent): LiveItem | undefined {
    if (!this.cursor.takeEvent(event)) return undefined;
    this.hold.yielded(event);
    return { kind: 'event', event };
  }

  /** The delta as it is, or nothing when it was seen before or its message is complete. */
  private deltaItem(d: LiveDelta): LiveItem | undefined {
    return this.cursor.takeDelta(d) ? d : undefined;
  }

  /** The recent deltas that come before durable event `beforeSeq`, once the event they follow was yielded. */
  private *recentBefore(beforeSeq: number): Generator<LiveItem> {
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
  private async *fromLog(untilSeq?: number): AsyncGenerator<LiveItem> {
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
  private *afterHeld(): Generator<LiveItem> {
    while (this.deferred.length > 0 && !this.hold.holds(this.deferred[0]!)) {
      const item = this.deltaItem(this.deferred.shift()!);
      if (item) yield item;
    }
  }
}
