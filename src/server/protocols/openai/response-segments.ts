/**
 * A Keel run as one or more OpenAI Responses `response`s (ADR-0038). A run hands the turn to its
 * client when its turn suspends on something only the client can give: the output of a tool the
 * client declared, an approval, an answer. In Responses, that ends a response (its output ends
 * with `function_call` / `mcp_approval_request` items, or the question as a message), and the
 * client's next request (`previous_response_id`) carries what it gave. In Keel the same run waits
 * durably and goes on. So a run is a chain of segments, cut at each hand-off: segment 0 is the
 * response whose id is the run id, segment n the response `{runId}.{n}`. Everything here is a
 * pure function of the run's events.
 */
import { isClientToolSignal } from '../../../core/client-tool.ts';
import type { PendingCall } from '../../../core/index.ts';
import type { SessionEvent } from '../../../session/index.ts';

/** Whether a pending call is the client's to give: an approval, an answer, or a client tool's output. */
export const isClientsPart = (p: PendingCall): boolean =>
  p.kind === 'approval' || p.kind === 'input' || (p.wait?.kind === 'signal' && isClientToolSignal(p.wait.name));

/** What the client is handed at a turn end that suspended: its pending calls (none: not a hand-off). */
export function handOffOf(e: SessionEvent): PendingCall[] {
  if (e.type !== 'turn/end' || e.data.reason !== 'suspended') return [];
  const pending = e.data.pending ?? [];
  return pending.some(isClientsPart) ? pending.filter(isClientsPart) : [];
}

export interface Segment {
  /** Its ordinal in the run (0: the response whose id is the run id). */
  n: number;
  /** The run's events in it: after the previous hand-off, up to and with its own. */
  events: SessionEvent[];
  /** What it handed the client at its end; undefined while the run has not handed off since. */
  handOff?: PendingCall[];
}

/** The run's events cut at each hand-off. */
export function segmentsOf(events: readonly SessionEvent[]): Segment[] {
  const out: Segment[] = [{ n: 0, events: [] }];
  for (const e of events) {
    const current = out.at(-1)!;
    current.events.push(e);
    const handed = handOffOf(e);
    if (handed.length > 0) {
      current.handOff = handed;
      out.push({ n: current.n + 1, events: [] });
    }
  }
  return out;
}

/** The response id of a run's segment. */
export const responseId = (runId: string, n: number): string => (n === 0 ? runId : `${runId}.${n}`);

/** The run and segment a response id names (a run id alone is segment 0). */
export function parseResponseId(id: string): { runId: string; n: number } {
  const m = /^(.+)\.(\d{1,6})$/.exec(id);
  return m ? { runId: m[1]!, n: Number(m[2]) } : { runId: id, n: 0 };
}
