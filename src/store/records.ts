/**
 * Records every SQL backend builds the same way: an appended event from its draft, and what an
 * erased session keeps of its runs.
 */
import type { EventDraft, SessionRecord, StoredEvent } from './port/index.ts';

/** The event a draft becomes at `seq` under `parentId` (its `data` is the draft's own object). */
export function storedEvent(d: EventDraft, sessionId: string, seq: number, parentId: string | null): StoredEvent {
  // Assigned in key order, without spreads of conditional objects (several events per step).
  const e = { id: d.id, sessionId, seq, type: d.type, v: d.v, time: d.time } as StoredEvent;
  if (d.runId !== undefined) e.runId = d.runId;
  if (d.turn !== undefined) e.turn = d.turn;
  if (d.step !== undefined) e.step = d.step;
  e.entry = d.entry;
  if (parentId !== null) e.parentId = parentId;
  e.ignorable = d.ignorable ?? false;
  e.data = d.data;
  return e;
}

/** What an erased session consumed, from its runs' rows (usage as JSON text): kept for billing. */
export function erasedTotals(
  runs: Iterable<{ usage: string; cost: number }>,
): NonNullable<SessionRecord['erasedTotals']> {
  const usage: Record<string, number> = {};
  let cost = 0;
  let n = 0;
  for (const r of runs) {
    n++;
    cost += r.cost;
    for (const [k, v] of Object.entries(JSON.parse(r.usage) as Record<string, unknown>))
      if (typeof v === 'number') usage[k] = (usage[k] ?? 0) + v;
  }
  return { runs: n, usage, cost };
}
