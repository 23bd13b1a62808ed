/**
 * A rerun's run, created in the transaction that forks its session (issue 40, ADR-0037): queued,
 * its lineage in its options and in `rerun_of`. From a step, it continues the source run's turn in
 * the fork (the trigger message is in the copied path); with a replacement message, the message
 * starts a new turn there, as a message sent to the session would.
 */
import type { AgentDefinition } from '../../core/index.ts';
import type { UserMessage } from '../../model/index.ts';
import type { SessionEvent } from '../../session/index.ts';
import { NotFoundError, type RunRecord, type StoreOps } from '../../store/index.ts';
import type { RerunLineage } from '../reruns/rerun-lineage.ts';
import { checkedMessage } from './accept.ts';
import { appendIn, type LifecycleContext } from './context.ts';
import { newRunOf, queuedStatus } from './run-spec.ts';
import type { RunOptions } from './types.ts';

export interface NewRerun {
  /** The agent it runs with, its overrides applied (its spec is recorded on the run). */
  agent: AgentDefinition;
  lineage: RerunLineage;
  options: RunOptions;
  /** The source run's trigger message, continued (from a step) ... */
  trigger: UserMessage;
  /** ... in the source run's turn; */
  turn: number;
  /** or a message that replaces it, in a turn of its own. */
  message?: UserMessage;
  /** Runs in the same transaction once the run exists (a batch item records it: exactly one rerun per item). */
  within?: (tx: StoreOps, run: RunRecord) => Promise<void>;
}

/** Creates the rerun's run in the forked session `sessionId`, inside the fork's transaction `tx`. */
export async function createRerun(
  tx: StoreOps,
  c: LifecycleContext,
  sessionId: string,
  r: NewRerun,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const session = await tx.sessions.get(sessionId);
  if (!session) throw new NotFoundError('session', sessionId);
  const options = { ...r.options, rerun: r.lineage } as unknown as RunOptions;
  const more = { rerunOf: r.lineage.of.runId };
  if (r.message) {
    const turn = session.lastTurn + 1;
    const message = checkedMessage(c, r.message);
    const run = await tx.runs.create(newRunOf(sessionId, message, r.agent, options, { ...more, turn }));
    const events = await appendIn(
      tx,
      c,
      sessionId,
      [
        { type: 'user/message', runId: run.id, turn, data: { message, via: 'input' } },
        { type: 'run/status', runId: run.id, turn, data: { ...queuedStatus(r.agent), reason: rerunReason(r.lineage) } },
      ],
      undefined,
      true,
    );
    await r.within?.(tx, run);
    return { run, events };
  }
  const run = await tx.runs.create(newRunOf(sessionId, r.trigger, r.agent, options, { ...more, turn: r.turn }));
  const events = await appendIn(
    tx,
    c,
    sessionId,
    [
      {
        type: 'run/status',
        runId: run.id,
        turn: r.turn,
        data: { ...queuedStatus(r.agent), reason: rerunReason(r.lineage) },
      },
    ],
    undefined,
    true,
  );
  await r.within?.(tx, run);
  return { run, events };
}

const rerunReason = (l: RerunLineage): string => `rerun of run ${l.of.runId} from step ${l.of.step}`;
