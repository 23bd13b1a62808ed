/**
 * Records every SQL backend builds the same way: an appended event from its draft, and what an
 * erased session keeps of its runs.
 */
import type { EventDraft, SessionRecord, StoredEvent } from './port.ts';

/** The event a draft becomes at `seq` under `parentId` (its `data` is the draft's own object). */
export function storedEvent(d: EventDraft, sessionId: string, seq: number, parentId: string | null): StoredEvent {
  return {
    id: d.id,
    sessionId,
    seq,
    type: d.type,
    v: d.v,
    time: d.time,
    ...(d.runId !== undefined ? { runId: d.runId } : {}),
    ...(d.turn !== undefined ? { turn: d.turn } : {}),
    ...(d.step !== undefined ? { step: d.step } : {}),
    entry: d.entry,
    ...(parentId !== null ? { parentId } : {}),
    ignorable: d.ignorable ?? false,
    data: d.data,
  };
}

/** What an erased session consumed, from its runs' rows (usage as JSON text): kept for billing. */
export function erasedTotals(runs: Iterable<{ usage: string; cost: number }>): NonNullable<SessionRecord['erasedTotals']> {
  const usage: Record<string, number> = {};
  let cost = 0;
  let n = 0;
  for (const r of runs) {
    n++;
    cost += r.cost;
    for (const [k, v] of Object.entries(JSON.parse(r.usage) as Record<string, unknown>)) if (typeof v === 'number') usage[k] = (usage[k] ?? 0) + v;
  }
  return { runs: n, usage, cost };
}
