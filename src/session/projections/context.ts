import {
  portableMessages,
  type AssistantMessage,
  type Message,
  type ToolCallPart,
  type ToolMessage,
} from '../../model/index.ts';
import type { Projection } from './projection.ts';

/** What the model sees next: the current path, the latest compaction applied. */
export interface ContextState {
  /** The latest compaction's summary, standing in for everything before its first kept entry. */
  summary: { id: string; text: string } | null;
  messages: Message[];
  /** The entry that started each message, and the turn it belongs to (parallel to `messages`). */
  entryIds: string[];
  turns: number[];
  /** Input tokens the provider reported for the last completed model call on this path. */
  lastInputTokens: number | null;
}

const callsOf = (m: AssistantMessage): ToolCallPart[] =>
  m.content.filter((p): p is ToolCallPart => p.type === 'tool-call');

export const contextProjection: Projection<ContextState> = {
  name: 'context',
  version: 1,
  scope: 'path',
  pathStart: 'latest-compaction',
  // What the model sees next: a large tool result as its policy's view.
  payloads: 'model',
  init: () => ({ summary: null, messages: [], entryIds: [], turns: [], lastInputTokens: null }),
  apply(s, e) {
    const push = (m: Message) => {
      s.messages.push(m);
      s.entryIds.push(e.id);
      s.turns.push(e.turn ?? 0);
    };
    switch (e.type) {
      case 'user/message':
        push(e.data.message);
        break;
      case 'assistant/message':
        push(e.data.message);
        if (!e.data.message.interrupted) s.lastInputTokens = e.data.usage.inputTokens;
        break;
      case 'tool/result': {
        const part = {
          type: 'tool-result' as const,
          toolCallId: e.data.toolCallId,
          toolName: e.data.toolName,
          output: e.data.output,
        };
        const last = s.messages.at(-1);
        if (last?.role === 'tool' && last.id === e.data.toolMessageId) {
          const assistant = s.messages.at(-2);
          const order = assistant?.role === 'assistant' ? callsOf(assistant).map((c) => c.toolCallId) : [];
          last.content.push(part);
          last.content.sort((a, b) => order.indexOf(a.toolCallId) - order.indexOf(b.toolCallId));
        } else {
          push({ id: e.data.toolMessageId, role: 'tool', content: [part] });
        }
        break;
      }
      case 'compaction': {
        // A first kept entry not in the state lies before where this fold started (a read that
        // began at a later compaction's first kept entry): everything folded so far is kept.
        const from =
          e.data.firstKeptEntryId === null
            ? s.messages.length
            : Math.max(0, s.entryIds.indexOf(e.data.firstKeptEntryId));
        s.messages = s.messages.slice(from);
        s.entryIds = s.entryIds.slice(from);
        s.turns = s.turns.slice(from);
        s.summary = { id: e.id, text: e.data.summary };
        // The last reported prompt size described the context before the cut.
        s.lastInputTokens = null;
        break;
      }
      case 'branch/summary':
        push({ id: e.id, role: 'summary', text: e.data.summary });
        break;
      default:
        break;
    }
    return s;
  },
  // Messages are not changed once folded, except the last one while tool results join it.
  clone: (s) => {
    const messages = s.messages.slice();
    const last = messages.at(-1);
    if (last?.role === 'tool') messages[messages.length - 1] = { ...last, content: last.content.slice() };
    return {
      summary: s.summary,
      messages,
      entryIds: s.entryIds.slice(),
      turns: s.turns.slice(),
      lastInputTokens: s.lastInputTokens,
    };
  },
  size: (s) => s.messages.length,
};

/**
 * The conversation to send: summary first, then the kept messages. A tool call left without a
 * result (a crashed or abandoned step) gets an `outcome_unknown` result, since providers refuse a
 * call without its result; its id derives from the call's message, so the same log always yields
 * the same context.
 */
export function contextMessages(s: ContextState, options: { openTurn?: number } = {}): Message[] {
  const out: Message[] = s.summary ? [{ id: s.summary.id, role: 'summary', text: s.summary.text }] : [];
  for (let i = 0; i < s.messages.length; i++) {
    const m = s.messages[i]!;
    out.push(m);
    if (m.role !== 'assistant') continue;
    // The running turn's open calls are its own to finish (see turnConversation).
    if (options.openTurn !== undefined && s.turns[i]! >= options.openTurn) continue;
    const calls = callsOf(m);
    if (calls.length === 0) continue;
    const next = s.messages[i + 1];
    // Read at every run's start over the whole context: no allocation for a call that has its result.
    const results = next?.role === 'tool' ? next.content : [];
    const missing = calls.filter((c) => !results.some((r) => r.toolCallId === c.toolCallId));
    if (missing.length === 0) continue;
    const filler = missing.map((c) => ({
      type: 'tool-result' as const,
      toolCallId: c.toolCallId,
      toolName: c.toolName,
      output: {
        type: 'error' as const,
        code: 'outcome_unknown' as const,
        message: 'no result was recorded for this call',
      },
    }));
    if (next?.role === 'tool') {
      const order = calls.map((c) => c.toolCallId);
      const merged: ToolMessage = {
        ...next,
        content: [...next.content, ...filler].sort((a, b) => order.indexOf(a.toolCallId) - order.indexOf(b.toolCallId)),
      };
      out.push(merged);
      i++;
    } else {
      out.push({ id: `${m.id}/unanswered`, role: 'tool', content: filler });
    }
  }
  return out;
}

/**
 * The working conversation of turn `turn` as its loop holds it, rebuilt from the log: earlier
 * turns in portable form (opaque reasoning never crosses a turn), their unanswered calls filled;
 * the turn's own messages as produced, its open calls left open for the loop to finish. This is
 * what a run resumes from: its checkpoint holds no messages (ADR-0008).
 */
export function turnConversation(s: ContextState, turn: number): Message[] {
  const turnOf = new Map<string, number>();
  s.messages.forEach((m, i) => turnOf.set(m.id, s.turns[i]!));
  return contextMessages(s, { openTurn: turn }).flatMap((m) =>
    (turnOf.get(m.id) ?? 0) < turn ? portableMessages([m]) : [m],
  );
}
