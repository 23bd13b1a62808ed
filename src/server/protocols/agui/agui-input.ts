/**
 * What Keel takes of AG-UI's `RunAgentInput` (docs/protocols.md): validated with the protocol's
 * own schema, then read the Keel way. The thread (a Keel session) keeps its history in its log:
 * of `messages`, only the user messages at the end (after the last message of another role) are
 * new input, and of those only the ones the thread was not sent before (by id). What Keel cannot
 * honour is refused, naming the field, never ignored.
 */
import { createHash } from 'node:crypto';
import {
  contentToText,
  type ContentPart,
  type Message,
  type ResumeEntry,
  type RunAgentInput,
  type ToolMessage,
  type UserMessage,
} from '@ag-ui/core';
import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import type { AgentDefinition, UserInput } from '../../../core/index.ts';
import type { JsonValue } from '../../../model/index.ts';
import type { ClientToolResult, ClientToolSpec } from '../../../runs/index.ts';
import { HttpProblem } from '../../problems.ts';

/** A refusal of what the input asks, naming the field at fault. */
export function refuse(field: string, detail: string): never {
  throw new HttpProblem('validation', `${field}: ${detail}`, { field });
}

/** The input, checked against the protocol's schema (a 400 naming the first field at fault). */
export function parseRunInput(raw: unknown): RunAgentInput {
  const parsed = RunAgentInputSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    refuse(issue.path.join('.') || 'body', issue.message);
  }
  const input = parsed.data as RunAgentInput;
  if (input.threadId === '') refuse('threadId', 'a thread id is required');
  if (input.runId === '') refuse('runId', 'a run id is required');
  return input;
}

const isEmptyObject = (v: unknown) =>
  v === undefined || v === null || (typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0);

/** What Keel does not do, refused: shared state, forwarded props, a parent run. */
export function refuseUnsupported(input: RunAgentInput): void {
  if (!isEmptyObject(input.state))
    refuse('state', 'Keel agents keep no shared state (the thread is their state): send none, or {}');
  if (!isEmptyObject(input.forwardedProps))
    refuse('forwardedProps', 'Keel passes nothing through to its agents: send none, or {}');
  if (input.parentRunId !== undefined)
    refuse('parentRunId', 'runs started by another run are Keel subagents, not AG-UI input');
  input.tools.forEach((t, i) => {
    if (t.parameters !== undefined && (typeof t.parameters !== 'object' || Array.isArray(t.parameters)))
      refuse(`tools[${i}].parameters`, 'a JSON Schema object');
  });
}

/** The input's tools as the run's client tools: the client executes them. */
export function clientToolsOf(input: RunAgentInput): ClientToolSpec[] {
  return input.tools.map((t) => ({
    name: t.name,
    ...(t.description !== '' ? { description: t.description } : {}),
    ...(t.parameters !== undefined ? { parameters: t.parameters as JsonValue } : {}),
  }));
}

/** A `tool` message as the output of the client's tool call: its content as text, or its error. */
export function toolResultOf(m: ToolMessage): ClientToolResult {
  if (m.error !== undefined) return { callId: m.toolCallId, output: m.error, isError: true };
  return { callId: m.toolCallId, output: contentToText(m.content) };
}

/**
 * The run's system prompt with the input's `context` (the agent's own, then each item as
 * `description: value`), or undefined when there is no context.
 */
export function systemWithContext(agent: AgentDefinition, input: RunAgentInput): string | undefined {
  if (input.context.length === 0) return undefined;
  if (typeof agent.system === 'function')
    refuse('context', `agent ${agent.name}@${agent.version} makes its system prompt itself: it takes no context`);
  const items = input.context.map((c) => `- ${c.description}: ${c.value}`).join('\n');
  return `${agent.system ? `${agent.system}\n\n` : ''}Context from the application:\n${items}`;
}

/** The user messages at the end of `messages` (after the last message of another role), with their indexes. */
export function trailingUserMessages(messages: readonly Message[]): Array<{ index: number; message: UserMessage }> {
  const out: Array<{ index: number; message: UserMessage }> = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'user') break;
    out.unshift({ index: i, message: m });
  }
  return out;
}

/** A user message's content as Keel input parts: text, and files given as data or http(s) URLs. */
export function userParts(m: UserMessage, index: number): Exclude<UserInput, string> {
  const field = `messages[${index}].content`;
  if (typeof m.content === 'string') {
    if (m.content === '') refuse(field, 'the message is empty');
    return [{ type: 'text', text: m.content }];
  }
  const parts = m.content.map((p: ContentPart, k): Exclude<UserInput, string>[number] => {
    if (p.type === 'text') return { type: 'text', text: p.text };
    const s = p.source;
    if (s.type === 'data') return { type: 'file', mediaType: s.mimeType, data: s.value };
    if (s.type === 'url' && /^https?:\/\//i.test(s.value) && s.mimeType)
      return { type: 'file', mediaType: s.mimeType, data: s.value };
    refuse(
      `${field}[${k}].source`,
      s.type === 'url'
        ? 'a URL source needs an http(s) URL and its mimeType'
        : 'a provider file id cannot be read: send the data or an http(s) URL',
    );
  });
  const content = parts.filter((p) => p.type !== 'text' || p.text !== '');
  if (content.length === 0) refuse(field, 'the message has no text or file');
  return content;
}

/** The idempotency key a user message is recorded under in its thread (the send that took it). */
export const messageKey = (sessionId: string, messageId: string) => `agui-message:${sessionId}:${messageId}`;

/** What a user message was: the same id sent again with other content is refused. */
export const messageFingerprint = (m: UserMessage) =>
  createHash('sha256').update(JSON.stringify(m.content)).digest('hex');

/** An answer to an approval interrupt, from its resume entry. */
export function approvalOf(
  entry: ResumeEntry,
  index: number,
): { approved: true; input?: Record<string, unknown> } | { approved: false; reason: string } {
  if (entry.status === 'cancelled') return { approved: false, reason: 'the client cancelled the approval' };
  const p = entry.payload as { approved?: unknown; reason?: unknown; input?: unknown } | undefined;
  if (typeof p !== 'object' || p === null || typeof p.approved !== 'boolean')
    refuse(`resume[${index}].payload`, 'an approval is answered with { approved: boolean, reason?, input? }');
  if (!p.approved) return { approved: false, reason: typeof p.reason === 'string' ? p.reason : 'denied by the client' };
  if (p.input !== undefined && (typeof p.input !== 'object' || p.input === null || Array.isArray(p.input)))
    refuse(`resume[${index}].payload.input`, 'edited arguments are an object');
  return { approved: true, ...(p.input !== undefined ? { input: p.input as Record<string, unknown> } : {}) };
}
