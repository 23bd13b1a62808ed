import { memoOf } from './message-memo.ts';
import type {
  LanguageModelV4Message,
  LanguageModelV4Prompt,
  LanguageModelV4ToolResultOutput,
  SharedV4FileData,
  SharedV4ProviderMetadata,
} from '@ai-sdk/provider';

/**
 * Keel's own message format: plain JSON, so it can be logged, hashed and replayed.
 * It mirrors the AI SDK prompt shape closely but is owned by Keel, so the event log does not
 * change when the provider specification does; `toProviderPrompt` is the only bridge.
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type ProviderMetadata = Record<string, Record<string, JsonValue>>;

export interface TextPart {
  type: 'text';
  text: string;
}

/** An inline file (base64) or a URL the provider may fetch itself. */
export interface FilePart {
  type: 'file';
  mediaType: string;
  data: string;
  filename?: string;
}

/**
 * Reasoning as the model produced it. `providerMetadata` holds the opaque part (signatures,
 * encrypted content); it is only valid inside the turn that produced it.
 */
export interface ReasoningPart {
  type: 'reasoning';
  text: string;
  providerMetadata?: ProviderMetadata;
}

export interface ToolCallPart {
  type: 'tool-call';
  toolCallId: string;
  toolName: string;
  input: JsonValue;
}

export type ToolErrorCode =
  'unknown_tool' | 'invalid_input' | 'execution_error' | 'timeout' | 'cancelled' | 'denied' | 'outcome_unknown';

export type ToolOutput =
  | { type: 'text'; value: string }
  | { type: 'json'; value: JsonValue }
  | { type: 'error'; code: ToolErrorCode; message: string };

export interface ToolResultPart {
  type: 'tool-result';
  toolCallId: string;
  toolName: string;
  output: ToolOutput;
}

export interface UserMessage {
  id: string;
  role: 'user';
  content: Array<TextPart | FilePart>;
}

export interface AssistantMessage {
  id: string;
  role: 'assistant';
  content: Array<TextPart | ReasoningPart | ToolCallPart>;
  /** Set when the model call was cut short: the content is what arrived before the cut. */
  interrupted?: boolean;
}

export interface ToolMessage {
  id: string;
  role: 'tool';
  content: ToolResultPart[];
}

/** A summary standing in for older history (written by compaction or a branch summary). */
export interface SummaryMessage {
  id: string;
  role: 'summary';
  text: string;
}

export type Message = UserMessage | AssistantMessage | ToolMessage | SummaryMessage;

export function isOpaqueReasoning(part: TextPart | ReasoningPart | ToolCallPart): boolean {
  return (
    part.type === 'reasoning' && part.providerMetadata !== undefined && Object.keys(part.providerMetadata).length > 0
  );
}

/**
 * The portable form of a conversation: what may cross a turn boundary. Reasoning is dropped
 * from model context entirely, because providers reject reasoning text whose signature is gone
 * and opaque reasoning must never reach a later turn (possibly on another provider).
 */
export function portableMessages(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant' || !m.content.some((p) => p.type === 'reasoning')) {
      out.push(m);
      continue;
    }
    // The same portable copy each time: what is cached per message (its rendering, its hash) holds.
    let copy = portable.get(m);
    if (copy === undefined) {
      const content = m.content.filter((p) => p.type !== 'reasoning');
      portable.set(m, (copy = content.length > 0 ? { ...m, content } : null));
    }
    if (copy) out.push(copy);
  }
  return out;
}

const portable = new WeakMap<AssistantMessage, AssistantMessage | null>();

export function toolOutputToProvider(output: ToolOutput): LanguageModelV4ToolResultOutput {
  switch (output.type) {
    case 'text':
      return { type: 'text', value: output.value };
    case 'json':
      return { type: 'json', value: output.value };
    case 'error':
      return output.code === 'denied'
        ? { type: 'execution-denied', reason: output.message }
        : { type: 'error-text', value: `[${output.code}] ${output.message}` };
  }
}

function fileData(data: string): SharedV4FileData {
  return /^https?:\/\//.test(data) ? { type: 'url', url: new URL(data) } : { type: 'data', data };
}

