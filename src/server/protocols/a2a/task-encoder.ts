/**
 * A run's feed as A2A task events (issue 41, ADR-0038): an encoder of the one feed, never a second
 * one. A pure function of the feed items and a small state: the task's status, its artifacts (one
 * per assistant message with text, streamed from its deltas), its history and what it waits for.
 *
 * - `item(item)` updates the state and returns the events the item makes: the task itself at the
 *   run's first status (its creation), a status update when the task's state changes (or what it
 *   asks for), artifact chunks for the text as it streams (the first with `append: false`, the
 *   last with `lastChunk: true`).
 * - `snapshotEvent()` folds what was seen into one `task` event: what a resubscription sends first,
 *   before the events that follow (nothing before it sent again, nothing after it missed).
 *
 * History: the task's user messages (and the answers and decisions sent to it), and the agent's
 * status messages once the status moved on. Artifacts: the agent's text, one per message.
 */
import {
  Role,
  TaskState,
  taskStateFromJSON,
  type Artifact,
  type Message,
  type Part,
  type StreamResponse,
  type Task,
} from '@a2a-js/sdk';
import type { JsonValue } from '../../../model/index.ts';
import type { FeedItem, SessionEvent } from '../../../session/index.ts';
import { a2aTaskState } from '../../../runs/webhooks/a2a-push.ts';
import type { RunRecord, RunStatus } from '../../../store/index.ts';

export const textPart = (text: string): Part => ({
  content: { $case: 'text', value: text },
  metadata: undefined,
  filename: '',
  mediaType: '',
});

export const dataPart = (value: unknown): Part => ({
  content: { $case: 'data', value },
  metadata: undefined,
  filename: '',
  mediaType: 'application/json',
});

/** The task state of a run status (runs/webhooks/a2a-push.ts has the mapping). */
export const taskState = (status: RunStatus, started: boolean): TaskState =>
  taskStateFromJSON(a2aTaskState(status, started));

/** The A2A states where a stream ends: terminal, or interrupted (input-required). */
export const STREAM_ENDS: ReadonlySet<TaskState> = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
]);

/** An approval or a question the run waits for. */
export interface Asked {
  toolCallId: string;
  toolName: string;
  input: JsonValue;
  kind: 'approval' | 'input';
}

interface Streamed {
  text: string;
  done: boolean;
}

const textOf = (content: ReadonlyArray<{ type: string; text?: string }>): string =>
  content.flatMap((p) => (p.type === 'text' && typeof p.text === 'string' ? [p.text] : [])).join('');

