/** A run's end (completed, failed, cancelled, timed_out) inside a transaction, and what comes with it. */
import { newId } from '../../core/index.ts';
import { addUsage, type Usage, type UserMessage } from '../../model/index.ts';
import type { NewEvent, SessionEvent } from '../../session/index.ts';
import { NotFoundError, type JsonObject, type RunRecord, type RunStatus, type StoreOps } from '../../store/index.ts';
import { appendIn, type LifecycleContext } from './context.ts';
import { promote, readInLine } from './promote.ts';
import { IllegalTransitionError, isTerminal, TERMINAL_STATUSES, type FinalStatus } from './run-status.ts';
import { usageOf } from './run-spec.ts';
import { transition } from './transition.ts';
import type { FinishOptions } from './types.ts';

/**
 * Ends a run (completed, failed, cancelled, timed_out) inside `tx` (a log transaction: its events
 * are published when it commits): tool calls left open get a result (no dangling call), the turn is
 * closed in the log if the loop could not do it, the usage of children is rolled up, the parent
 * learns its child's cost, and the session's next enqueued message becomes the next run.
 */
export async function finish(
  tx: StoreOps,
  c: LifecycleContext,
  run: { id: string; sessionId: string },
  to: FinalStatus,
  o: FinishOptions,
): Promise<{ run: RunRecord; next?: RunRecord; events: SessionEvent[] }> {
  const runId = run.id;
  // The children's totals are read with the run (one round trip where the store pipelines), and
  // its steering is taken with them (see below): only if it has not ended, as its read, which
  // holds the row, found it. A run that moved on otherwise fails the transaction below.
  const children = o.usage !== undefined ? endedChildren(tx, runId) : undefined;
  children?.catch(() => {});
  const read = tx.runs.get(runId);
  const taken = tx.inputs.take(run.sessionId, 'steer', runId, undefined, { unlessEnded: true });
  taken.catch(() => {});
  // What comes up next in the session (the run's end changes none of it), read with them too; not
  // used when the run is itself queued behind (it makes way for nothing).
  const inLineRead = readInLine(tx, run.sessionId);
  const [current] = await Promise.all([read, o.mayEnd]);
  if (!current) throw new NotFoundError('run', runId);
  if (isTerminal(current.status)) return { run: current, events: [] };
  if (o.fencingToken !== undefined && current.fencingToken !== o.fencingToken) {
    throw new IllegalTransitionError(runId, current.status, to, 'this worker no longer holds the run');
  }
  const events: SessionEvent[] = [];
  if (o.closeOpenCalls) events.push(...(await closeOpenCalls(tx, c, current, to)));
  // Steering the run never took (it ended first: cancelled, failed, timed out) is not dropped:
  // it joins the conversation with the run's end, where the next run sees it.
  const inLine = current.queuedBehind ? undefined : inLineRead;
  const untaken = await taken;
  if (untaken.length > 0) {
    events.push(
      ...(await appendIn(
        tx,
        c,
        current.sessionId,
        untaken.map((i) => ({
          type: 'user/message' as const,
          runId: current.id,
          ...(current.turn !== null ? { turn: current.turn } : {}),
          data: { message: (i.payload as { message: UserMessage }).message, via: 'steer' as const },
        })),
      )),
    );
  }

  // The worker reports its own usage; children's comes on top.
  const { usage, cost } =
    o.usage !== undefined
      ? withChildren(await children!, o.usage, o.cost ?? current.cost)
      : { usage: usageOf(current.usage), cost: current.cost };
  const t = await transition(tx, c, current, to, {
    ...(o.reason ? { reason: o.reason } : {}),
    ...(o.error ? { error: o.error } : {}),
    patch: { usage: usage as unknown as JsonObject, cost },
    guard: { fencingToken: current.fencingToken },
  });
  events.push(...t.events);
  // A run that ended while queued behind never came up: its message leaves the inbox with it.
  if (current.queuedBehind) await tx.inputs.take(current.sessionId, 'message', current.id, 1);
  if (current.parentRunId) {
    // Once, when the child ends: also when its parent ended first (cancelled while the child ran),
    // since the parent's own total only counted the children that had ended (see withChildren).
    const parent = await tx.runs.get(current.parentRunId);
    if (parent)
      await tx.runs.update(parent.id, {
        usage: addUsage(usageOf(parent.usage), usage) as unknown as JsonObject,
        cost: parent.cost + cost,
      });
  }
  // Only the session's active run makes way for the next; one that ends while queued behind does not.
  const next = current.queuedBehind ? undefined : await promote(tx, c, current.sessionId, o.resolveAgent, inLine);
  if (next) events.push(...next.events);
  return { run: t.run, ...(next?.run ? { next: next.run } : {}), events };
}

