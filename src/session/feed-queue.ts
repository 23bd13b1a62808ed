/**
 * The queue of a feed's live items (feed.ts): what its subscription to the session log heard and
 * the feed has not taken yet, bounded (backpressure: one item too many and it overflows), with a
 * wait that an item, an abort or a confirmation of the store's notices ends.
 */
import type { LiveChange, LiveItem } from './live-items.ts';

export type Queued = LiveItem | LiveChange;

export class FeedOverflowError extends Error {
  constructor() {
    super('the reader fell too far behind: resume from the last id received');
    this.name = 'FeedOverflowError';
  }
}

export class FeedQueue {
  private readonly items: Queued[] = [];
  private readonly limit: number | undefined;
  private readonly onOverflow: (() => void) | undefined;
  private wake: (() => void) | undefined;
  /** One item too many came: the queue dropped what it held and takes nothing more. */
  overflowed = false;

  constructor(limit: number | undefined, onOverflow: (() => void) | undefined) {
    this.limit = limit;
    this.onOverflow = onOverflow;
  }

  push(item: Queued): void {
    if (this.overflowed) return;
    if (this.limit !== undefined && this.items.length >= this.limit) {
      this.overflowed = true;
      this.items.length = 0;
      this.onOverflow?.();
    } else this.items.push(item);
    this.wake?.();
  }

  get length(): number {
    return this.items.length;
  }

  shift(): Queued | undefined {
    return this.items.shift();
  }

  /** Puts items ahead of what is queued. */
  unshift(items: readonly Queued[]): void {
    this.items.unshift(...items);
  }

  /** Ends the current wait, if any. */
  wakeUp(): void {
    this.wake?.();
  }

  /** Waits until woken (true) or, given a timeout, until it is over (false). */
  async wait(timeoutMs: number | undefined): Promise<boolean> {
    const woke = await new Promise<boolean>((resolve) => {
      const timer = timeoutMs !== undefined ? setTimeout(() => resolve(false), timeoutMs) : undefined;
      this.wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
    this.wake = undefined;
    return woke;
  }
}
