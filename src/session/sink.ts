import type { DeltaEvent, TurnEvent } from '../core/index.ts';
import { BufferedSink } from './buffered-sink.ts';
import type { SessionLog } from './log.ts';

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
    // A loop event is a new event as it is: the append gives it its run.
    await this.log.append(this.sessionId, events, {
      trusted: true,
      ...(this.runId !== undefined ? { runId: this.runId } : {}),
    });
  }

  delta(event: DeltaEvent): void {
    this.log.publishDelta(this.sessionId, event);
  }
}
