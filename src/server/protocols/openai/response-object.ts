/**
 * A Keel run as an OpenAI Responses `response` object (issue 41, ADR-0038): response = run,
 * conversation = session. The output is the run's assistant messages with text, in order; the
 * tools Keel runs itself stay inside the run (its steps are in Keel's own API).
 */
import { runEvents, type SessionEvent, type SessionLog } from '../../../session/index.ts';
import type { RunRecord, RunStatus, SessionRecord } from '../../../store/index.ts';

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

/** The message items of a run's output: each assistant message that has text. */
export function outputOf(events: readonly SessionEvent[]) {
  return events.flatMap((e) => {
    if (e.type !== 'assistant/message') return [];
    const text = e.data.message.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    if (text === '') return [];
    return [
      {
        type: 'message' as const,
        id: `msg_${e.data.message.id}`,
        status: 'completed' as const,
        role: 'assistant' as const,
        content: [{ type: 'output_text' as const, text, annotations: [] as never[], logprobs: [] as never[] }],
      },
    ];
  });
}

/** The run as a `response` object (reading its events). */
export async function responseObject(
  log: SessionLog,
  run: RunRecord,
  session: SessionRecord,
  o: { previousResponseId: string | null; background?: boolean },
) {
  const events = await runEvents(log, run.sessionId, run.id);
  const usage = run.usage as {
    inputTokens?: number;
    outputTokens?: number;
    cachedInputTokens?: number;
    reasoningTokens?: number;
  };
  const input = usage.inputTokens ?? 0;
  const output = usage.outputTokens ?? 0;
  const status = responseStatus(run.status);
  const error = run.error as { message?: unknown; kind?: unknown } | null;
  return {
    id: run.id,
    object: 'response' as const,
    created_at: Math.floor(run.createdAt / 1000),
    status,
    background: o.background ?? false,
    model: `${run.agent.name}@${run.agent.version}`,
    output: outputOf(events),
    usage: {
      input_tokens: input,
      input_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0 },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
      total_tokens: input + output,
    },
    error:
      status === 'failed'
        ? {
            code: 'server_error',
            message: typeof error?.message === 'string' ? error.message : `the run ${run.status}`,
          }
        : null,
    incomplete_details: null,
    instructions: (run.options as { overrides?: { system?: string } }).overrides?.system ?? null,
    metadata: session.metadata,
    parallel_tool_calls: true,
    previous_response_id: o.previousResponseId,
    conversation: { id: run.sessionId },
    store: true,
    temperature: null,
    text: { format: { type: 'text' as const } },
    tool_choice: 'auto' as const,
    tools: [] as never[],
    top_p: null,
    truncation: 'disabled' as const,
  };
}
