/**
 * Tools a protocol client declares and executes itself (issue 41, ADR-0038): an OpenAI Responses
 * function tool, an AG-UI frontend tool. The model sees the client's name, description and JSON
 * Schema; when it calls one, the loop does not run anything: the call waits durably (a signal
 * wait, ADR-0015, named after the call) until the client delivers its output, which becomes the
 * call's result as given. The run side (options, pending calls, delivery) is runs/client-tools.ts.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { JsonValue } from '../model/index.ts';
import { tool, type Tool } from './tools.ts';
import { SIGNAL_NAME, WaitRequest } from './wait-spec.ts';

/** A tool declared by a client: what the model sees of it. */
export interface ClientToolSpec {
  name: string;
  description?: string;
  /** The JSON Schema of its arguments (an object schema); any object when absent. */
  parameters?: JsonValue;
}

const PREFIX = 'client_tool.';

/** The signal a client tool call waits for: named after the call, so its output can come before the wait starts. */
export function clientToolSignal(toolCallId: string): string {
  const name = `${PREFIX}${toolCallId}`;
  if (SIGNAL_NAME.test(name)) return name;
  // A provider's call id with characters a signal name cannot have: its digest.
  return `${PREFIX}h.${createHash('sha256').update(toolCallId).digest('hex').slice(0, 40)}`;
}

export const isClientToolSignal = (name: string): boolean => name.startsWith(PREFIX);

/** The JSON Schema of what a client delivers for a call: the call's result (a `ToolOutput`). */
export const CLIENT_TOOL_OUTPUT_SCHEMA: JsonValue = {
  oneOf: [
    {
      type: 'object',
      properties: { type: { const: 'text' }, value: { type: 'string' } },
      required: ['type', 'value'],
      additionalProperties: false,
    },
    {
      type: 'object',
      properties: { type: { const: 'json' }, value: {} },
      required: ['type', 'value'],
      additionalProperties: false,
    },
    {
      type: 'object',
      properties: {
        type: { const: 'error' },
        code: { const: 'execution_error' },
        message: { type: 'string' },
      },
      required: ['type', 'code', 'message'],
      additionalProperties: false,
    },
  ],
};

/** A client-declared tool as the loop holds it: its call waits for the client's output. */
export function clientTool(spec: ClientToolSpec): Tool {
  const base = tool({
    name: spec.name,
    description: spec.description ?? '',
    // The client checks its own arguments: any object goes (as an MCP server's tool's).
    input: z.looseObject({}),
    // Computing the wait again after a crash is harmless; nothing runs here.
    effect: 'idempotent',
    execute: (_input, ctx) =>
      new WaitRequest({
        kind: 'signal',
        name: clientToolSignal(ctx.toolCallId),
        schema: CLIENT_TOOL_OUTPUT_SCHEMA,
        payloadIsResult: true,
      }),
  });
  const inputSchema = spec.parameters ?? { type: 'object', properties: {} };
  return { ...base, schema: { name: spec.name, description: spec.description ?? '', inputSchema } };
}
