/**
 * A durable point of a run's turn: its events appended together, fenced with the worker's token;
 * steering taken into the turn leaves the inbox with them; at the turn's end, the run's checkpoint
 * row and its next status commit in the same transaction (ADR-0021).
 */
import { TurnNotOverError } from '../../core/index.ts';
import type { NewEvent, SessionEvent } from '../../session/index.ts';
import type { RunRecord, StoreOps } from '../../store/index.ts';
import { totalTokens, type Usage } from '../../model/index.ts';
import { quotaCallId } from '../quotas/quota-call-id.ts';
import type { RunCheckpointState } from '../resume.ts';
import type { LifecycleContext } from './context.ts';
import { endTurn, type TurnEnd } from './end-turn.ts';
import type { Claimed } from './types.ts';

/** One durable point: its events, the steering it takes, and (at a turn's end) the checkpoint and the run's end. */
export interface DurablePoint {
  run: RunRecord;
  token: number;
  /** The loop's events, appended as they are (the run's id is stamped on each). */
  events: readonly NewEvent[];
  /** Ids of the steering inputs these events log (they leave the inbox here). */
  steered: readonly string[];
  /** The checkpoint the turn's end stores: its step, counters, and the index of its `step/end` in `events`. */
  checkpoint?: { step: number; index: number; state: RunCheckpointState };
  /** The turn's end: the run settles (see endTurn). */
  end?: Omit<TurnEnd, 'run' | 'token'>;
  /**
   * Told inside the transaction, before it commits, of the run as the turn's end left it and of the
   * event that moved it: a waiter that hears that event when it is published has the run at hand.
   */
  onSettled?: (run: RunRecord, endEventId: string | undefined) => void;
  /**
   * Settle the quota reservation of each model call these events record (its assistant message)
   * with its actual tokens and cost, in this transaction: exactly once with the log (ADR-0043).
   */
  settleQuotas?: boolean;
  /** Steering waits for the run: the turn may not end (TurnNotOverError, nothing of the point stands). */
  onSteeringWaiting?: () => void;
  /**
   * At a turn's end, the claim of the run that takes the worker slot this one leaves (ADR-0050):
   * made in the end's transaction, after everything else, so that the next run starts when this
   * one's end commits, with no transaction and no look for work of its own.
   */
  claimNext?: (tx: StoreOps) => Promise<Claimed | undefined>;
}

/** What a durable point committed: its events, and the run as a turn's end left it with the event that moved it. */
export interface DurablePointCommitted {
  appended: SessionEvent[];
  ended?: RunRecord;
  endEventId?: string;
  /** The run `claimNext` claimed, committed with the turn's end. */
  next?: Claimed;
}

/** The durable point inside `tx`. */
export async function appendDurablePoint(
  tx: StoreOps,
  c: LifecycleContext,
  p: DurablePoint,
): Promise<DurablePointCommitted> {
  const { run } = p;
  const fence = { runId: run.id, token: p.token };
  // Nothing of this transaction stands if the append is refused: what comes next is asked for
  // without waiting for its answer (one round trip where the store pipelines), in this order.
  const appending = c.log.append(run.sessionId, p.events, {
    fence,
    tx,
    trusted: true,
    runId: run.id,
    abortsTransaction: true,
  });
  appending.catch(() => {});
  for (const id of p.steered) await tx.inputs.remove(id);
  if (p.settleQuotas)
    for (const e of p.events)
      if (e.type === 'assistant/message' && e.turn !== undefined && e.step !== undefined)
        await tx.quotas.settle(
          quotaCallId(run.id, e.turn, e.step),
          totalTokens((e.data as { usage: Usage }).usage),
          (e.data as { cost: number }).cost,
        );
  // The stored checkpoint moves at the turn's end, with the run's record. A failed turn's end
  // is no step boundary: its working state may hold a step whose calls started but have no
  // result. The retry resumes from the last boundary and the log after it, which tells which
  // calls started (so none runs again unless it is idempotent). It is written once the append
  // tells its seq; nothing waits for its answer: it travels with what the turn's end sends next,
  // and a failure of it is thrown before theirs.
  const checkpointed =
    p.checkpoint && p.end && p.end.event.data.reason !== 'failed'
      ? appending.then((appended) =>
          tx.runs.putCheckpoint({
            runId: run.id,
            step: p.checkpoint!.step,
            seq: appended[p.checkpoint!.index]!.seq,
            state: p.checkpoint!.state,
          }),
        )
      : undefined;
  checkpointed?.catch(() => {});
  // The turn may only end when no steering is waiting for it (stored meanwhile, here or by another
  // process): then nothing of this commit stands, and the turn goes on to take it. Read after the
  // append, which holds the run's row (FOR SHARE on PostgreSQL) until this commits: a steer (which
  // reads the run FOR UPDATE) that committed before it is seen here; one after it finds the run
  // ended, and is refused. Its answer is awaited with the run's read, before the turn's end writes
  // anything (sent with the append and the run's read: one round trip).
  const mayEnd =
    p.end?.event.data.reason === 'completed'
      ? tx.inputs.list(run.sessionId, 'steer', run.id, 1).then((waiting) => {
          if (waiting.length === 0) return;
          p.onSteeringWaiting?.();
          throw new TurnNotOverError(`steering ${waiting[0]!.id} is waiting for run ${run.id}`);
        })
      : undefined;
  mayEnd?.catch(() => {});
  if (!p.end) return { appended: await appending };
  const settled = await endTurn(tx, c, { ...p.end, run, token: p.token, ...(mayEnd ? { mayEnd } : {}) }).catch(
    async (e: unknown) => {
      if (e instanceof TurnNotOverError) throw e;
      await checkpointed; // its failure, if it failed, is what failed the rest
      throw e;
    },
  );
  await checkpointed;
  const appended = await appending;
  const endEventId = settled.events.findLast(
    (e) => e.type === 'run/status' && e.runId === run.id && e.data.to === settled.run.status,
  )?.id;
  p.onSettled?.(settled.run, endEventId);
  // The turn is over: its events are stored compactly from now on (ADR-0009).
  await tx.events.seal(run.sessionId);
  const next = p.claimNext ? await p.claimNext(tx) : undefined;
  return {
    appended,
    ended: settled.run,
    ...(endEventId !== undefined ? { endEventId } : {}),
    ...(next ? { next } : {}),
  };
}
