/**
 * When a feed (feed.ts) stops reading the log to let deltas come first. Across nodes, a commit can
 * be in the log before this node has heard the deltas streamed before it (they come by another
 * path, see `Store.broadcast`), and an event committed while a message streams can precede deltas
 * its writer numbers before it. The hold tracks how far the reader has heard, which run runs,
 * where a read of the log stopped and why, and how long it waited.
 */
import type { SessionEvent } from './event-types.ts';
import type { FeedCursor } from './feed-cursor.ts';
import { parsePosition } from './feed-position.ts';
import type { FeedQueue } from './feed-queue.ts';
import type { LiveDelta } from './live-items.ts';
import type { SessionLog } from './log.ts';

/**
 * The longest a feed waits for the rest of a message's deltas, relayed from another node, when the
 * store does not confirm that its notices caught up (see `SessionLog.noticesCaughtUp`: normally it
 * does within milliseconds, and a feed waits for nothing more); then it reads the message's commit
 * from the log without them. Not a timeout on a slow node: a busy process may fire a timer before
 * it reads the notices already in its socket.
 */
export const NOTICE_WAIT_MS = 10_000;

/**
 * The longest an event committed while another node's message streams (by a third node: a message
 * enqueued behind the run, say) waits for the rest of that message's deltas numbered before it.
 * The writer numbers its deltas after such an event once it hears of it (within milliseconds), and
 * the message's end releases the wait too; this bounds it when neither comes (the writer died).
 */
export const WRITER_WAIT_MS = 3_000;

export class DeltaHold {
  private readonly log: SessionLog;
  private readonly sessionId: string;
  private readonly cursor: FeedCursor;
  private readonly queue: FeedQueue;
  private readonly noticeWaitMs: number;
  private readonly writerWaitMs: number;
  /**
   * How far this reader has heard: the deltas before a commit up to here have reached it. What the
   * node heard before the reader subscribed is in its recent deltas; what it heard after is in the
   * reader's queue, and counts once the reader took the commit's notice from it (the node's own
   * count would run ahead of deltas still waiting in the queue). Taken when the hold is made, just
   * after the reader subscribed.
   */
  private heard: number;
  /**
   * Whether other nodes' deltas reach this node (a store that relays them): then an event another
   * node commits while a run streams may be ahead of deltas numbered before it.
   */
  readonly crossNode: boolean;
  /** The event a read of the log stopped before, until it is yielded. */
  heldBefore: number | undefined;
  /**
   * Why the read of the log stopped before `heldBefore`: deltas on their way to this node
   * ('notices'), or deltas a writer has yet to make ('writer', since when).
   */
  private heldBy: 'notices' | 'writer' | undefined;
  private writerSince: number | undefined;
  /** The latest event a read of the log returned. */
  private readMax = 0;
  /**
   * Every notice of what was committed up to this seq has reached the queue: the last confirmation
   * of the store (asked after the event was read), and whether one is on its way (see catchUp).
   */
  private caughtUpTo = 0;
  private catchingUp = false;
  /**
   * Since when the feed waits for the store's confirmation, and the message whose deltas it gave up
   * waiting for when none came within noticeWaitMs (see NOTICE_WAIT_MS).
   */
  private waitingSince: number | undefined;
  private gaveUpOn: string | undefined;
  /** The latest event another node's deltas were numbered after, among those that reached this reader. */
  private deltasAfter = 0;
  /**
   * The run whose last status moved it to running, as the events yielded tell; and the one whose
   * writer a wait gave up on (until it runs again).
   */
  private running: string | undefined;
  private gaveUpOnRun: string | undefined;

  constructor(
    log: SessionLog,
    sessionId: string,
    cursor: FeedCursor,
    queue: FeedQueue,
    o: { noticeWaitMs?: number; writerWaitMs?: number },
  ) {
    this.log = log;
    this.sessionId = sessionId;
    this.cursor = cursor;
    this.queue = queue;
    this.noticeWaitMs = o.noticeWaitMs ?? NOTICE_WAIT_MS;
    this.writerWaitMs = o.writerWaitMs ?? WRITER_WAIT_MS;
    this.heard = log.deltasHeardUpTo(sessionId);
    this.crossNode = this.heard !== Infinity;
  }

  /** Follows which run runs in the session, from its status events. */
  noteRunStatus(event: SessionEvent): void {
    if (event.type !== 'run/status') return;
    if (event.data.to === 'running') {
      this.running = event.runId;
      if (this.gaveUpOnRun === this.running) this.gaveUpOnRun = undefined;
    } else if (event.runId === this.running) this.running = undefined;
  }

  /** An event was yielded: a hold before it is over. */
  yielded(event: SessionEvent): void {
    if (this.heldBefore !== undefined && event.seq >= this.heldBefore) this.heldBefore = this.heldBy = undefined;
    this.noteRunStatus(event);
  }

  /** A read of the log to its end: nothing is held back but what it holds back. */
  release(): void {
    this.heldBefore = this.heldBy = undefined;
  }

  /** A read of the log returned events up to `seq`. */
  read(seq: number): void {
    this.readMax = Math.max(this.readMax, seq);
  }

  /** The store's notice of commits up to `upTo` reached the reader. */
  heardUpTo(upTo: number): void {
    if (upTo > this.heard) this.heard = upTo;
  }

  /** Another node's delta numbered after event `seq` reached the reader. */
  deltaAfter(seq: number): void {
    if (seq > this.deltasAfter) this.deltasAfter = seq;
  }

  /** Whether a delta follows an event that a read of the log held back. */
  holds(d: LiveDelta): boolean {
    return this.heldBefore !== undefined && parsePosition(d.id)!.seq >= this.heldBefore;
  }

