/**
 * What a feed (feed.ts) has yielded: its last event and last position (ids only grow), the
 * messages whose durable version it yielded (their deltas are superseded), and the message of
 * another node whose deltas it yielded last. It decides whether an event or a delta is yielded.
 */
import type { SessionEvent } from './event-types.ts';
import { eventPosition, FEED_START, isAfter, parsePosition, type FeedPosition } from './feed-position.ts';
import type { LiveDelta } from './live-items.ts';

export class FeedCursor {
  /** The last event yielded. */
  lastSeq: number;
  /** The last position yielded: an event's, or a delta's. */
  private last: FeedPosition;
  /** Messages whose durable version was yielded: their deltas are superseded. */
  private readonly finished = new Set<string>();
  /** The message of another node whose deltas were yielded last, until its durable version is. */
  streaming: string | undefined;

  constructor(after: FeedPosition | undefined) {
    this.lastSeq = after?.seq ?? 0;
    this.last = after ?? FEED_START;
  }

  /** Takes an event to yield; false when it was yielded already. */
  takeEvent(event: SessionEvent): boolean {
    if (event.seq <= this.lastSeq) return false;
    this.lastSeq = event.seq;
    // Ids only grow: a delta numbered before this event is never yielded after it.
    const at = eventPosition(event.seq);
    if (isAfter(at, this.last)) this.last = at;
    if (event.type === 'assistant/message') this.finished.add(event.data.message.id);
    else if (event.type === 'model/retry') this.finished.add(event.data.abandonedMessageId);
    else if (event.type === 'turn/end') this.finished.clear();
    if (event.type === 'turn/end' || (this.streaming !== undefined && this.finished.has(this.streaming)))
      this.streaming = undefined;
    return true;
  }

  /** Takes a delta to yield; false when it was seen before (also before a reconnect) or its message is complete. */
  takeDelta(d: LiveDelta): boolean {
    const at = parsePosition(d.id)!;
    if (this.finished.has(d.delta.messageId) || !isAfter(at, this.last)) return false;
    this.last = at;
    this.streaming = d.fromAnotherNode ? d.delta.messageId : undefined;
    return true;
  }
}
