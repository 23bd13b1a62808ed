import type { Message, Usage } from '../model/index.ts';
import type { DeltaEvent, TurnEvent } from './events.ts';

/**
 * The turn's working state at a step boundary (or where it suspended): enough to resume it.
 * It includes the turn's own opaque reasoning, which never reaches the session's model context.
 */
export interface TurnCheckpoint {
  /** The step the turn is at: after a step/end, the steps completed; when suspended, the open step. */
  step: number;
  conversation: readonly Message[];
  usage: Usage;
  cost: number;
}

/**
 * Where the loop reports. `append` is write-ahead: the loop awaits it before acting on the
 * world, and a rejection stops the action. With `step/end` and `turn/end` the loop passes its
 * checkpoint, to be stored in the same commit. `delta` is fire-and-forget and must not throw.
 */
export interface EventSink {
  append(events: readonly TurnEvent[], checkpoint?: TurnCheckpoint): Promise<void>;
  delta?(event: DeltaEvent): void;
}

/** Keeps everything in memory: for tests, demos and embedding without persistence. */
export class MemorySink implements EventSink {
  readonly events: TurnEvent[] = [];
  readonly deltas: DeltaEvent[] = [];
  private readonly keepDeltas: boolean;

  constructor(options: { keepDeltas?: boolean } = {}) {
    this.keepDeltas = options.keepDeltas ?? true;
  }

  async append(events: readonly TurnEvent[]): Promise<void> {
    for (const e of events) this.events.push(e);
  }

  delta(event: DeltaEvent): void {
    if (this.keepDeltas) this.deltas.push(event);
  }

  ofType<T extends TurnEvent['type']>(type: T): Extract<TurnEvent, { type: T }>[] {
    return this.events.filter((e): e is Extract<TurnEvent, { type: T }> => e.type === type);
  }
}