  /** Whether a read of the log is held back before an event before `seq`. */
  holdsBefore(seq: number): boolean {
    return this.heldBefore !== undefined && this.heldBefore < seq;
  }

  /** Held for deltas on their way, and every notice before the held event arrived: the log can be read on. */
  get noticesArrived(): boolean {
    return this.heldBefore !== undefined && this.heldBy === 'notices' && this.caughtUpTo >= this.heldBefore;
  }

  /** Held for a writer, which now numbers its deltas past the held event (its delta after `seq` came): read on. */
  writerMovedPast(seq: number): boolean {
    return this.heldBy === 'writer' && this.heldBefore !== undefined && seq >= this.heldBefore;
  }

  /**
   * Whether a live event of this process comes from the log instead, where it waits for the deltas
   * numbered before it: while another node's message streams, or a run runs (for an event not of that run).
   */
  waitsInLog(event: SessionEvent): boolean {
    return (
      this.cursor.streaming !== undefined ||
      (this.crossNode && this.running !== undefined && event.runId !== this.running)
    );
  }

  /** How long to wait for deltas before reading the log anyway (noticeWaitMs or writerWaitMs after the hold began). */
  waitMs(): number | undefined {
    const since = this.heldBy === 'writer' ? this.writerSince : this.waitingSince;
    return this.heldBefore !== undefined && since !== undefined
      ? Math.max(0, since + (this.heldBy === 'writer' ? this.writerWaitMs : this.noticeWaitMs) - Date.now())
      : undefined;
  }

  /** Asks the store to confirm that the notices of everything committed up to the latest event read arrived. */
  private catchUp(): void {
    if (this.catchingUp) return;
    this.catchingUp = true;
    const upTo = this.readMax;
    void this.log.noticesCaughtUp().then(() => {
      this.caughtUpTo = Math.max(this.caughtUpTo, upTo);
      this.catchingUp = false;
      // Held meanwhile before a later event: ask again.
      if (this.heldBefore !== undefined && this.heldBefore > this.caughtUpTo) this.catchUp();
      this.queue.wakeUp();
    });
  }

  /** Whether the streaming message ends (durable, abandoned, its turn over) at or after `events[i]`, at a commit this reader heard of. */
  private endHeard(events: readonly SessionEvent[], i: number): boolean {
    const streaming = this.cursor.streaming;
    for (let k = i; k < events.length && events[k]!.seq <= this.heard; k++) {
      const e = events[k]!;
      if (
        e.type === 'turn/end' ||
        (e.type === 'assistant/message' && e.data.message.id === streaming) ||
        (e.type === 'model/retry' && e.data.abandonedMessageId === streaming)
      )
        return true;
    }
    return false;
  }

  /** Whether the running run commits after `events[i]`, at a commit this reader heard of (its deltas before that commit reached this node). */
  private runCommitHeard(events: readonly SessionEvent[], i: number): boolean {
    for (let k = i + 1; k < events.length && events[k]!.seq <= this.heard; k++)
      if (events[k]!.runId === this.running) return true;
    return false;
  }

  /**
   * Whether to stop reading the log before `events[i]`, to let deltas of another node come first:
   * - deltas on their way here: while another node's message streams, its commit was read before
   *   this node heard of it;
   * - deltas their writer has yet to make, numbered before this event: it was committed (by another
   *   node, or by this one) while a message streams, or while a run runs and may stream, and the
   *   writer had not heard of it. Its next deltas, numbered past it, its next commit, or the
   *   message's end tell that the deltas before it are in; WRITER_WAIT_MS bounds the wait.
   */
  before(events: readonly SessionEvent[], i: number): boolean {
    const e = events[i]!;
    const seq = e.seq;
    const streaming = this.cursor.streaming;
    const streams = streaming !== undefined && streaming !== this.gaveUpOn;
    if (streams && seq > this.heard) {
      this.writerSince = undefined;
      // The notices may be in the queue already: wait for them as long as it holds anything. Else
      // wait until the store confirms they all arrived: deltas that did not were lost on the way.
      if (this.queue.length === 0) {
        if (this.caughtUpTo >= seq) {
          this.waitingSince = undefined;
          return false;
        }
        this.waitingSince ??= Date.now();
        if (Date.now() - this.waitingSince >= this.noticeWaitMs) {
          this.gaveUpOn = streaming;
          this.waitingSince = undefined;
          return false;
        }
      }
      this.heldBefore = seq;
      this.heldBy = 'notices';
      this.catchUp();
      return true;
    }
    this.waitingSince = undefined;
    const forMessage = streams && !this.endHeard(events, i);
    // A run this process executes numbers its deltas after every event this process committed or heard of, at once.
    const forRun =
      this.running !== undefined &&
      this.running !== this.gaveUpOnRun &&
      e.runId !== this.running &&
      !this.runCommitHeard(events, i) &&
      !this.log.numbersAfter(this.sessionId, this.running, seq);
    if (!this.crossNode || seq <= this.deltasAfter || (!forMessage && !forRun)) {
      this.writerSince = undefined;
      return false;
    }
    this.writerSince ??= Date.now();
    if (Date.now() - this.writerSince >= this.writerWaitMs) {
      // The writer is gone, or stuck: do not wait for it again (for this message, for this run until it runs again).
      if (forMessage) this.gaveUpOn = streaming;
      if (forRun) this.gaveUpOnRun = this.running;
      this.writerSince = undefined;
      return false;
    }
    this.heldBefore = seq;
    this.heldBy = 'writer';
    return true;
  }
}
