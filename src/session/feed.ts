import type { DeltaEvent } from '../core/index.ts';
import type { SessionEvent } from './event-types.ts';
import { eventPosition, FEED_START, isAfter, parsePosition, type FeedPosition } from './feed-position.ts';
import type { LiveItem, SessionLog } from './log.ts';

/** What a feed yields: durable events (id: their seq) and token deltas (id: `seq.n`). */
export type FeedItem = { kind: 'event'; event: SessionEvent } | { kind: 'delta'; delta: DeltaEvent; id: string };

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
  type Delta = LiveItem & { kind: 'delta' };
  type Queued = { kind: 'event'; event: SessionEvent } | Delta | { kind: 'changed'; upTo: number };
  const queue: Queued[] = [];
  let wake: (() => void) | undefined;
  let overflow = false;
  const push = (item: Queued) => {
    if (overflow) return;
    if (o.queueLimit !== undefined && queue.length >= o.queueLimit) {
      overflow = true;
      queue.length = 0;
      o.onOverflow?.();
    } else queue.push(item);
    wake?.();
  };
  // Subscribed before the log is read: nothing committed in between is missed.
  const off = log.subscribe(sessionId, (item) => {
    if (item.kind === 'changed') push({ kind: 'changed', upTo: item.upTo });
    else if (item.kind === 'event') {
      if (o.runId === undefined || item.event.runId === o.runId) push({ kind: 'event', event: item.event });
    } else push(item);
  });
  const onAbort = () => wake?.();
  o.signal?.addEventListener('abort', onAbort);
  // How far this reader has heard: the deltas before a commit up to here have reached it. What the
  // node heard before the reader subscribed is in its recent deltas; what it heard after is in the
  // reader's queue, and counts once the reader took the commit's notice from it (the node's own
  // count would run ahead of deltas still waiting in the queue).
  let heard = log.deltasHeardUpTo(sessionId);
  // The deltas the node heard before the reader subscribed, taken now, with the subscription: the
  // node's recent deltas move on while the log is read (a delta of the next message drops those of
  // a message that became durable meanwhile), and what it hears from now on is in the queue. The
  // replay yields them after the events they follow; what it has not yielded goes ahead of the
  // queue. (Taken only after the reads, they once lost a message's first deltas whose later ones
  // then came from the queue: test/session/feed-resumed-mid-message.test.ts.)
  const recent = log.recentDeltas(sessionId).slice();
  let recentAt = 0;

  let lastSeq = o.after?.seq ?? 0;
  let last: FeedPosition = o.after ?? FEED_START;
  // How far the log was read for a delta's sake.
  let readUpTo = 0;
  // Messages whose durable version was yielded: their deltas are superseded.
  const finished = new Set<string>();
  // The message of another node whose deltas were yielded last, until its durable version is.
  let streaming: string | undefined;
  // Deltas that came while a read of the log was held back, after events not yet yielded.
  const deferred: Delta[] = [];
  const noticeWaitMs = o.noticeWaitMs ?? NOTICE_WAIT_MS;
  // The event a read of the log stopped before, until it is yielded.
  let heldBefore: number | undefined;
  // The latest event a read of the log returned.
  let readMax = 0;
  // Every notice of what was committed up to this seq has reached the queue: the last confirmation
  // of the store (asked after the event was read), and whether one is on its way (see catchUp).
  let caughtUpTo = 0;
  let catchingUp = false;
  // Since when the feed waits for the store's confirmation, and the message whose deltas it gave up
  // waiting for when none came within noticeWaitMs (see NOTICE_WAIT_MS).
  let waitingSince: number | undefined;
  let gaveUpOn: string | undefined;
  /** Asks the store to confirm that the notices of everything committed up to the latest event read arrived. */
  const catchUp = (): void => {
    if (catchingUp) return;
    catchingUp = true;
    const upTo = readMax;
    void log.noticesCaughtUp().then(() => {
      caughtUpTo = Math.max(caughtUpTo, upTo);
      catchingUp = false;
      // Held meanwhile before a later event: ask again.
      if (heldBefore !== undefined && heldBefore > caughtUpTo) catchUp();
      wake?.();
    });
  };
  /** Whether a delta follows an event that a read of the log held back. */
  const heldFor = (d: Delta): boolean => heldBefore !== undefined && parsePosition(d.id)!.seq >= heldBefore;
  const writerWaitMs = o.writerWaitMs ?? WRITER_WAIT_MS;
  // Whether other nodes' deltas reach this node (a store that relays them): then an event another
  // node commits while a run streams may be ahead of deltas numbered before it.
  const crossNode = heard !== Infinity;
  // The latest event another node's deltas were numbered after, among those that reached this reader.
  let deltasAfter = 0;
  // The run whose last status moved it to running, as the events yielded tell; and the one whose
  // writer a wait gave up on (until it runs again).
  let running: string | undefined;
  let gaveUpOnRun: string | undefined;
  // Why the read of the log stopped before `heldBefore`: deltas on their way to this node
  // ('notices'), or deltas a writer has yet to make ('writer', since when).
  let heldBy: 'notices' | 'writer' | undefined;
  let writerSince: number | undefined;
  /** Follows which run runs in the session, from its status events. */
  const noteRunStatus = (event: SessionEvent): void => {
    if (event.type !== 'run/status') return;
    if (event.data.to === 'running') {
      running = event.runId;
      if (gaveUpOnRun === running) gaveUpOnRun = undefined;
    } else if (event.runId === running) running = undefined;
  };
  /** Whether the streaming message ends (durable, abandoned, its turn over) at or after `events[i]`, at a commit this reader heard of. */
  const endHeard = (events: readonly SessionEvent[], i: number): boolean => {
    for (let k = i; k < events.length && events[k]!.seq <= heard; k++) {
      const e = events[k]!;
      if (
        e.type === 'turn/end' ||
        (e.type === 'assistant/message' && e.data.message.id === streaming) ||
        (e.type === 'model/retry' && e.data.abandonedMessageId === streaming)
      )
        return true;
    }
    return false;
  };
  /** Whether the running run commits after `events[i]`, at a commit this reader heard of (its deltas before that commit reached this node). */
  const runCommitHeard = (events: readonly SessionEvent[], i: number): boolean => {
    for (let k = i + 1; k < events.length && events[k]!.seq <= heard; k++)
      if (events[k]!.runId === running) return true;
    return false;
  };
  /**
   * Whether to stop reading the log before `events[i]`, to let deltas of another node come first:
   * - deltas on their way here: while another node's message streams, its commit was read before
   *   this node heard of it;
   * - deltas their writer has yet to make, numbered before this event: it was committed (by another
   *   node, or by this one) while a message streams, or while a run runs and may stream, and the
   *   writer had not heard of it. Its next deltas, numbered past it, its next commit, or the
   *   message's end tell that the deltas before it are in; WRITER_WAIT_MS bounds the wait.
   */
  const holdBefore = (events: readonly SessionEvent[], i: number): boolean => {
    const e = events[i]!;
    const seq = e.seq;
    const streams = streaming !== undefined && streaming !== gaveUpOn;
    if (streams && seq > heard) {
      writerSince = undefined;
      // The notices may be in the queue already: wait for them as long as it holds anything. Else
      // wait until the store confirms they all arrived: deltas that did not were lost on the way.
      if (queue.length === 0) {
        if (caughtUpTo >= seq) {
          waitingSince = undefined;
          return false;
        }
        waitingSince ??= Date.now();
        if (Date.now() - waitingSince >= noticeWaitMs) {
          gaveUpOn = streaming;
          waitingSince = undefined;
          return false;
        }
      }
      heldBefore = seq;
      heldBy = 'notices';
      catchUp();
      return true;
    }
    waitingSince = undefined;
    const forMessage = streams && !endHeard(events, i);
    // A run this process executes numbers its deltas after every event this process committed or heard of, at once.
    const forRun =
      running !== undefined &&
      running !== gaveUpOnRun &&
      e.runId !== running &&
      !runCommitHeard(events, i) &&
      !log.numbersAfter(sessionId, running, seq);
    if (!crossNode || seq <= deltasAfter || (!forMessage && !forRun)) {
      writerSince = undefined;
      return false;
    }
    writerSince ??= Date.now();
    if (Date.now() - writerSince >= writerWaitMs) {
      // The writer is gone, or stuck: do not wait for it again (for this message, for this run until it runs again).
      if (forMessage) gaveUpOn = streaming;
      if (forRun) gaveUpOnRun = running;
      writerSince = undefined;
      return false;
    }
    heldBefore = seq;
    heldBy = 'writer';
    return true;
  };
  const read = async (o2: { untilSeq?: number; limit?: number } = {}) => {
    const events = await log.read(sessionId, {
      afterSeq: lastSeq,
      ...o2,
      ...(o.runId !== undefined ? { runId: o.runId } : {}),
    });
    if (events.length > 0) readMax = Math.max(readMax, events.at(-1)!.seq);
    return events;
  };

  /** The event as an item, or nothing when it was yielded already. */
  const eventItem = (event: SessionEvent): FeedItem | undefined => {
    if (event.seq <= lastSeq) return undefined;
    lastSeq = event.seq;
    if (heldBefore !== undefined && event.seq >= heldBefore) heldBefore = heldBy = undefined;
    // Ids only grow: a delta numbered before this event is never yielded after it.
    if (isAfter(eventPosition(event.seq), last)) last = eventPosition(event.seq);
    if (event.type === 'assistant/message') finished.add(event.data.message.id);
    else if (event.type === 'model/retry') finished.add(event.data.abandonedMessageId);
    else if (event.type === 'turn/end') finished.clear();
    if (event.type === 'turn/end' || (streaming !== undefined && finished.has(streaming))) streaming = undefined;
    noteRunStatus(event);
    return { kind: 'event', event };
  };
  const deltaItem = ({ delta, id, fromAnotherNode }: Omit<Delta, 'kind'>): FeedItem | undefined => {
    const at = parsePosition(id)!;
    // Seen before (also before a reconnect), or its message is already complete.
    if (finished.has(delta.messageId) || !isAfter(at, last)) return undefined;
    last = at;
    streaming = fromAnotherNode ? delta.messageId : undefined;
    return { kind: 'delta', delta, id };
  };
  /** The recent deltas that come before durable event `beforeSeq`, once the event they follow was yielded. */
  function* recentBefore(beforeSeq: number): Generator<FeedItem> {
    for (; recentAt < recent.length; recentAt++) {
      const d = recent[recentAt]!;
      if (d.seq >= beforeSeq || d.seq > lastSeq) break;
      const item = deltaItem(d);
      if (item) yield item;
    }
  }
  const stopped = () => o.signal?.aborted === true;
  // Set once a live event the feed ends at was yielded (see `endAt`).
  let ended = false;
  /**
   * Yields what the log has after the last event yielded (up to `untilSeq`), stopping at an `endAt`
   * event, and before an event that deltas on their way may precede (see `holdBefore`).
   */
  async function* fromLog(untilSeq?: number): AsyncGenerator<FeedItem> {
    const events = await read(untilSeq !== undefined ? { untilSeq } : {});
    // Read to the end: nothing is held back but what this read holds back.
    if (untilSeq === undefined) heldBefore = heldBy = undefined;
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      if (holdBefore(events, i)) break;
      const item = eventItem(e);
      if (!item) continue;
      yield item;
      if (o.endAt?.(e)) {
        ended = true;
        return;
      }
    }
    yield* afterHeld();
  }
  /** The deltas that waited for events held back, in order, once those events were yielded. */
  function* afterHeld(): Generator<FeedItem> {
    while (deferred.length > 0 && !heldFor(deferred[0]!)) {
      const item = deltaItem(deferred.shift()!);
      if (item) yield item;
    }
  }

  try {
    // 0. Resuming a session's feed across nodes: whether a run runs at the cursor (see holdBefore),
    // from the events just before it.
    if (crossNode && o.after && o.runId === undefined) {
      for (const e of await log.read(sessionId, {
        afterSeq: Math.max(0, o.after.seq - LOOKBACK),
        untilSeq: o.after.seq,
      }))
        noteRunStatus(e);
    }
    // 1. What the log has after the cursor, with the deltas of the message streaming now.
    for (const d of recent) if (d.seq > deltasAfter) deltasAfter = d.seq;
    replay: for (;;) {
      const page = await read({ limit: PAGE });
      for (let i = 0; i < page.length; i++) {
        const e = page[i]!;
        yield* recentBefore(e.seq);
        if (holdBefore(page, i)) break replay;
        const item = eventItem(e);
        if (item) yield item;
      }
      if (page.length < PAGE || stopped()) break;
    }
    // 2. The rest of the message being streamed right now, once what it follows was yielded.
    yield* recentBefore(Infinity);
    if (heldBefore === undefined && o.isDone && (await o.isDone())) {
      // Done before we subscribed and after our read: read the rest once more.
      yield* fromLog();
      if (heldBefore === undefined) return;
    }
    // The deltas heard before subscribing that follow events not yielded yet (held back, or not in
    // the page read): first in the queue, where a delta waits for the events it follows.
    const unread: Delta[] = recent.slice(recentAt).map((d) => ({
      kind: 'delta',
      delta: d.delta,
      id: d.id,
      ...(d.fromAnotherNode ? { fromAnotherNode: true as const } : {}),
    }));
    queue.unshift(...unread);
    // 3. Live.
    while (!stopped()) {
      if (overflow) throw new FeedOverflowError();
      const next = queue.shift();
      if (!next) {
        // Held for deltas on their way, and every notice before the held event arrived: read on.
        if (heldBefore !== undefined && heldBy === 'notices' && caughtUpTo >= heldBefore) {
          yield* fromLog();
          if (ended) return;
          continue;
        }
        // Waiting for deltas: read the log anyway once noticeWaitMs (or writerWaitMs) is over.
        const since = heldBy === 'writer' ? writerSince : waitingSince;
        const waitMs =
          heldBefore !== undefined && since !== undefined
            ? Math.max(0, since + (heldBy === 'writer' ? writerWaitMs : noticeWaitMs) - Date.now())
            : undefined;
        const timeoutMs = waitMs !== undefined && (o.pollMs === undefined || waitMs < o.pollMs) ? waitMs : o.pollMs;
        const woke = await new Promise<boolean>((resolve) => {
          const timer = timeoutMs !== undefined ? setTimeout(() => resolve(false), timeoutMs) : undefined;
          wake = () => {
            clearTimeout(timer);
            resolve(true);
          };
        });
        wake = undefined;
        if (woke || stopped()) continue;
        // Nothing for a while: done? Else read the log, in case a notice was missed.
        const done = o.isDone ? await o.isDone() : false;
        yield* fromLog();
        if (ended || (done && heldBefore === undefined)) return;
        continue;
      }
      if (next.kind === 'changed') {
        // A commit (another process's, or this one's told by the store): what it wrote is in the log.
        // Only up to what the notice says: later commits may follow deltas still on their way, and
        // have notices of their own.
        if (next.upTo > heard) heard = next.upTo;
        if (next.upTo <= lastSeq) continue;
        yield* fromLog(next.upTo);
        if (ended) return;
      } else if (next.kind === 'event') {
        // While another node's message streams (or a run runs, for an event not of that run), this
        // node's own commits come from the log like any other, where they wait for the deltas
        // numbered before them (see holdBefore).
        if (
          (streaming !== undefined || (crossNode && running !== undefined && next.event.runId !== running)) &&
          next.event.seq > lastSeq
        ) {
          yield* fromLog(next.event.seq);
          if (ended) return;
          continue;
        }
        // Published out of order, or after events of another process: read the gap from the log first.
        if (next.event.seq > lastSeq + 1) {
          yield* fromLog(next.event.seq - 1);
          if (ended) return;
          // Held back before the gap's end: this event comes from the log too, in its turn.
          if (heldBefore !== undefined && heldBefore < next.event.seq) continue;
        }
        const item = eventItem(next.event);
        if (item) yield item;
        if (item && o.endAt?.(next.event)) return;
        yield* afterHeld();
      } else {
        // A delta follows its event: one committed by another node may not have been read yet.
        const seq = parsePosition(next.id)!.seq;
        if (seq > deltasAfter) deltasAfter = seq;
        // The writer numbers its deltas past the event the log was held back before: read on.
        if (heldBy === 'writer' && heldBefore !== undefined && seq >= heldBefore) {
          yield* fromLog(seq);
          if (ended) return;
          readUpTo = Math.max(readUpTo, seq);
        } else if (seq > readUpTo && seq > lastSeq) {
          yield* fromLog(seq);
          if (ended) return;
          readUpTo = seq;
        }
        // When the log was held back before its event (another node's message streams), it waits.
        deferred.push(next);
        yield* afterHeld();
      }
    }
  } finally {
    off();
    o.signal?.removeEventListener('abort', onAbort);
  }
}
