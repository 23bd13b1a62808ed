/** Steering for a run, stored inside a transaction with its idempotency key: the run takes it at its next step boundary. */
import type { UserMessage } from '../../model/index.ts';
import { NotFoundError, type RunRecord, type StoreOps } from '../../store/index.ts';
import { recordEffect, refuseTakenKey, type IdempotencyClaim } from './idempotency.ts';
import { IllegalTransitionError, isTerminal } from './run-status.ts';

/**
 * Checks that the run takes input and stores the message for it, in one transaction: a turn's end
 * either sees this steering (and goes on to take it) or has committed first (and the run refuses it here).
 * Returns the run as it was read.
 */
export async function steer(
  tx: StoreOps,
  runId: string,
  message: UserMessage,
  idempotency: IdempotencyClaim | undefined,
): Promise<RunRecord> {
  if (idempotency) await refuseTakenKey(tx, idempotency);
  const r = await tx.runs.get(runId);
  if (!r) throw new NotFoundError('run', runId);
  if (isTerminal(r.status))
    throw new IllegalTransitionError(runId, r.status, r.status, 'a finished run takes no more input');
  await tx.inputs.add({
    id: message.id,
    sessionId: r.sessionId,
    kind: 'steer',
    runId,
    payload: { message },
    createdAt: Date.now(),
  });
  if (idempotency) await recordEffect(tx, idempotency, { outcome: 'steered', message_id: message.id, run_id: runId });
  return r;
}