/** The run's children that have ended (their totals are the run's too, see withChildren). */
export function endedChildren(tx: StoreOps, runId: string): Promise<RunRecord[]> {
  return tx.runs.list({ parentRunId: runId, statuses: TERMINAL_STATUSES, limit: 10_000 });
}

/**
 * A run's total: its own usage and cost plus those of its children that have ended. A child
 * that has not ended adds its total to its parent's row when it ends, so each child counts once.
 */
export function withChildren(
  children: readonly RunRecord[],
  own: Usage,
  ownCost: number,
): { usage: Usage; cost: number } {
  let usage = own;
  let cost = ownCost;
  for (const c of children) {
    usage = addUsage(usage, usageOf(c.usage));
    cost += c.cost;
  }
  return { usage, cost };
}

/**
 * Gives every tool call of the run that has no result a `cancelled` (or timeout) result, and
 * closes a turn the loop left open, so the history never has a dangling call.
 */
async function closeOpenCalls(
  tx: StoreOps,
  c: LifecycleContext,
  run: RunRecord,
  to: RunStatus,
): Promise<SessionEvent[]> {
  const mine = await c.log.read(run.sessionId, { runId: run.id }, tx);
  const results = new Set<string>();
  const toolMessageOf = new Map<string, string>();
  const open: Array<{ toolCallId: string; toolName: string; assistantId: string; step: number | undefined }> = [];
  let turnOpen = false;
  let steps = 0;
  for (const e of mine) {
    if (e.type === 'turn/start') turnOpen = true;
    else if (e.type === 'turn/end') turnOpen = false;
    else if (e.type === 'step/start') steps = Math.max(steps, e.step ?? 0);
    else if (e.type === 'tool/result') {
      results.add(e.data.toolCallId);
      toolMessageOf.set(e.data.toolCallId, e.data.toolMessageId);
    } else if (e.type === 'assistant/message') {
      for (const p of e.data.message.content) {
        if (p.type === 'tool-call')
          open.push({ toolCallId: p.toolCallId, toolName: p.toolName, assistantId: e.data.message.id, step: e.step });
      }
    }
  }
  const unanswered = open.filter((c) => !results.has(c.toolCallId));
  const why =
    to === 'timed_out'
      ? 'the run timed out before this call had a result'
      : 'the run was cancelled before this call had a result';
  const events: NewEvent[] = [];
  const messageFor = new Map<string, string>();
  for (const c of unanswered) {
    // Results of one model decision share a tool message.
    const sibling = open.find((o) => o.assistantId === c.assistantId && toolMessageOf.has(o.toolCallId));
    const toolMessageId = messageFor.get(c.assistantId) ?? (sibling ? toolMessageOf.get(sibling.toolCallId)! : newId());
    messageFor.set(c.assistantId, toolMessageId);
    events.push({
      type: 'tool/result',
      runId: run.id,
      ...(run.turn !== null ? { turn: run.turn } : {}),
      ...(c.step !== undefined ? { step: c.step } : {}),
      data: {
        toolCallId: c.toolCallId,
        toolName: c.toolName,
        output: { type: 'error', code: 'cancelled', message: why },
        toolMessageId,
        durationMs: 0,
      },
    });
  }
  if (turnOpen) {
    events.push({
      type: 'turn/end',
      runId: run.id,
      ...(run.turn !== null ? { turn: run.turn } : {}),
      data: { reason: 'cancelled', steps, usage: usageOf(run.usage), cost: run.cost },
    });
  }
  return events.length ? appendIn(tx, c, run.sessionId, events) : [];
}
