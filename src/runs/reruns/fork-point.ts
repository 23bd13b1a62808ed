/**
 * Where a rerun from step `from` of a run forks its session: at the last entry of the session
 * before that step's first model request (the path that request was built from: the trigger
 * message, the steps before, any steering taken), and what the rerun continues there (the turn,
 * the trigger message). With a replacement message the fork is at the trigger's parent instead.
 */
import type { UserMessage } from '../../model/index.ts';
import type { SessionEvent, SessionLog } from '../../session/index.ts';
import type { RunRecord } from '../../store/index.ts';
import { RerunRequestError } from './rerun-agent.ts';

export interface ForkPoint {
  /** The entry to fork at; null: the new session starts empty (a replaced first message). */
  entryId: string | null;
  trigger: UserMessage;
  /** The source run's turn, which the rerun continues (from step 1 with a new message: a new turn). */
  turn: number;
  /** The first and last step the source run recorded. */
  steps: { first: number; last: number };
}

/** The fork point of `run` (whose events are `events`) for a rerun from `from`. RerunRequestError when it has none. */
export async function forkPoint(
  log: SessionLog,
  run: RunRecord,
  events: readonly SessionEvent[],
  from: number,
  replaceMessage: boolean,
): Promise<ForkPoint> {
  const stepsRecorded = events.flatMap((e) => (e.type === 'request/header' && e.step !== undefined ? [e.step] : []));
  if (stepsRecorded.length === 0)
    throw new RerunRequestError('from', `run ${run.id} recorded no step yet (status ${run.status}): nothing to rerun`);
  const steps = { first: Math.min(...stepsRecorded), last: Math.max(...stepsRecorded) };
  if (!Number.isInteger(from) || from < steps.first || from > steps.last)
    throw new RerunRequestError(
      'from',
      `run ${run.id} recorded steps ${steps.first} to ${steps.last}; from ${from} is not one of them`,
    );
  if (replaceMessage && from !== steps.first)
    throw new RerunRequestError(
      'message',
      `a replacement message reruns the turn from its start (from ${steps.first}), not from step ${from}`,
    );
  const turn = run.turn ?? events.find((e) => e.turn !== undefined)?.turn;
  if (turn === undefined) throw new RerunRequestError('from', `run ${run.id} has no turn on record`);

  const requestSeq = events.find((e) => e.type === 'request/header' && e.step === from)!.seq;
  const trigger = await triggerOf(log, run, events);
  if (replaceMessage) return { entryId: trigger.event.parentId ?? null, trigger: trigger.message, turn, steps };

  // The run's own entries first; a rerun's first step forks at its session's copied path.
  let entry = events.findLast((e) => e.entry && e.seq < requestSeq);
  if (!entry) entry = await lastEntryBefore(log, run.sessionId, requestSeq);
  if (!entry) throw new RerunRequestError('from', `run ${run.id}: no entry precedes step ${from}`);
  return { entryId: entry.id, trigger: trigger.message, turn, steps };
}

/** The user message that started the run, and its entry: the run's own, or (a rerun's) the copy in its session. */
async function triggerOf(
  log: SessionLog,
  run: RunRecord,
  events: readonly SessionEvent[],
): Promise<{ message: UserMessage; event: SessionEvent }> {
  const isTrigger = (e: SessionEvent): e is SessionEvent & { type: 'user/message' } =>
    e.type === 'user/message' && (run.triggerMessageId === null || e.data.message.id === run.triggerMessageId);
  let found = events.find(isTrigger);
  for (let after = 0; !found;) {
    const page = await log.read(run.sessionId, { afterSeq: after, limit: 1_000 });
    found = page.find(isTrigger);
    if (page.length < 1_000) break;
    after = page.at(-1)!.seq;
  }
  if (!found) throw new RerunRequestError('from', `run ${run.id}: its trigger message is not in its session`);
  return { message: found.data.message, event: found };
}

/** The session's last entry before `seq`. */
async function lastEntryBefore(log: SessionLog, sessionId: string, seq: number): Promise<SessionEvent | undefined> {
  let last: SessionEvent | undefined;
  for (let after = 0; ;) {
    const page = await log.read(sessionId, { afterSeq: after, untilSeq: seq - 1, limit: 1_000 });
    last = page.findLast((e) => e.entry) ?? last;
    if (page.length < 1_000) return last;
    after = page.at(-1)!.seq;
  }
}
