/** An approval decision or an answer to a run's question, recorded once inside its transaction (approve, deny, answer). */
import type { JsonValue } from '../../model/index.ts';
import type { NewEvent, SessionEvent } from '../../session/index.ts';
import { NotFoundError, StoreError, type RunRecord, type RunStatus, type StoreOps } from '../../store/index.ts';
import { ArgumentsNotEditableError } from '../arguments-not-editable-error.ts';
import { applyDecisions } from './apply-decisions.ts';
import type { LifecycleContext } from './context.ts';
import { IllegalTransitionError, WAITING_FOR_PEOPLE } from './run-status.ts';
import type { Waiting } from './waiting.ts';

/** An approval (`approved`, maybe with edited `input`), a denial (with its `reason`), or an `answer`. */
export interface DecisionInput {
  approved?: boolean;
  input?: JsonValue;
  reason?: string;
  answer?: JsonValue;
}

/** Records an approval decision or an answer once; the run is queued again when nothing is left to decide. */
export async function decide(
  tx: StoreOps,
  c: LifecycleContext,
  runId: string,
  toolCallId: string,
  d: DecisionInput,
): Promise<{ run: RunRecord; events: SessionEvent[] }> {
  const run = await tx.runs.get(runId);
  if (!run) throw new NotFoundError('run', runId);
  const waiting = run.waiting as unknown as Waiting | null;
  const call = waiting?.calls.find((c) => c.toolCallId === toolCallId);
  const wantKind = d.answer !== undefined ? 'input' : 'approval';
  const wantStatus: RunStatus = wantKind === 'input' ? 'waiting_for_user' : 'waiting_approval';
  const what = (kind: string) =>
    kind === 'input' ? 'a question' : kind === 'approval' ? 'an approval' : `a ${kind} wait`;
  if (!waiting || !call) {
    // Not waited for now. An id the run never asked about is no such thing (404), whatever
    // the run's state; one it asked about before is refused by the state it is in now (409).
    const asked = await askedBefore(tx, c, run, toolCallId);
    if (!asked)
      throw new StoreError(
        'not_found',
        `run ${runId} has no ${wantKind === 'input' ? 'question' : 'approval'} ${toolCallId}`,
      );
    throw new IllegalTransitionError(
      runId,
      run.status,
      'queued',
      `it is ${run.status}: ${what(asked)} ${toolCallId} is not waiting for ${wantKind === 'input' ? 'an answer' : 'a decision'}`,
    );
  }
  // A run that waits for no decision, or a call of another kind: the run's state refuses it (409).
  if (!WAITING_FOR_PEOPLE.includes(run.status)) {
    throw new IllegalTransitionError(runId, run.status, 'queued', `it is ${run.status} and waits for no decision`);
  }
  if (call.kind !== wantKind) {
    throw new IllegalTransitionError(
      runId,
      run.status,
      'queued',
      `${toolCallId} is ${what(call.kind)}, not ${what(wantKind)}`,
    );
  }
  const previous = waiting.decisions[toolCallId];
  if (previous) {
    const same = JSON.stringify({ ...previous, at: 0 }) === JSON.stringify({ ...d, at: 0 });
    if (same) return { run, events: [] as SessionEvent[] };
    throw new StoreError(
      'already_decided',
      `${wantKind === 'input' ? 'question' : 'approval'} ${toolCallId} of run ${runId} was already answered`,
    );
  }
  if (run.status !== wantStatus)
    throw new IllegalTransitionError(runId, run.status, 'queued', `it is ${run.status}, not ${wantStatus}`);
  if (call.unknownOutcome && d.input !== undefined) throw new ArgumentsNotEditableError(runId, toolCallId);
  const decision = { ...d, at: c.clock.now() };
  const event: NewEvent =
    wantKind === 'input'
      ? {
          type: 'user/answer',
          runId,
          ...(run.turn !== null ? { turn: run.turn } : {}),
          data: { toolCallId, answer: d.answer! },
        }
      : {
          type: 'tool/decision',
          runId,
          ...(run.turn !== null ? { turn: run.turn } : {}),
          data: {
            toolCallId,
            approved: d.approved === true,
            ...(d.reason !== undefined ? { reason: d.reason } : {}),
            // On an unknown outcome (ADR-0018) the call runs again as it ran: with its input and key.
            ...(call.unknownOutcome
              ? { unknownOutcome: true as const, editedInput: call.input }
              : d.input !== undefined
                ? { editedInput: d.input }
                : {}),
          },
        };
  // Queued when nothing is left to wait for (the decisions are in the log, where the resumed turn
  // reads them), else what is still awaited (approvals, questions, signals, time) says the status.
  const left = waiting.calls.filter((c) => c.toolCallId !== toolCallId && !waiting.decisions[c.toolCallId]);
  return applyDecisions(
    tx,
    c,
    run,
    waiting,
    { [toolCallId]: decision },
    [event],
    left.length === 0 ? (wantKind === 'input' ? 'answered' : 'decided') : 'partly decided',
  );
}

/** Whether the run ever asked for an approval or an answer on this call (its log says), and which. */
async function askedBefore(
  tx: StoreOps,
  c: LifecycleContext,
  run: RunRecord,
  toolCallId: string,
): Promise<'approval' | 'input' | undefined> {
  for (const e of await c.log.read(run.sessionId, { runId: run.id }, tx)) {
    if (e.type === 'tool/approval' && e.data.toolCallId === toolCallId) return 'approval';
    if (e.type === 'user/question' && e.data.toolCallId === toolCallId) return 'input';
  }
  return undefined;
}
