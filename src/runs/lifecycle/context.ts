/**
 * What a run transaction's body needs besides the transaction itself: the session log its events
 * go to (published when the transaction commits) and the runtime's clock (waits and deadlines).
 */
import type { NewEvent, SessionEvent, SessionLog } from '../../session/index.ts';
import type { StoreOps } from '../../store/index.ts';
import type { Clock } from '../../core/clock.ts';

export interface LifecycleContext {
  readonly log: SessionLog;
  readonly clock: Clock;
}

/**
 * Appends events in `tx`, fenced with a worker's token when `fence` is given. `trusted`: the events
 * are built here from typed values (run status changes), so no schema check on the hot path.
 */
export function appendIn(
  tx: StoreOps,
  c: LifecycleContext,
  sessionId: string,
  events: readonly NewEvent[],
  fence?: { runId: string; token: number },
  trusted = false,
): Promise<SessionEvent[]> {
  return c.log.append(sessionId, events, { tx, trusted, ...(fence ? { fence } : {}) });
}
