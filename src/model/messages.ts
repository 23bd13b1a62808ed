/**
 * Keel's own message format: plain JSON, so it can be logged, hashed and replayed.
 * It mirrors the AI SDK prompt shape closely but is owned by Keel, so the event log does not
 * change when the provider specification does; `toProviderPrompt` (provider-prompt.ts) is the only bridge.
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

/**
 * How many results a tool message holds, 0 for any other message: the one part of a message in a
 * conversation that may still change (a tool message gains results during its step). The caches
 * of renderings and hashes are keyed by it.
 */
export function resultsIn(m: Message | undefined): number {
  return m?.role === 'tool' ? m.content.length : 0;
}
