/**
 * A Keel run as MCP sees it (issue 41, ADR-0038): the result of the tool call that started it
 * (its final answer, with its ids and status as structured content), the task it is (task id =
 * run id), and what it waits for, said so that a person or a model knows how to answer.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Task } from '@modelcontextprotocol/sdk/experimental/tasks/types.js';
import { runEvents, type SessionLog } from '../../../session/index.ts';
import type { RunRecord } from '../../../store/index.ts';
import { isTerminal, RUN_STATUS_ORDER, WAITING_FOR_PEOPLE } from '../../../runs/lifecycle/run-status.ts';
import type { Waiting, WaitingCall } from '../../../runs/lifecycle/waiting.ts';

/** How often a client is asked to poll a task (ms). */
export const TASK_POLL_MS = 500;

/** A tool's structured output: what `outputSchema` (below) describes. */
export interface RunOutput {
  run_id: string;
  session_id: string;
  agent: string;
  status: RunRecord['status'];
  /** The text of the run's last assistant message with text (null: none yet). */
  answer: string | null;
  /** The calls it waits for (empty unless it waits). */
  waiting: Array<{ tool_call_id: string; kind: WaitingCall['kind']; tool: string; input: unknown }>;
  [key: string]: unknown;
}

/** The JSON Schema of every agent tool's structured output. */
export const outputSchema = {
  type: 'object' as const,
  properties: {
    run_id: { type: 'string', description: 'The Keel run the call made (also the task id)' },
    session_id: { type: 'string', description: 'Its session: give it as session_id to continue the conversation' },
    agent: { type: 'string', description: 'name@version' },
    status: { type: 'string', enum: [...RUN_STATUS_ORDER] },
    answer: {
      type: ['string', 'null'],
      description: "The text of the run's last assistant message with text: its final answer once it completed",
    },
    waiting: {
      type: 'array',
      description: 'What the run waits for, when it waits',
      items: {
        type: 'object',
        properties: {
          tool_call_id: { type: 'string' },
          kind: { type: 'string', enum: ['approval', 'input', 'sleep', 'signal'] },
          tool: { type: 'string' },
          input: {},
        },
        required: ['tool_call_id', 'kind', 'tool', 'input'],
      },
    },
  },
  required: ['run_id', 'session_id', 'agent', 'status', 'answer', 'waiting'],
};

/** The calls the run waits for that nobody has decided yet. */
export function openCalls(run: RunRecord): WaitingCall[] {
  const w = run.waiting as unknown as Waiting | null;
  if (!w) return [];
  return w.calls.filter((c) => !w.decisions[c.toolCallId]);
}

/** Whether the run waits for a person: an approval or an answer (what elicitation can ask). */
export const waitsForPeople = (run: RunRecord): boolean => WAITING_FOR_PEOPLE.includes(run.status);

/** The text of the run's last assistant message that has text, or null. */
export async function answerOf(log: SessionLog, run: RunRecord): Promise<string | null> {
  const events = await runEvents(log, run.sessionId, run.id);
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.type !== 'assistant/message') continue;
    const text = e.data.message.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    if (text !== '') return text;
  }
  return null;
}

export async function runOutput(log: SessionLog, run: RunRecord): Promise<RunOutput> {
  return {
    run_id: run.id,
    session_id: run.sessionId,
    agent: `${run.agent.name}@${run.agent.version}`,
    status: run.status,
    answer: await answerOf(log, run),
    waiting: openCalls(run).map((c) => ({
      tool_call_id: c.toolCallId,
      kind: c.kind,
      tool: c.toolName,
      input: c.input,
    })),
  };
}

const short = (v: unknown, max = 200): string => {
  const s = JSON.stringify(v) ?? 'null';
  return s.length > max ? `${s.slice(0, max)}…` : s;
};

/** One waiting call in words, with how it is answered through Keel's own API. */
export function describeCall(run: RunRecord, c: WaitingCall): string {
  switch (c.kind) {
    case 'approval':
      return `an approval of ${c.toolName} ${short(c.input)} (POST /v1/runs/${run.id}/approvals/${c.toolCallId} with {"decision":"approve"} or {"decision":"deny"})`;
    case 'input':
      return `an answer to ${c.toolName} ${short(c.input)} (POST /v1/runs/${run.id}/input with {"answers":{...},"tool_call_id":"${c.toolCallId}"})`;
    case 'signal': {
      // A tool executed by a client (another protocol's, or Keel's `client_tools`) waits for its result.
      if (c.wait?.kind === 'signal' && c.wait.payloadIsResult)
        return `the result of the client's ${c.toolName} ${short(c.input)} (POST /v1/runs/${run.id}/tool-results)`;
      const name = c.wait?.kind === 'signal' ? c.wait.name : c.toolName;
      return `the signal ${name} (POST /v1/runs/${run.id}/signals/${name})`;
    }
    case 'sleep':
      return `a time (${c.toolName} ${short(c.input)})`;
  }
}

/** What a run that has not ended is doing, in words (a task's status message, a waiting call's text). */
export function describeRun(run: RunRecord): string {
  const calls = openCalls(run);
  if (calls.length > 0) return `run ${run.id} waits for ${calls.map((c) => describeCall(run, c)).join('; and ')}`;
  if (run.status === 'paused') return `run ${run.id} is paused (POST /v1/runs/${run.id}/resume resumes it)`;
  return `run ${run.id} is ${run.status}`;
}

/**
 * The tool call's result for the run as it stands: its final answer once completed; an error
 * result (`isError`) once it failed, timed out or was cancelled; otherwise what it waits for.
 */
export async function callResult(log: SessionLog, run: RunRecord): Promise<CallToolResult> {
  const out = await runOutput(log, run);
  if (run.status === 'completed')
    return { content: [{ type: 'text', text: out.answer ?? '' }], structuredContent: out };
  if (isTerminal(run.status)) {
    const error = run.error as { message?: unknown } | null;
    const why = typeof error?.message === 'string' ? `: ${error.message}` : '';
    const text = run.status === 'cancelled' ? `run ${run.id} was cancelled` : `run ${run.id} ${run.status}${why}`;
    return { content: [{ type: 'text', text }], structuredContent: out, isError: true };
  }
  return {
    content: [{ type: 'text', text: `${describeRun(run)}. Its result is then keel://runs/${run.id}.` }],
    structuredContent: out,
  };
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The MCP task status of a run: a wait for a person is `input_required`, any other wait is still `working`. */
export function taskStatus(run: RunRecord): Task['status'] {
  switch (run.status) {
    case 'completed':
      return 'completed';
    case 'failed':
    case 'timed_out':
      return 'failed';
    case 'cancelled':
      return 'cancelled';
    default:
      return waitsForPeople(run) ? 'input_required' : 'working';
  }
}

/** The run as an MCP task: the task id is the run id; Keel keeps runs, so its ttl is null (unlimited). */
export function taskOf(run: RunRecord): Task {
  const error = run.error as { message?: unknown } | null;
  const message = isTerminal(run.status)
    ? typeof error?.message === 'string'
      ? error.message
      : undefined
    : describeRun(run);
  return {
    taskId: run.id,
    status: taskStatus(run),
    ttl: null,
    createdAt: iso(run.createdAt),
    lastUpdatedAt: iso(run.endedAt ?? run.startedAt ?? run.createdAt),
    pollInterval: TASK_POLL_MS,
    ...(message !== undefined ? { statusMessage: message } : {}),
  };
}
