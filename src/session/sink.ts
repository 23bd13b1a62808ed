import type { DeltaEvent, EventSink, TurnEvent } from '../core/index.ts';
import type { SessionLog } from './log.ts';

/**
 * The loop's event sink backed by the session log: each event is durably appended before the loop
 * goes on (write-ahead), and deltas go to live subscribers only.
 */
export class SessionSink implements EventSink {
  private readonly log: SessionLog;
  private readonly sessionId: string;
  private readonly runId: string | undefined;

  constructor(log: SessionLog, sessionId: string, options: { runId?: string } = {}) {
    this.log = log;
    this.sessionId = sessionId;
    this.runId = options.runId;
  }

  async append(events: readonly TurnEvent[]): Promise<void> {
    await this.log.append(
      this.sessionId,
      events.map((e) => ({
        type: e.type,
        data: e.data,
        time: e.time,
        turn: e.turn,
        ...(e.step !== undefined ? { step: e.step } : {}),
        ...(this.runId !== undefined ? { runId: this.runId } : {}),
      })) as Parameters<SessionLog['append']>[1],
    );
  }

  delta(event: DeltaEvent): void {
    this.log.publishDelta(this.sessionId, event);
  }
}
