import type { Usage } from '../model/index.ts';
import type { DeltaEvent, TurnEvent } from './events.ts';

/**
 * The turn's counters at a step boundary (or where it suspended): with the log up to the event it
 * is stored with, enough to resume the turn. It holds no messages: the conversation is a
 * projection of the log, so what a checkpoint costs does not grow with the conversation.
 */
export interface TurnCheckpoint {
  /** The step the turn is at: after a step/end, the steps completed; when suspended, the open step. */
  step: number;
  usage: Usage;
  cost: number;
}

export interface SinkAppendOptions {
  /**
   * A durable point: the append settles only once these events, and every event appended
   * before them, are durable. The loop asks for one exactly where correctness needs it (before a
   * tool that is not idempotent starts, at the end of a step that ran tools, at the turn's end).
   * Without it the sink may hold the events and make them durable with the next durable point.
   */
  durable?: boolean;
  /** The turn's state after these events: stored in the same commit as them. */
  checkpoint?: TurnCheckpoint;
}

/**
 * What a sink may return from an append that it held without waiting for anything (no durable
 * point): an already settled promise, the same one every time. The loop recognizes it and goes on
 * without building a promise of its own per event (several events a step).
 */
export const HELD: Promise<void> = Promise.resolve();

/**
 * Where the loop reports. `append` is write-ahead at durable points: the loop awaits a durable
 * append before it acts on the world, and a rejection stops the action. An append with no events
 * and `durable` makes what is held durable (a flush). `delta` is fire-and-forget and must not throw.
 */
export interface EventSink {
  append(events: readonly TurnEvent[], options?: SinkAppendOptions): Promise<void>;
  delta?(event: DeltaEvent): void;
  /**
   * Called before a step's tools start when no durable point came right before them (their tools
   * are all idempotent): a sink that can tell its writer may no longer act (a run taken over by
   * another worker) refuses here, and no tool starts.
   */
  beforeEffects?(): Promise<void>;
}

/**
 * A sink's answer to the durable append of a turn's `completed` end when input the turn must take
 * first is waiting (steering stored meanwhile, by this process or another): nothing of that append
 * became durable, and the turn goes on at its next step boundary, where it takes that input.
 */
export class TurnNotOverError extends Error {
  constructor(message = 'input is waiting for this turn: it is not over') {
    super(message);
    this.name = 'TurnNotOverError';
  }
}

/** Keeps everything in memory: for tests, demos and embedding without persistence. */
export class MemorySink implements EventSink {
  readonly events: TurnEvent[] = [];
  readonly deltas: DeltaEvent[] = [];
  /** How many appends were durable points (flushes of nothing included). */
  durablePoints = 0;
  private readonly keepDeltas: boolean;

  constructor(options: { keepDeltas?: boolean } = {}) {
    this.keepDeltas = options.keepDeltas ?? true;
  }

  append(events: readonly TurnEvent[], options?: SinkAppendOptions): Promise<void> {
    for (const e of events) this.events.push(e);
    if (options?.durable) this.durablePoints++;
    return HELD;
  }

  delta(event: DeltaEvent): void {
    if (this.keepDeltas) this.deltas.push(event);
  }

  ofType<T extends TurnEvent['type']>(type: T): Extract<TurnEvent, { type: T }>[] {
    return this.events.filter((e): e is Extract<TurnEvent, { type: T }> => e.type === type);
  }
}
