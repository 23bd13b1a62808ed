/**
 * A Keel run's segment as an OpenAI Responses `response` object (issue 41, ADR-0038): a response
 * is a run, or the part of it after a hand-off to its client (response-segments.ts); conversation
 * = session. The output is the segment's assistant messages with text, in order, then what it
 * handed the client: `function_call` items for the client's own tools, `mcp_approval_request`
 * items for approvals, a question as a message. The tools Keel runs itself stay inside the run
 * (its steps are in Keel's own API).
 */
import type { PendingCall } from '../../../core/index.ts';
import { isWaiting } from '../../../runs/lifecycle/run-status.ts';
import type { RunOptions } from '../../../runs/index.ts';
import type { RunRecord, RunStatus, SessionRecord } from '../../../store/index.ts';
import { responseId, type Segment } from './response-segments.ts';

/** The Responses status of a run: waiting for a person or a time is still in progress. */
export function responseStatus(s: RunStatus): 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled' {
  switch (s) {
    case 'queued':
      return 'queued';
    case 'completed':
      return 'completed';
    case 'failed':
    case 'timed_out':
      return 'failed';
    case 'cancelled':
      return 'cancelled';
    default:
      return 'in_progress';
  }
}

/** A message item of the output. */
const messageItem = (id: string, text: string) => ({
  type: 'message' as const,
  id: `msg_${id}`,
  status: 'completed' as const,
  role: 'assistant' as const,
  content: [{ type: 'output_text' as const, text, annotations: [] as never[], logprobs: [] as never[] }],
});

/** What a question (ask_user) says, as the text of a message: each question, with its choices. */
export function questionText(input: unknown): string {
  const qs = (input as { questions?: Array<{ question?: unknown; choices?: unknown }> } | null)?.questions ?? [];
  return qs
    .map((q) => {
      const choices = Array.isArray(q.choices) && q.choices.length > 0 ? ` (${q.choices.join(' / ')})` : '';
      return `${String(q.question ?? '')}${choices}`;
    })
    .join('\n');
}

/** The output item of a call handed to the client: a function call, an approval request, or the question. */
export function handOffItem(p: PendingCall) {
  if (p.kind === 'approval')
    return {
      type: 'mcp_approval_request' as const,
      id: `mcpr_${p.toolCallId}`,
      server_label: 'keel',
      name: p.toolName,
      arguments: JSON.stringify(p.input),
    };
  if (p.kind === 'input') return messageItem(`q_${p.toolCallId}`, questionText(p.input));
  return {
    type: 'function_call' as const,
    id: `fc_${p.toolCallId}`,
    call_id: p.toolCallId,
    name: p.toolName,
    arguments: JSON.stringify(p.input),
    status: 'completed' as const,
  };
}

/** A segment's output: each assistant message that has text, then what it hands the client. */
export function outputOf(segment: Segment) {
  const messages = segment.events.flatMap((e) => {
    if (e.type !== 'assistant/message') return [];
    const text = e.data.message.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    return text === '' ? [] : [messageItem(e.data.message.id, text)];
  });
  return [...messages, ...(segment.handOff ?? []).map(handOffItem)];
}

/** The tokens of a segment's model calls. */
function usageOf(segment: Segment) {
  let input = 0;
  let output = 0;
  let cached = 0;
  let reasoning = 0;
  for (const e of segment.events) {
    if (e.type !== 'assistant/message') continue;
    const u = e.data.usage as {
      inputTokens?: number;
      outputTokens?: number;
      cachedInputTokens?: number;
      reasoningTokens?: number;
    };
    input += u.inputTokens ?? 0;
    output += u.outputTokens ?? 0;
    cached += u.cachedInputTokens ?? 0;
    reasoning += u.reasoningTokens ?? 0;
  }
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

/** A segment of a run as a `response` object (ended by a hand-off: `completed`; else as the run stands). */
export function segmentObject(
  run: RunRecord,
  segment: Segment,
  session: SessionRecord,
  o: { previousResponseId: string | null; background?: boolean },
) {
  const status = segment.handOff ? 'completed' : responseStatus(run.status);
  const error = run.error as { message?: unknown; kind?: unknown } | null;
  const started = segment.n === 0 ? run.createdAt : (segment.events[0]?.time ?? run.createdAt);
  return {
    id: responseId(run.id, segment.n),
    object: 'response' as const,
    created_at: Math.floor(started / 1000),
    status,
    background: o.background ?? false,
    model: `${run.agent.name}@${run.agent.version}`,
    output: outputOf(segment),
    usage: usageOf(segment),
    error:
      status === 'failed'
        ? {
            code: 'server_error',
            message: typeof error?.message === 'string' ? error.message : `the run ${run.status}`,
          }
        : null,
    incomplete_details: null,
    instructions: (run.options as RunOptions).overrides?.system ?? null,
    metadata: session.metadata,
    parallel_tool_calls: true,
    previous_response_id: o.previousResponseId,
    conversation: { id: run.sessionId },
    store: true,
    temperature: null,
    text: { format: { type: 'text' as const } },
    tool_choice: 'auto' as const,
    tools: ((run.options as RunOptions).clientTools ?? []).map((t) => ({
      type: 'function' as const,
      name: t.name,
      description: t.description ?? null,
      parameters: t.parameters ?? null,
      strict: false,
    })),
    top_p: null,
    truncation: 'disabled' as const,
  };
}

/** Whether a segment after a hand-off has begun: the client (or a deadline) ended the wait. */
export const begun = (s: Segment): boolean =>
  s.n === 0 || s.events.some((e) => !(e.type === 'run/status' && isWaiting(e.data.to as RunStatus)));
