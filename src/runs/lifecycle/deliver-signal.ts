/** A signal delivered to a run inside a transaction, exactly once: stored, and its wait ended if the run waits for it. */
import { NotFoundError, StoreError, type RunRecord, type StoreOps } from '../../store/index.ts';
import { applyDecisions } from './apply-decisions.ts';
import type { LifecycleContext } from './context.ts';
import { IllegalTransitionError, isTerminal, isWaiting } from './run-status.ts';
import { payloadIssues, undecided, type Waiting } from './waiting.ts';

/** The most signals one run keeps (delivered and taken, or kept for a wait). */
export const MAX_SIGNALS_PER_RUN = 100;

/**
 * Delivers the signal `name` to a run (its name and payload size already checked, see
 * `checkSignal`): a second delivery is refused (`already_delivered`), as a payload that does not
 * match the waiting call's schema (`validation`) and a run that has MAX_SIGNALS_PER_RUN signals
 * already (`signal_limit`). If the run waits for it, its wait ends here; else it is kept.
 */
export async function deliverSignal(
  tx: StoreOps,
  c: LifecycleContext,
  runId: string,
  name: string,
  payload: unknown,
  source: 'api' | 'callback' | 'library',
  now: number,
): Promise<{ run: RunRecord; consumed: boolean }> {
  const run = await tx.runs.get(runId);
  if (!run) throw new NotFoundError('run', runId);
  // A repeat is told so, also after the run it resumed has ended.
  if (await tx.waits.getSignal(runId, name))
    throw new StoreError('already_delivered', `signal ${name} was already delivered to run ${runId}`);
  if (isTerminal(run.status))
    throw new IllegalTransitionError(runId, run.status, 'queued', 'a finished run waits for no signal');
  if ((await tx.waits.countSignals(runId)) >= MAX_SIGNALS_PER_RUN) {
    throw new StoreError(
      'signal_limit',
      `run ${runId} has ${MAX_SIGNALS_PER_RUN} signals already, the most a run keeps`,
    );
  }
  const waiting = isWaiting(run.status) ? (run.waiting as unknown as Waiting | null) : null;
  const call = waiting ? undecided(waiting).find((w) => w.wait?.kind === 'signal' && w.wait.name === name) : undefined;
  if (call && call.wait?.kind === 'signal') {
    const issues = payloadIssues(call.wait.schema, payload);
    if (issues)
      throw new StoreError('validation', `the payload of signal ${name} does not match its schema: ${issues}`);
  }
  const stored = await tx.waits.putSignal({
    runId,
    name,
    payload: payload ?? null,
    source,
    receivedAt: now,
    consumedAt: null,
  });
  if (!stored) throw new StoreError('already_delivered', `signal ${name} was already delivered to run ${runId}`);
  if (!call) return { run, consumed: false };
  // Its wait takes it (with whatever else already came), as every wait's end does.
  const after = await applyDecisions(tx, c, run, waiting!, {}, [], `signal ${name} arrived`);
  return { run: after.run, consumed: true };
}
