import type { DeltaEvent, TurnEvent } from '../core/index.ts';
import { BufferedSink } from './buffered-sink.ts';
import type { NewEvent, SessionLog } from './log.ts';

/** A loop event as a session log event (of a run, when `runId` is given). */
export function toNewEvent(e: TurnEvent, runId?: string): NewEvent {
  // Assigned in key order, without spreads of conditional objects (several events per step).
  const out = { type: e.type, data: e.data, time: e.time, turn: e.turn } as NewEvent & {
    step?: number;
    runId?: string;
    blobs?: TurnEvent['blobs'];
  };
  if (e.step !== undefined) out.step = e.step;
  if (runId !== undefined) out.runId = runId;
  if (e.blobs) out.blobs = e.blobs;
  return out;
}

/**
 * The loop's event sink backed by the session log: the events of each durable point are appended
 * in one commit before the loop goes on (write-ahead), and deltas go to live subscribers only.
 */
export class SessionSink extends BufferedSink {
  private readonly log: SessionLog;
  private readonly sessionId: string;
  private readonly runId: string | undefined;

  constructor(log: SessionLog, sessionId: string, options: { runId?: string } = {}) {
    super();
    this.log = log;
    this.sessionId = sessionId;
    this.runId = options.runId;
  }

  protected async commit(events: readonly TurnEvent[]): Promise<void> {
    await this.log.append(
      this.sessionId,
      events.map((e) => toNewEvent(e, this.runId)),
      { trusted: true },
    );
  }

  delta(event: DeltaEvent): void {
    this.log.publishDelta(this.sessionId, event);
  }
}
