/**
 * A run's status as an A2A task state (issue 41, docs/protocols.md), and the body of an A2A push
 * notification: a v1.0 StreamResponse with the task's status update, as ProtoJSON. Here, beside the
 * outbox, because every process that commits a status change writes its deliveries (a worker
 * without the server too); the A2A server (server/protocols/a2a) maps states with the same function.
 */
import type { RunRecord, RunStatus } from '../../store/index.ts';

/** The A2A v1.0 task states a run can be in (their ProtoJSON names). */
export type A2aTaskStateName =
  | 'TASK_STATE_SUBMITTED'
  | 'TASK_STATE_WORKING'
  | 'TASK_STATE_INPUT_REQUIRED'
  | 'TASK_STATE_COMPLETED'
  | 'TASK_STATE_FAILED'
  | 'TASK_STATE_CANCELED';

/**
 * The task state of a run status. `started`: whether the run ran before (a queued run that did,
 * waiting to go on after an answer, say, is still working). Waiting for an approval or an answer is
 * input-required; waiting for a time, a signal or a resume (a pause) is working: the agent is still
 * on it and nothing is asked of the client.
 */
export function a2aTaskState(status: RunStatus, started: boolean): A2aTaskStateName {
  switch (status) {
    case 'queued':
      return started ? 'TASK_STATE_WORKING' : 'TASK_STATE_SUBMITTED';
    case 'waiting_approval':
    case 'waiting_for_user':
      return 'TASK_STATE_INPUT_REQUIRED';
    case 'completed':
      return 'TASK_STATE_COMPLETED';
    case 'failed':
    case 'timed_out':
      return 'TASK_STATE_FAILED';
    case 'cancelled':
      return 'TASK_STATE_CANCELED';
    default:
      return 'TASK_STATE_WORKING';
  }
}

/** Why a run ended, for its status message: its error's message, or the reason of its status change. */
function endNote(to: RunStatus, error: unknown, reason: unknown): string | undefined {
  if (to !== 'failed' && to !== 'timed_out' && to !== 'cancelled') return undefined;
  const message = (error as { message?: unknown } | null | undefined)?.message;
  if (typeof message === 'string' && message !== '') return message;
  return typeof reason === 'string' && reason !== '' ? reason : undefined;
}

/** A push notification's body: a StreamResponse with one status update (ProtoJSON). */
function statusUpdateBody(o: {
  taskId: string;
  contextId: string;
  state: A2aTaskStateName;
  at: number;
  note: string | undefined;
  noteId: string;
}): string {
  const message =
    o.note === undefined
      ? {}
      : {
          message: {
            messageId: o.noteId,
            contextId: o.contextId,
            taskId: o.taskId,
            role: 'ROLE_AGENT',
            parts: [{ text: o.note }],
          },
        };
  return JSON.stringify({
    statusUpdate: {
      taskId: o.taskId,
      contextId: o.contextId,
      status: { state: o.state, timestamp: new Date(o.at).toISOString(), ...message },
    },
  });
}

/**
 * The push notification of a `run/status` event, or undefined when the task's state does not
 * change with it: a run queued again (after an answer, a sleep, a lost worker) is still working,
 * and its next status says more; a move between two statuses of one state (running to sleeping)
 * is not news.
 */
export function a2aPushBody(e: {
  id: string;
  runId?: string | undefined;
  sessionId: string;
  time: number;
  data: unknown;
}): string | undefined {
  const d = e.data as { from?: RunStatus | null; to: RunStatus; reason?: unknown; error?: unknown };
  if (e.runId === undefined) return undefined;
  const started = d.from !== null && d.from !== undefined;
  if (d.to === 'queued' && started) return undefined;
  const state = a2aTaskState(d.to, started);
  if (started && d.from !== 'queued' && a2aTaskState(d.from!, true) === state) return undefined;
  return statusUpdateBody({
    taskId: e.runId,
    contextId: e.sessionId,
    state,
    at: e.time,
    note: endNote(d.to, d.error, d.reason),
    noteId: e.id,
  });
}

/** The push notification of a run's status as it is now (the first delivery of a new config). */
export function a2aPushBodyOf(run: RunRecord, at: number, id: string): string {
  return statusUpdateBody({
    taskId: run.id,
    contextId: run.sessionId,
    state: a2aTaskState(run.status, run.startedAt !== null),
    at,
    note: endNote(run.status, run.error, undefined),
    noteId: id,
  });
}