/** What a waiting run asks for, in words and as data (its `input-required` status message). */
export function askedMessage(o: { id: string; taskId: string; contextId: string; asked: readonly Asked[] }): Message {
  const lines = o.asked.map((a) => {
    if (a.kind === 'approval')
      return `Approve ${a.toolName}(${JSON.stringify(a.input)})? Answer "approve" or "deny" (or "deny: <reason>").`;
    const questions = (a.input as { questions?: Array<{ question?: unknown; choices?: unknown }> } | null)?.questions;
    if (!Array.isArray(questions)) return `${a.toolName} asks: ${JSON.stringify(a.input)}`;
    return questions
      .map((q) => {
        const choices = Array.isArray(q.choices) ? ` (${q.choices.join(', ')})` : '';
        return `${String(q.question)}${choices}`;
      })
      .join('\n');
  });
  return {
    messageId: o.id,
    contextId: o.contextId,
    taskId: o.taskId,
    role: Role.ROLE_AGENT,
    parts: [
      textPart(lines.join('\n')),
      dataPart({
        pending: o.asked.map((a) => ({
          toolCallId: a.toolCallId,
          tool: a.toolName,
          kind: a.kind === 'approval' ? 'approval' : 'question',
          input: a.input,
        })),
      }),
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export class TaskEncoder {
  readonly taskId: string;
  readonly contextId: string;
  private status: RunStatus | undefined;
  private started = false;
  private state: TaskState = TaskState.TASK_STATE_SUBMITTED;
  private at = 0;
  private statusMessage: Message | undefined;
  /** Whether the status message is in the history already (an answer to it came). */
  private statusMessageKept = false;
  private readonly history: Message[] = [];
  /** Artifacts by message id, in the order they began. */
  private readonly artifacts = new Map<string, Streamed>();
  /** Approvals and questions asked and not yet decided or answered. */
  private readonly asked = new Map<string, Asked>();
  /** Whether the task itself was sent (its first event); after it, only updates. */
  private announced = false;
  /** The state (and message) the client was last told of. */
  private told: { state: TaskState; message: string | undefined } | undefined;

  constructor(run: Pick<RunRecord, 'id' | 'sessionId'>) {
    this.taskId = run.id;
    this.contextId = run.sessionId;
  }

  /** The events one feed item of the run makes (the state is updated in any case). */
  item(item: FeedItem): StreamResponse[] {
    if (item.kind === 'delta') {
      const d = item.delta;
      if (d.type !== 'text/delta' || d.delta === '') return [];
      return this.text(d.messageId, d.delta);
    }
    const e = item.event;
    if (e.runId !== this.taskId) return [];
    switch (e.type) {
      case 'user/message':
        this.history.push(this.userMessage(e.data.message.id, [textPart(textOf(e.data.message.content))]));
        return [];
      case 'assistant/message':
        return this.message(e.data.message.id, textOf(e.data.message.content));
      case 'model/retry':
        return this.abandon(e.data.abandonedMessageId);
      case 'tool/approval':
        this.asked.set(e.data.toolCallId, { ...e.data, kind: 'approval' });
        return [];
      case 'user/question':
        this.asked.set(e.data.toolCallId, { ...e.data, kind: 'input' });
        return [];
      case 'tool/decision': {
        this.asked.delete(e.data.toolCallId);
        this.keepStatusMessage();
        const { toolCallId, approved, reason } = e.data;
        const decision = { toolCallId, approved, ...(reason !== undefined ? { reason } : {}) };
        this.history.push(this.userMessage(e.id, [dataPart(decision)]));
        return [];
      }
      case 'user/answer': {
        this.asked.delete(e.data.toolCallId);
        this.keepStatusMessage();
        const a = e.data.answer;
        this.history.push(this.userMessage(e.id, [typeof a === 'string' ? textPart(a) : dataPart(a)]));
        return [];
      }
      case 'run/status':
        return this.moved(e as SessionEvent<'run/status'>);
      default:
        return [];
    }
  }

  /** The task as it stands: what a resubscription sends first. */
  snapshotEvent(): StreamResponse {
    this.announced = true;
    this.told = { state: this.state, message: this.statusMessage?.messageId };
    return { payload: { $case: 'task', value: this.snapshot() } };
  }

  /** The task as it stands (a copy). */
  snapshot(): Task {
    const artifacts = [...this.artifacts].map(([id, a]) => this.artifact(id, [textPart(a.text)]));
    return {
      id: this.taskId,
      contextId: this.contextId,
      status: {
        state: this.state,
        message: this.statusMessage,
        timestamp: this.at ? new Date(this.at).toISOString() : undefined,
      },
      artifacts,
      history: [...this.history],
      metadata: this.status ? { keel: { status: this.status } } : undefined,
    };
  }

  /** What the run waits for, as this encoder saw it asked (and not yet decided or answered). */
  pending(): Asked[] {
    return [...this.asked.values()];
  }

  /**
   * The status update that says the run's state as its record has it, if the client was told
   * another (a safety net at a stream's end: the record is read after the feed ended).
   */
  settle(run: RunRecord): StreamResponse[] {
    const state = taskState(run.status, run.startedAt !== null);
    if (!this.announced || this.told?.state === state) return [];
    this.status = run.status;
    this.state = state;
    this.at = run.endedAt ?? Date.now();
    this.told = { state, message: this.statusMessage?.messageId };
    return [this.statusUpdate()];
  }

  /** The state the client was last told of (undefined before the task was sent). */
  get toldState(): TaskState | undefined {
    return this.told?.state;
  }

  private moved(e: SessionEvent<'run/status'>): StreamResponse[] {
    const { from, to } = e.data;
    this.started ||= from !== null && from !== undefined;
    this.status = to;
    this.state = taskState(to, this.started);
    this.at = e.time;
    // The status message the client read goes to the history when the status moves on.
    this.keepStatusMessage();
    this.statusMessage = undefined;
    this.statusMessageKept = false;
    if (to === 'waiting_approval' || to === 'waiting_for_user') {
      const kind = to === 'waiting_approval' ? 'approval' : 'input';
      const asked = this.pending().filter((a) => a.kind === kind);
      if (asked.length > 0)
        this.statusMessage = askedMessage({ id: e.id, taskId: this.taskId, contextId: this.contextId, asked });
    } else if (to === 'failed' || to === 'timed_out' || to === 'cancelled') {
      const error = (e.data.error as { message?: unknown } | undefined)?.message;
      const note = typeof error === 'string' && error !== '' ? error : e.data.reason;
      if (note) this.statusMessage = this.agentMessage(e.id, note);
    }
    if (!this.announced) {
      // The run's first status: the task exists. Its first event is the task itself.
      this.announced = true;
      this.told = { state: this.state, message: this.statusMessage?.messageId };
      return [{ payload: { $case: 'task', value: this.snapshot() } }];
    }
    const message = this.statusMessage?.messageId;
    if (this.told?.state === this.state && this.told.message === message) return [];
    this.told = { state: this.state, message };
    return [this.statusUpdate()];
  }

  /** The status message into the history (once): before the answer to it, or when the status moves on. */
  private keepStatusMessage(): void {
    if (!this.statusMessage || this.statusMessageKept) return;
    this.history.push(this.statusMessage);
    this.statusMessageKept = true;
  }

  private statusUpdate(): StreamResponse {
    return {
      payload: {
        $case: 'statusUpdate',
        value: {
          taskId: this.taskId,
          contextId: this.contextId,
          status: { state: this.state, message: this.statusMessage, timestamp: new Date(this.at).toISOString() },
          metadata: this.status ? { keel: { status: this.status } } : undefined,
        },
      },
    };
  }

  private text(messageId: string, delta: string): StreamResponse[] {
    const a = this.artifacts.get(messageId);
    if (a?.done) return [];
    if (!a) {
      this.artifacts.set(messageId, { text: delta, done: false });
      return [this.chunk(messageId, delta, false, false)];
    }
    a.text += delta;
    return [this.chunk(messageId, delta, true, false)];
  }

  /**
   * A message's durable version: the end of its artifact. The rest of its text when the deltas
   * seen are its start; all of it, replacing what was sent, when they were not (a feed that began
   * after its first deltas), or when none came (a replay).
   */
  private message(messageId: string, full: string): StreamResponse[] {
    const a = this.artifacts.get(messageId);
    if (a?.done) return [];
    if (!a) {
      if (full === '') return [];
      this.artifacts.set(messageId, { text: full, done: true });
      return [this.chunk(messageId, full, false, true)];
    }
    const append = full.startsWith(a.text);
    const text = append ? full.slice(a.text.length) : full;
    a.text = full;
    a.done = true;
    return [this.chunk(messageId, text, append, true)];
  }

  /** A message abandoned mid-stream (its model call is retried): its artifact is emptied and dropped. */
  private abandon(messageId: string): StreamResponse[] {
    const a = this.artifacts.get(messageId);
    if (!a || a.done) return [];
    this.artifacts.delete(messageId);
    return [this.chunk(messageId, '', false, true)];
  }

  private artifact(messageId: string, parts: Part[]): Artifact {
    return { artifactId: messageId, name: 'answer', description: '', parts, metadata: undefined, extensions: [] };
  }

  private chunk(messageId: string, text: string, append: boolean, lastChunk: boolean): StreamResponse {
    return {
      payload: {
        $case: 'artifactUpdate',
        value: {
          taskId: this.taskId,
          contextId: this.contextId,
          artifact: this.artifact(messageId, [textPart(text)]),
          append,
          lastChunk,
          metadata: undefined,
        },
      },
    };
  }

  private userMessage(id: string, parts: Part[]): Message {
    return {
      messageId: id,
      contextId: this.contextId,
      taskId: this.taskId,
      role: Role.ROLE_USER,
      parts,
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
  }

  private agentMessage(id: string, text: string): Message {
    return { ...this.userMessage(id, [textPart(text)]), role: Role.ROLE_AGENT };
  }
}
