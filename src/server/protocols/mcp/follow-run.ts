/**
 * Following a run for an MCP request until there is something to answer with. The run's feed (the
 * one feed, ADR-0038) is read from the run's start. Its text deltas, steps and tool calls are told
 * as progress. Where the client can answer by elicitation, the run's approvals and questions are
 * asked as they come, and the run is followed on while they are open.
 */
import { eventPosition, FeedOverflowError, follow } from '../../../session/index.ts';
import type { RunRecord } from '../../../store/index.ts';
import { isTerminal, SETTLED_STATUSES } from '../../../runs/lifecycle/run-status.ts';
import type { WaitingCall } from '../../../runs/lifecycle/waiting.ts';
import type { AppContext } from '../../context.ts';
import { openCalls, waitsForPeople } from './run-results.ts';

export interface FollowRunOptions {
  /** The request's end (the client went away, the server closes). */
  signal: AbortSignal;
  /** Told each text delta, step, tool call and wait. */
  progress?: (message: string) => Promise<void>;
  /** Asks the client one open call (an approval or a question): whether it could. Absent: it cannot be asked. */
  ask?: (run: RunRecord, call: WaitingCall) => Promise<boolean>;
  /** Aborted when the client left a call it was asked open (dismissed it): the run is returned as it stands. */
  left?: AbortSignal;
  /** Follow until the run ends (`tasks/result`), not only until it settles with nothing left to ask. */
  untilTerminal?: boolean;
}

/**
 * Follows the run and returns it once it ended, or (unless `untilTerminal`) once it settled on
 * something the client cannot answer here: a wait for time or a signal, a pause, an approval or a
 * question when the client cannot be asked or left one open. A client that goes away ends only the
 * following: the run goes on.
 */
export async function followRun(ctx: AppContext, run: RunRecord, o: FollowRunOptions): Promise<RunRecord> {
  const { rt } = ctx;
  const stop = new AbortController();
  const abort = () => stop.abort();
  o.signal.addEventListener('abort', abort, { once: true });
  o.left?.addEventListener('abort', abort, { once: true });
  if (o.signal.aborted || o.left?.aborted) stop.abort();
  const progress = async (message: string) => {
    if (!stop.signal.aborted) await o.progress?.(message);
  };
  const asked = new Set<string>();

  /** Asks the open approvals and questions not asked yet: whether every one of them is asked. */
  const askOpen = async (r: RunRecord): Promise<boolean> => {
    if (!o.ask || !waitsForPeople(r)) return false;
    let all = true;
    for (const call of openCalls(r)) {
      if (call.kind !== 'approval' && call.kind !== 'input') continue;
      if (asked.has(call.toolCallId)) continue;
      if (!(await o.ask(r, call))) {
        all = false;
        continue;
      }
      asked.add(call.toolCallId);
      await progress(`waiting for ${call.kind === 'approval' ? 'an approval of' : 'an answer to'} ${call.toolName}`);
    }
    return all;
  };
  /** Whether to follow the run on, as it stands now (asking what it waits for, where the client can answer). */
  const goesOn = async (r: RunRecord): Promise<boolean> => {
    if (isTerminal(r.status)) return false;
    if (!SETTLED_STATUSES.includes(r.status)) return true;
    const allAsked = await askOpen(r);
    return o.untilTerminal === true || allAsked;
  };

  try {
    const first = (await rt.sessions.log.read(run.sessionId, { runId: run.id, limit: 1 }))[0];
    // Steps are told as the first sign of them arrives: a delta of the step, or its durable start.
    const steps = new Set<string>();
    const step = async (turn: number | undefined, n: number | undefined) => {
      const key = `${turn}:${n}`;
      if (steps.has(key)) return;
      steps.add(key);
      await progress(`step ${steps.size}`);
    };
    let overflowed = false;
    const feed = follow(rt.sessions.log, run.sessionId, {
      runId: run.id,
      ...(first ? { after: eventPosition(first.seq - 1) } : {}),
      endAt: (e) => e.type === 'run/status' && isTerminal(e.data.to),
      isDone: async () => !(await goesOn(await rt.runs.get(run.id))),
      pollMs: 1000,
      queueLimit: ctx.options.sseQueueLimit,
      onOverflow: () => (overflowed = true),
      signal: stop.signal,
    });
    try {
      for await (const item of feed) {
        if (item.kind === 'delta') {
          await step(item.delta.turn, item.delta.step);
          if (item.delta.type === 'text/delta' && item.delta.delta !== '') await progress(item.delta.delta);
          continue;
        }
        const e = item.event;
        if (e.type === 'step/start') await step(e.turn, e.step);
        else if (e.type === 'tool/call') await progress(`calling ${e.data.toolName}`);
        else if (e.type === 'run/status' && !isTerminal(e.data.to) && SETTLED_STATUSES.includes(e.data.to)) {
          if (!(await goesOn(await rt.runs.get(run.id)))) break;
        }
      }
    } catch (e) {
      if (stop.signal.aborted) return await rt.runs.get(run.id);
      // A reader that fell behind (progress could not be sent fast enough) waits for the run without it.
      if (!(e instanceof FeedOverflowError) && !overflowed) throw e;
      for (let r = await rt.runs.get(run.id); await goesOn(r);) {
        if (stop.signal.aborted) break;
        r = await rt.runs
          .wait(run.id, { until: 'terminal', timeoutMs: 1000, signal: stop.signal })
          .catch(() => rt.runs.get(run.id));
      }
    }
    return await rt.runs.get(run.id);
  } finally {
    o.signal.removeEventListener('abort', abort);
    o.left?.removeEventListener('abort', abort);
  }
}
