/**
 * A message taken by a session (accept): a new run (queued, its message first in its turn), or a run
 * queued behind the session's active one (enqueue), or steering stored for the active run.
 */
import type { AgentDefinition } from '../../core/index.ts';
import type { UserMessage } from '../../model/index.ts';
import { checkedUserMessage, type SessionEvent } from '../../session/index.ts';
import {
  NotFoundError,
  RunBusyError,
  sessionInArchive,
  StoreError,
  type RunRecord,
  type SessionRecord,
  type StoreOps,
} from '../../store/index.ts';
import { appendIn, type LifecycleContext } from './context.ts';
import { recordEffect, refuseTakenKey, type IdempotencyClaim } from './idempotency.ts';
import { newRunOf, queuedStatus } from './run-spec.ts';
import type { Accepted, Claimed, IfBusy, RunOptions } from './types.ts';

/** What a send takes besides its message: the run's options, its parent (a subagent's), its key and a claim. */
export interface SendInTx {
  options?: RunOptions;
  parent?: { runId: string; toolCallId: string };
  idempotency?: IdempotencyClaim;
  /**
   * Claims a run for a worker of this process that has a free slot, when the message created
   * one: in the same transaction, so that the run starts without a commit of its own (ADR-0027).
   * It claims as the worker would, the oldest claimable run first, which may be another one.
   */
  claim?: (tx: StoreOps) => Promise<Claimed | undefined>;
}

/**
 * A user message for a session, inside `tx`: a new run, or (when a run is active) what `ifBusy`
 * says, its idempotency key recorded with it, and (`claim`) a run claimed for a worker of this
 * process in the same transaction, so that the run starts without a commit of its own (ADR-0027).
 */
export async function send(
  tx: StoreOps,
  c: LifecycleContext,
  sessionId: string,
  message: UserMessage,
  agent: AgentDefinition,
  ifBusy: IfBusy,
  o: SendInTx,
): Promise<Accepted> {
  // Checked first, under the write lock: a request that lost the key to another changes nothing.
  if (o.idempotency) await refuseTakenKey(tx, o.idempotency);
  const accepted = await accept(tx, c, sessionId, message, agent, ifBusy, o);
  if (o.idempotency)
    await recordEffect(tx, o.idempotency, {
      outcome: accepted.outcome,
      message_id: accepted.message.id,
      run_id: accepted.run.id,
    });
  if (accepted.outcome !== 'created' || !o.claim) return accepted;
  const claimed = await o.claim(tx);
  if (!claimed) return accepted;
  // The message's run as committed: running, if it was the one claimed.
  return { ...accepted, claimed, ...(claimed.run.id === accepted.run.id ? { run: claimed.run } : {}) };
}

/** What a message does to its session (`send` without the transaction around it; schedules fire through it). */
export async function accept(
  tx: StoreOps,
  c: LifecycleContext,
  sessionId: string,
  message: UserMessage,
  agent: AgentDefinition,
  ifBusy: IfBusy,
  o: { options?: RunOptions; parent?: { runId: string; toolCallId: string } },
): Promise<Accepted> {
  const session = await tx.sessions.get(sessionId);
  if (!session) throw new NotFoundError('session', sessionId);
  if (session.erasedAt !== null) throw new StoreError('session_erased', `session ${sessionId} was erased`);
  if (session.inArchiveAt !== null) throw sessionInArchive(sessionId);
  if (session.archivedAt !== null)
    throw new StoreError('session_archived', `session ${sessionId} is archived: it takes no new messages`);
  // The caller's message is checked before anything keeps it, whatever it does: a steer is logged
  // by the run's own (unchecked) commits, and an enqueued one enters the log with another run's end.
  const checked = checkedMessage(c, message);
  const active = await tx.runs.active(sessionId);
  if (active) {
    switch (ifBusy) {
      case 'reject':
        throw new RunBusyError(sessionId, active.id);
      case 'enqueue': {
        const queued = await enqueueRun(tx, c, sessionId, active, checked, agent, o.options ?? {});
        return { outcome: 'enqueued' as const, message: checked, ...queued };
      }
      case 'steer':
        await tx.inputs.add({
          id: checked.id,
          sessionId,
          kind: 'steer',
          runId: active.id,
          payload: { message: checked },
          createdAt: Date.now(),
        });
        return { outcome: 'steered' as const, message: checked, run: active, events: [] };
      case 'interrupt':
        // The caller cancels the active run first (gracefully if it can); here it must be gone.
        throw new RunBusyError(sessionId, active.id);
    }
  }
  const created = await createRun(tx, c, session, checked, agent, o.options ?? {}, o.parent, true);
  return { outcome: 'created' as const, message: checked, ...created };
}

/** The message as its event's schema parses it; InvalidEventError when it is not a user message, or says nothing. */
export function checkedMessage(c: LifecycleContext, message: UserMessage): UserMessage {
  return checkedUserMessage(c.log.registry, message);
}

/**
 * A run for an enqueued message, at once: queued behind the session's active run (not claimable,
 * no turn yet), with its status event. The message waits in the inbox, out of the log, so the
 * active run never sees it; it enters the log when the run comes up (`promote`).
 */
async function enqueueRun(
  tx: StoreOps,
  c: LifecycleContext,
  sessionId: string,
  active: RunRecord,
  message: UserMessage,
  agent: AgentDefinition,
  options: RunOptions,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const run = await tx.runs.create(newRunOf(sessionId, message, agent, options, { queuedBehind: true }));
  await tx.inputs.add({
    id: message.id,
    sessionId,
    kind: 'message',
    runId: run.id,
    payload: { message },
    createdAt: run.createdAt,
  });
  const events = await appendIn(tx, c, sessionId, [
    { type: 'run/status', runId: run.id, data: { ...queuedStatus(agent), reason: `queued behind run ${active.id}` } },
  ]);
  return { run, events };
}

/**
 * Appends the trigger message and creates the run (queued) with its status event. The message is
 * checked against its event's schema unless `checked` says it was (see checkedMessage); the
 * status event is built here from typed values and needs no check (as every run/status this
 * book appends).
 */
export async function createRun(
  tx: StoreOps,
  c: LifecycleContext,
  session: SessionRecord,
  message: UserMessage,
  agent: AgentDefinition,
  options: RunOptions,
  parent?: { runId: string; toolCallId: string },
  checked = false,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const sessionId = session.id;
  const turn = session.lastTurn + 1;
  const trigger = checked ? message : checkedMessage(c, message);
  const run = await tx.runs.create(
    newRunOf(sessionId, trigger, agent, options, {
      turn,
      ...(parent ? { parentRunId: parent.runId, parentToolCallId: parent.toolCallId } : {}),
    }),
  );
  const id = run.id;
  const events = await appendIn(
    tx,
    c,
    sessionId,
    [
      { type: 'user/message', runId: id, turn, data: { message: trigger, via: 'input' } },
      {
        type: 'run/status',
        runId: id,
        turn,
        data: { ...queuedStatus(agent), ...(parent ? { parentRunId: parent.runId } : {}) },
      },
    ],
    undefined,
    true,
  );
  return { run, events };
}
