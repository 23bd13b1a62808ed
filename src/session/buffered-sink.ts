import {
  HELD,
  TurnNotOverError,
  type DeltaEvent,
  type EventSink,
  type SinkAppendOptions,
  type TurnCheckpoint,
  type TurnEvent,
} from '../core/index.ts';

/** A checkpoint held with the events before it: `index` is the event it was taken after. */
export interface HeldCheckpoint {
  checkpoint: TurnCheckpoint;
  index: number;
}

/**
 * The loop's events, held until its next durable point and then committed together: one commit
 * (one fsync) per durable point instead of one per event (ADR-0008). What is held when the
 * process dies is asked for again: the only effects it can have caused are those of idempotent
 * tools, which run again with the same idempotency key; any other tool starts after a durable point.
 */
export abstract class BufferedSink implements EventSink {
  private held: TurnEvent[] = [];
  /** The checkpoint each event was reported with, if any. */
  private readonly checkpoints = new WeakMap<TurnEvent, TurnCheckpoint>();

  /** Holds the events; at a durable point, commits everything held. An append that only held answers HELD. */
  append(events: readonly TurnEvent[], options?: SinkAppendOptions): Promise<void> {
    try {
      this.check();
    } catch (error) {
      return Promise.reject(error);
    }
    for (const e of events) this.held.push(e);
    if (options?.checkpoint && events.length > 0) this.checkpoints.set(events.at(-1)!, options.checkpoint);
    if (!options?.durable || this.held.length === 0) return HELD;
    return this.commitHeld();
  }

  /** Commits what is held: one durable point. */
  private async commitHeld(): Promise<void> {
    const batch = this.held;
    this.held = [];
    try {
      await this.commit(batch, this.latestCheckpoint(batch));
    } catch (e) {
      // The turn is not over: what it reported stays held (but its end) and commits with its next durable point.
      if (e instanceof TurnNotOverError) this.held = [...batch.filter((x) => x.type !== 'turn/end'), ...this.held];
      throw e;
    }
  }

  private latestCheckpoint(batch: readonly TurnEvent[]): HeldCheckpoint | undefined {
    for (let i = batch.length - 1; i >= 0; i--) {
      const checkpoint = this.checkpoints.get(batch[i]!);
      if (checkpoint) return { checkpoint, index: i };
    }
    return undefined;
  }

  /** Throws when this sink may take nothing more. */
  protected check(): void {}

  /**
   * Commits one durable point's events (and the latest checkpoint among them) in one transaction.
   * It may refuse a turn's `completed` end with TurnNotOverError, committing nothing.
   */
  protected abstract commit(events: readonly TurnEvent[], checkpoint: HeldCheckpoint | undefined): Promise<void>;

  abstract delta(event: DeltaEvent): void;
}
