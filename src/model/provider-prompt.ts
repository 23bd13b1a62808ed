/**
 * Keel messages rendered as the AI SDK provider prompt: `toProviderPrompt`, the one bridge from
 * Keel's message format (messages.ts) to the provider specification, and `ProviderPromptBuilder`,
 * which renders a turn's growing conversation once per message (the rendering is memoized on the
 * message: message-memo.ts).
 */
import type {
  LanguageModelV4Message,
  LanguageModelV4Prompt,
  LanguageModelV4ToolResultOutput,
  SharedV4FileData,
  SharedV4ProviderMetadata,
} from '@ai-sdk/provider';
import { memoOf } from './message-memo.ts';
import { resultsIn, type Message, type ToolOutput } from './messages.ts';

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