function renderMessage(m: Message): LanguageModelV4Message | undefined {
  switch (m.role) {
    case 'user':
      return {
        role: 'user',
        content: m.content.map((p) =>
          p.type === 'text'
            ? { type: 'text', text: p.text }
            : {
                type: 'file',
                mediaType: p.mediaType,
                data: fileData(p.data),
                ...(p.filename ? { filename: p.filename } : {}),
              },
        ),
      };
    case 'assistant': {
      const content = m.content.map((p) => {
        switch (p.type) {
          case 'text':
            return { type: 'text' as const, text: p.text };
          case 'reasoning':
            return {
              type: 'reasoning' as const,
              text: p.text,
              ...(p.providerMetadata ? { providerOptions: p.providerMetadata as SharedV4ProviderMetadata } : {}),
            };
          case 'tool-call':
            return { type: 'tool-call' as const, toolCallId: p.toolCallId, toolName: p.toolName, input: p.input };
        }
      });
      return content.length > 0 ? { role: 'assistant', content } : undefined;
    }
    case 'tool':
      return {
        role: 'tool',
        content: m.content.map((p) => ({
          type: 'tool-result' as const,
          toolCallId: p.toolCallId,
          toolName: p.toolName,
          output: toolOutputToProvider(p.output),
        })),
      };
    case 'summary':
      // Providers have no summary role; a user-side note keeps the alternation valid everywhere.
      return {
        role: 'user',
        content: [{ type: 'text', text: `<summary of earlier conversation>\n${m.text}\n</summary>` }],
      };
  }
}

/**
 * How many results a tool message holds, 0 for any other message: the one part of a message in a
 * conversation that may still change (a tool message gains results during its step). The caches
 * of renderings and hashes are keyed by it.
 */
export function resultsIn(m: Message | undefined): number {
  return m?.role === 'tool' ? m.content.length : 0;
}

// Rendered once per message (again only when a tool message gained results since): the next step
// and the next turn send the same history again.
function renderCached(m: Message): LanguageModelV4Message | undefined {
  const size = resultsIn(m);
  const memo = memoOf(m);
  if (memo.renderSize !== size) {
    memo.rendered = renderMessage(m);
    memo.renderSize = size;
  }
  return memo.rendered;
}

/** Renders Keel messages as the AI SDK provider prompt. */
export function toProviderPrompt(system: string | undefined, messages: readonly Message[]): LanguageModelV4Prompt {
  const prompt: LanguageModelV4Message[] = [];
  if (system) prompt.push({ role: 'system', content: system });
  for (const m of messages) {
    const r = renderCached(m);
    if (r) prompt.push(r);
  }
  return prompt;
}

/**
 * The provider prompt of one turn's growing conversation: each message is rendered once, and a
 * step's prompt is the previous step's plus what that step added. A new array (compaction,
 * resumption) starts over; a last tool message that gained results since is rendered again.
 */
export class ProviderPromptBuilder {
  private source: readonly Message[] | undefined;
  private rendered: LanguageModelV4Message[] = [];
  /** For each message consumed, how many rendered messages there are up to it (a message may render as none). */
  private ends: number[] = [];
  private lastSize = 0;

  build(system: string | undefined, messages: readonly Message[]): LanguageModelV4Prompt {
    if (messages !== this.source || this.ends.length > messages.length) this.restart(messages);
    const consumed = this.ends.length;
    if (consumed > 0) {
      const last = messages[consumed - 1]!;
      if (last.role === 'tool' && last.content.length !== this.lastSize) {
        this.ends.pop();
        this.rendered.length = this.ends.at(-1) ?? 0;
      }
    }
    for (let i = this.ends.length; i < messages.length; i++) {
      const r = renderCached(messages[i]!);
      if (r) this.rendered.push(r);
      this.ends.push(this.rendered.length);
    }
    this.lastSize = resultsIn(messages.at(-1));
    // A new array each time (the provider may keep what it was given): copied in one block.
    return system
      ? [{ role: 'system', content: system } as LanguageModelV4Message].concat(this.rendered)
      : this.rendered.slice();
  }

  /** How many first messages of `messages` this builder has rendered: none unless it last built from that array. */
  renderedOf(messages: readonly Message[]): number {
    return messages === this.source ? this.ends.length : 0;
  }

  /**
   * Starts this builder on `messages` from what `from` rendered of its first `count` messages, the
   * same message objects in the same order (see carried-conversation.ts): they are not looked up again.
   */
  adopt(from: ProviderPromptBuilder, messages: readonly Message[], count: number): void {
    const n = Math.min(count, from.ends.length, messages.length);
    this.source = messages;
    this.ends = from.ends.slice(0, n);
    this.rendered = from.rendered.slice(0, n > 0 ? from.ends[n - 1]! : 0);
    this.lastSize = n > 0 ? resultsIn(messages[n - 1]) : 0;
  }

  private restart(messages: readonly Message[]): void {
    this.source = messages;
    this.rendered.length = 0;
    this.ends.length = 0;
    this.lastSize = 0;
  }
}
