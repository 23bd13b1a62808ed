/**
 * Client-executed tools on the run side (issue 41, ADR-0038): a send's `clientTools` join the
 * run's agent (here, at the send and wherever the run's agent is prepared); a run whose model
 * called one waits (`waiting_for_signal`) with the call among its pending calls
 * (`pendingClientToolCalls`); the client's output ends the call's wait (`Runtime.runs.submitToolResults`).
 * The tool itself is core/client-tool.ts.
 */
import { z } from 'zod';
import { clientTool, clientToolSignal, isClientToolSignal, type ClientToolSpec } from '../core/client-tool.ts';
import type { AgentDefinition } from '../core/index.ts';
import type { JsonValue, ToolOutput } from '../model/index.ts';
import type { RunRecord } from '../store/index.ts';
import { InvalidSendOptionError } from './send-options.ts';
import { isWaiting } from './lifecycle/run-status.ts';
import { undecided, type Waiting } from './lifecycle/waiting.ts';

export { clientToolSignal, isClientToolSignal, type ClientToolSpec };

/** The most tools one send may declare. */
export const MAX_CLIENT_TOOLS = 128;

/** `agent` with the client's tools added: a name one of its own tools has is refused (InvalidSendOptionError). */
export function withClientTools(agent: AgentDefinition, specs: readonly ClientToolSpec[] | undefined): AgentDefinition {
  if (!specs || specs.length === 0) return agent;
  const own = new Set(agent.tools.map((t) => t.name));
  const seen = new Set<string>();
  const added = specs.map((spec, i) => {
    if (own.has(spec.name))
      throw new InvalidSendOptionError(
        `clientTools[${i}].name`,
        `agent ${agent.name}@${agent.version} has a tool named ${spec.name} already`,
      );
    if (seen.has(spec.name))
      throw new InvalidSendOptionError(`clientTools[${i}].name`, `two client tools are named ${spec.name}`);
    seen.add(spec.name);
    try {
      return clientTool(spec);
    } catch (e) {
      throw new InvalidSendOptionError(`clientTools[${i}].name`, e instanceof Error ? e.message : String(e));
    }
  });
  return { ...agent, tools: [...agent.tools, ...added] };
}

/** A client tool call the run waits for: what a protocol shows its client to execute. */
export interface PendingClientToolCall {
  callId: string;
  name: string;
  input: JsonValue;
}

/** The client tool calls a run waits for (none unless it waits). */
export function pendingClientToolCalls(run: RunRecord): PendingClientToolCall[] {
  if (!isWaiting(run.status) || !run.waiting) return [];
  return undecided(run.waiting as unknown as Waiting).flatMap((c) =>
    c.wait?.kind === 'signal' && isClientToolSignal(c.wait.name)
      ? [{ callId: c.toolCallId, name: c.toolName, input: c.input as JsonValue }]
      : [],
  );
}

/** What a client sends for one call: its output (text, or JSON), or that it failed. */
export interface ClientToolResult {
  callId: string;
  output: string | JsonValue;
  /** The call failed in the client: the model sees an `execution_error` with the output as its message. */
  isError?: boolean;
}

export const ClientToolResultSchema = z.strictObject({
  callId: z.string().min(1),
  output: z.json(),
  isError: z.boolean().optional(),
});

/** The call's result as the log records it (and the model sees it). */
export function clientToolOutput(r: ClientToolResult): ToolOutput {
  if (r.isError)
    return {
      type: 'error',
      code: 'execution_error',
      message: typeof r.output === 'string' ? r.output : JSON.stringify(r.output),
    };
  return typeof r.output === 'string' ? { type: 'text', value: r.output } : { type: 'json', value: r.output };
}
