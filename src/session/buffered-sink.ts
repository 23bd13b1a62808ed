import type { DeltaEvent, EventSink, SinkAppendOptions, TurnCheckpoint, TurnEvent } from '../core/index.ts';

/** A checkpoint held with the events before it: `index` is the event it was taken after. */
export interface HeldCheckpoint {
  checkpoint: TurnCheckpoint;
  index: number;
}

/**
 * The loop's events, held until its next durable point and then committed together: one commit
 * (one fsync) per durable point instead of one per event (ADR-0008). What is held when the
 * process dies was never acted on: the loop only acts on the world after a durable point.
 */
export abstract class BufferedSink implements EventSink {
  private held: TurnEvent[] = [];
  private heldCheckpoint: HeldCheckpoint | undefined;

  async append(events: readonly TurnEvent[], options: SinkAppendOptions = {}): Promise<void> {
    this.check();
    for (const e of events) this.held.push(e);
    if (options.checkpoint && this.held.length > 0) this.heldCheckpoint = { checkpoint: options.checkpoint, index: this.held.length - 1 };
    if (!options.durable || this.held.length === 0) return;
    const batch = this.held;
    const checkpoint = this.heldCheckpoint;
    this.held = [];
    this.heldCheckpoint = undefined;
    await this.commit(batch, checkpoint);
  }

  /** Events reported but not yet durable. */
  get heldEvents(): readonly TurnEvent[] {
    return this.held;
  }

  /** Throws when this sink may take nothing more. */
  protected check(): void {}

  /** Commits one durable point's events (and the latest checkpoint among them) in one transaction. */
  protected abstract commit(events: readonly TurnEvent[], checkpoint: HeldCheckpoint | undefined): Promise<void>;

  abstract delta(event: DeltaEvent): void;
}
