/**
 * What a `POST /responses` body says, checked (issue 41, ADR-0038): the request's fields, its input
 * (the user's text; the `function_call_output` and `mcp_approval_response` items that answer the
 * calls a previous response handed the client) and its function tools as the run's client tools.
 * What Keel does not serve is refused with the protocol's error, naming the field.
 */
import { z } from 'zod';
import type { UserInput } from '../../../core/index.ts';
import type { ClientToolResult, ClientToolSpec } from '../../../runs/index.ts';
import { HttpProblem } from '../../problems.ts';

const Content = z.union([
  z.string(),
  z.array(z.object({ type: z.literal('input_text'), text: z.string() }).passthrough(), {
    error: 'content: only input_text parts are supported',
  }),
]);

const MessageItem = z
  .object({
    type: z.literal('message').optional(),
    role: z.enum(['user', 'system', 'developer', 'assistant']),
    content: Content,
  })
  .passthrough();

const FunctionCallOutputItem = z
  .object({
    type: z.literal('function_call_output'),
    call_id: z.string().min(1),
    output: z.union([
      z.string(),
      z.array(z.object({ type: z.literal('input_text'), text: z.string() }).passthrough(), {
        error: 'output: a string, or input_text parts',
      }),
    ]),
  })
  .passthrough();

const ApprovalResponseItem = z
  .object({
    type: z.literal('mcp_approval_response'),
    approval_request_id: z.string().min(1),
    approve: z.boolean(),
    reason: z.string().nullish(),
  })
  .passthrough();

const FunctionTool = z
  .object({
    type: z.literal('function'),
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.json()).nullish(),
    strict: z.boolean().nullish(),
  })
  .passthrough();

export const CreateBody = z
  .object({
    model: z.string().min(1),
    input: z.union([z.string().min(1), z.array(z.unknown()).min(1)]),
    previous_response_id: z.string().nullish(),
    conversation: z.union([z.string(), z.object({ id: z.string() })]).nullish(),
    store: z.boolean().nullish(),
    stream: z.boolean().nullish(),
    background: z.boolean().nullish(),
    metadata: z.record(z.string(), z.string()).nullish(),
    instructions: z.unknown().optional(),
    tools: z.array(z.unknown()).nullish(),
  })
  .passthrough();

/** What is not built yet is refused, naming the field (ADR-0038). */
export function refuse(param: string, message: string): never {
  throw new HttpProblem('validation', message, { param });
}

/** What a request's input carries: the user's text, and what it gives for calls handed to it. */
export interface Input {
  text: UserInput | undefined;
  outputs: ClientToolResult[];
  approvals: Array<{ toolCallId: string; approve: boolean; reason?: string }>;
}

/** The input: a string, or user messages, function call outputs and approval responses. */
export function inputOf(input: z.infer<typeof CreateBody>['input']): Input {
  if (typeof input === 'string') return { text: input, outputs: [], approvals: [] };
  const texts: string[] = [];
  const outputs: ClientToolResult[] = [];
  const approvals: Input['approvals'] = [];
  input.forEach((raw, i) => {
    const type = (raw as { type?: unknown } | null)?.type;
    if (type === 'function_call_output') {
      const item = FunctionCallOutputItem.safeParse(raw);
      if (!item.success) refuse(`input[${i}]`, `input[${i}]: ${item.error.issues[0]?.message ?? 'not valid'}`);
      const o = item.data.output;
      outputs.push({ callId: item.data.call_id, output: typeof o === 'string' ? o : o.map((p) => p.text).join('') });
      return;
    }
    if (type === 'mcp_approval_response') {
      const item = ApprovalResponseItem.safeParse(raw);
      if (!item.success) refuse(`input[${i}]`, `input[${i}]: ${item.error.issues[0]?.message ?? 'not valid'}`);
      approvals.push({
        toolCallId: item.data.approval_request_id.replace(/^mcpr_/, ''),
        approve: item.data.approve,
        ...(item.data.reason ? { reason: item.data.reason } : {}),
      });
      return;
    }
    const item = MessageItem.safeParse(raw);
    if (!item.success)
      refuse(
        `input[${i}]`,
        `input[${i}]: only message, function_call_output and mcp_approval_response items are supported (${item.error.issues[0]?.message ?? 'not a message'})`,
      );
    if (item.data.role !== 'user')
      refuse(
        `input[${i}].role`,
        `input[${i}]: only user messages are supported (the agent's own instructions are its system prompt)`,
      );
    const c = item.data.content;
    texts.push(typeof c === 'string' ? c : c.map((p) => p.text).join(''));
  });
  return { text: texts.length > 0 ? texts.join('\n\n') : undefined, outputs, approvals };
}

/** The request's function tools as the run's client tools. */
export function clientToolsOf(tools: unknown[] | null | undefined): ClientToolSpec[] {
  return (tools ?? []).map((raw, i) => {
    const t = FunctionTool.safeParse(raw);
    if (!t.success)
      refuse(
        `tools[${i}]`,
        `tools[${i}]: only function tools are supported (${t.error.issues[0]?.path.join('.') || 'type'}: ${t.error.issues[0]?.message ?? 'not valid'})`,
      );
    return {
      name: t.data.name,
      ...(t.data.description ? { description: t.data.description } : {}),
      ...(t.data.parameters ? { parameters: t.data.parameters } : {}),
    };
  });
}
