import type { Projection } from './projection.ts';

/** The conversation as people read it: messages, tool calls collapsed, compaction and branch markers. */
export type TranscriptItem =
  | { kind: 'user'; entryId: string; messageId: string; text: string; files: number; time: number; turn: number | null }
  | {
      kind: 'assistant';
      entryId: string;
      messageId: string;
      text: string;
      /** Visible reasoning, for display only. */
      reasoning: string | null;
      interrupted: boolean;
      time: number;
      turn: number | null;
      tools: Array<{ toolCallId: string; toolName: string; status: 'pending' | 'ok' | 'error'; error?: string }>;
    }
  | { kind: 'compaction'; entryId: string; summary: string; tokensBefore: number; tokensAfter: number; time: number }
  | { kind: 'branch'; entryId: string; summary: string; time: number };

export interface TranscriptState {
  items: TranscriptItem[];
}

export const transcriptProjection: Projection<TranscriptState> = {
  name: 'transcript',
  version: 1,
  scope: 'path',
  pathStart: 'root',
  init: () => ({ items: [] }),
  apply(s, e) {
    switch (e.type) {
      case 'user/message': {
        const parts = e.data.message.content;
        s.items.push({
          kind: 'user',
          entryId: e.id,
          messageId: e.data.message.id,
          text: parts.map((p) => (p.type === 'text' ? p.text : '')).join(''),
          files: parts.filter((p) => p.type === 'file').length,
          time: e.time,
          turn: e.turn ?? null,
        });
        break;
      }
      case 'assistant/message': {
        const m = e.data.message;
        const reasoning = m.content.map((p) => (p.type === 'reasoning' ? p.text : '')).join('');
        s.items.push({
          kind: 'assistant',
          entryId: e.id,
          messageId: m.id,
          text: m.content.map((p) => (p.type === 'text' ? p.text : '')).join(''),
          reasoning: reasoning || null,
          interrupted: m.interrupted === true,
          time: e.time,
          turn: e.turn ?? null,
          tools: m.content.flatMap((p) =>
            p.type === 'tool-call'
              ? [{ toolCallId: p.toolCallId, toolName: p.toolName, status: 'pending' as const }]
              : [],
          ),
        });
        break;
      }
      case 'tool/result': {
        for (let i = s.items.length - 1; i >= 0; i--) {
          const item = s.items[i]!;
          if (item.kind !== 'assistant') continue;
          const t = item.tools.find((x) => x.toolCallId === e.data.toolCallId);
          if (!t) continue;
          const out = e.data.output;
          t.status = out.type === 'error' ? 'error' : 'ok';
          if (out.type === 'error') t.error = `${out.code}: ${out.message}`;
          break;
        }
        break;
      }
      case 'compaction':
        s.items.push({
          kind: 'compaction',
          entryId: e.id,
          summary: e.data.summary,
          tokensBefore: e.data.tokensBefore,
          tokensAfter: e.data.tokensAfter,
          time: e.time,
        });
        break;
      case 'branch/summary':
        s.items.push({ kind: 'branch', entryId: e.id, summary: e.data.summary, time: e.time });
        break;
      default:
        break;
    }
    return s;
  },
  // Items are copied (the caller owns what a read returns); a tool result changes its call's status in place.
  clone: (s) => ({
    items: s.items.map((i) => (i.kind === 'assistant' ? { ...i, tools: i.tools.map((t) => ({ ...t })) } : { ...i })),
  }),
  size: (s) => s.items.length,
};
