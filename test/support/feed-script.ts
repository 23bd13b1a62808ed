/**
 * Feed items scripted by hand for the protocol encoders' tests (agui-stream, openai-response-encoder):
 * durable events get seqs in order, deltas stand between them, as `follow()` yields them.
 */
import type { FeedItem } from '../../src/session/index.ts';

/** The run the scripted items belong to. */
export const FEED_RUN = 'run1';
const RUN = FEED_RUN;

/** A script of feed items: durable events get seqs in order; deltas stand between them. */
export function script(build: (s: Script) => void): FeedItem[] {
  const s = new Script();
  build(s);
  return s.items;
}

export class Script {
  items: FeedItem[] = [];
  private seq = 0;
  ev(type: string, data: Record<string, unknown>): this {
    this.seq++;
    this.items.push({
      kind: 'event',
      event: { seq: this.seq, id: `e${this.seq}`, type, v: 1, time: 0, entry: false, runId: RUN, data },
    } as unknown as FeedItem);
    return this;
  }
  delta(messageId: string, text: string): this {
    this.items.push({
      kind: 'delta',
      id: `${this.seq}.${this.items.length}`,
      delta: { type: 'text/delta', turn: 1, step: 1, messageId, delta: text },
    });
    return this;
  }
  status(from: string | null, to: string, extra: Record<string, unknown> = {}): this {
    return this.ev('run/status', { from, to, attempt: 1, ...extra });
  }
  call(id: string, text: string, o: { deltas?: string[]; tools?: Array<{ id: string; name: string }> } = {}): this {
    for (const d of o.deltas ?? []) this.delta(id, d);
    this.ev('step/start', {});
    this.ev('request/header', { messageId: id, attempt: 1 });
    return this.message(id, text, o.tools);
  }
  message(id: string, text: string, tools: Array<{ id: string; name: string }> = []): this {
    return this.ev('assistant/message', {
      message: {
        id,
        role: 'assistant',
        content: [
          ...(text ? [{ type: 'text', text }] : []),
          ...tools.map((t) => ({ type: 'tool-call', toolCallId: t.id, toolName: t.name, input: { target: 'x' } })),
        ],
      },
      finishReason: 'stop',
      usage: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, reasoningTokens: 0 },
      cost: 0,
      timing: { startedAt: 0, durationMs: 1 },
    });
  }
}
