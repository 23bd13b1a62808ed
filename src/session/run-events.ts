import type { SessionEvent } from './event-types.ts';

/** What `runEvents` reads from: the session log (its `read` by run). */
export interface RunEventsSource {
  read(sessionId: string, options: { runId: string; afterSeq: number; limit: number }): Promise<SessionEvent[]>;
}

/** Every event of run `runId` in its session, in log order (read in pages: a run's record, never the hot path). */
export async function runEvents(log: RunEventsSource, sessionId: string, runId: string): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  for (let after = 0; ;) {
    const page = await log.read(sessionId, { runId, afterSeq: after, limit: 10_000 });
    events.push(...page);
    if (page.length < 10_000) return events;
    after = page.at(-1)!.seq;
  }
}
