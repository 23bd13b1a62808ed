import type { LanguageModelV4 } from '@ai-sdk/provider';
import type { TurnHooks } from '../core/index.ts';
import {
  callModel,
  classifyModelError,
  costOf,
  defaultRetryPolicy,
  portableMessages,
  resultsIn,
  retryDelayMs,
  sleep,
  toProviderPrompt,
  type Message,
  type ModelCallResult,
  type Pricing,
  type RetryPolicy,
} from '../model/index.ts';
import { memoOf } from '../model/message-memo.ts';
import { newId } from '../core/index.ts';
import type { StoreOps } from '../store/index.ts';
import type { SessionEvent } from './event-types.ts';
import type { SessionLog } from './log.ts';
import { contextMessages, contextProjection, type ContextState } from './projections/index.ts';
import { readProjection } from './reader.ts';

/** A rough token count (4 characters a token) for when the provider has reported none. */
export function estimateTokens(messages: readonly Message[]): number {
  let chars = 0;
  for (const m of messages) chars += charsOf(m);
  return Math.ceil(chars / 4);
}

// Counted once per message (again only when a tool message gained results since).
function charsOf(m: Message): number {
  const size = resultsIn(m);
  const memo = memoOf(m);
  if (memo.charsSize !== size) {
    memo.chars = JSON.stringify(m.role === 'summary' ? m.text : m.content).length;
    memo.charsSize = size;
  }
  return memo.chars;
}

/**
 * Where to cut: the index of the first message kept. The kept part never starts with a tool
 * message, so a tool call and its result stay on the same side. Keeps as much recent history as
 * fits `keepRecentTokens`, and at least the last message that can start the kept part.
 * Returns 0 when there is nothing to summarize.
 */
export function chooseCut(messages: readonly Message[], keepRecentTokens: number): number {
  let best = 0;
  let suffix = 0;
  for (let i = messages.length - 1; i > 0; i--) {
    suffix += estimateTokens([messages[i]!]);
    if (messages[i]!.role === 'tool') continue;
    if (best === 0 || suffix <= keepRecentTokens) best = i;
    if (suffix > keepRecentTokens) break;
  }
  return best;
}

const SUMMARY_SYSTEM = `You maintain the running summary of a conversation between a user and an AI assistant that uses tools.
Write a summary another assistant can continue from: the user's goals and constraints, decisions made, facts learned from tools (with the values that matter), files or resources touched, and what remains to do.
If a previous summary is given, produce an updated summary that keeps everything still relevant from it and adds the new conversation. Output only the summary.`;

function render(messages: readonly Message[]): string {
  const clip = (s: string) => (s.length > 2000 ? `${s.slice(0, 2000)}… [${s.length - 2000} more characters]` : s);
  const lines: string[] = [];
  for (const m of messages) {
    switch (m.role) {
      case 'user':
        lines.push(`User: ${m.content.map((p) => (p.type === 'text' ? p.text : `[file ${p.mediaType}]`)).join('')}`);
        break;
      case 'assistant':
        for (const p of m.content) {
          if (p.type === 'text') lines.push(`Assistant: ${p.text}`);
          else if (p.type === 'tool-call')
            lines.push(`Assistant called ${p.toolName}(${clip(JSON.stringify(p.input))})`);
        }
        break;
      case 'tool':
        for (const r of m.content) {
          const out =
            r.output.type === 'error'
              ? `error ${r.output.code}: ${r.output.message}`
              : r.output.type === 'text'
                ? r.output.value
                : JSON.stringify(r.output.value);
          lines.push(`Tool ${r.toolName} returned: ${clip(out)}`);
        }
        break;
      case 'summary':
        lines.push(`[Summary of an abandoned branch: ${m.text}]`);
        break;
    }
  }
  return lines.join('\n');
}

export interface SummarizeOptions {
  model: LanguageModelV4;
  pricing?: Pricing;
  retry?: RetryPolicy;
  signal?: AbortSignal;
}

/** One summarizing model call (with the same retry policy as the loop). */
export async function summarize(
  previous: string | null,
  messages: readonly Message[],
  o: SummarizeOptions,
): Promise<{ text: string; result: ModelCallResult; cost: number }> {
  const input = `${previous ? `<previous-summary>\n${previous}\n</previous-summary>\n\n` : ''}<conversation>\n${render(messages)}\n</conversation>`;
  const prompt = toProviderPrompt(SUMMARY_SYSTEM, [
    { id: newId(), role: 'user', content: [{ type: 'text', text: input }] },
  ]);
  const signal = o.signal ?? new AbortController().signal;
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await callModel(o.model, { prompt }, signal);
      const text = result.content
        .map((p) => (p.type === 'text' ? p.text : ''))
        .join('')
        .trim();
      if (!text) throw new Error('the summarizer returned no text');
      return { text, result, cost: costOf(result.usage, o.pricing) };
    } catch (e) {
      const error = classifyModelError(e, signal.aborted);
      const delay = retryDelayMs(o.retry ?? defaultRetryPolicy, attempt, error);
      if (delay === undefined) throw e;
      await sleep(delay, signal);
    }
  }
}

export interface CompactOptions extends SummarizeOptions {
  /** Recent history kept verbatim (estimated tokens). */
  keepRecentTokens?: number;
  reason?: 'manual' | 'threshold' | 'overflow';
  /** For a compaction inside a turn: the turn, and the step it follows, so the log places it there. */
  turn?: number;
  step?: number;
  /** The run the compaction happens in, if any. */
  runId?: string;
  /** Runs in the transaction that appends the compaction (the server records an Idempotency-Key there). */
  within?: (tx: StoreOps, event: SessionEvent<'compaction'>) => Promise<void>;
}

export type CompactResult =
  { compacted: false; reason: string } | { compacted: true; event: SessionEvent<'compaction'>; context: Message[] };

/**
 * Summarizes the older part of the session's current context into a compaction entry. Nothing is
 * deleted: the entry tells the context projection where the kept part begins. The new summary is
 * built on the previous one, so repeated compactions lose nothing.
 */
export async function compactSession(
  log: SessionLog,
  sessionId: string,
  o: CompactOptions,
  snapshotEvery: number,
): Promise<CompactResult> {
  const read = await readProjection(log, sessionId, contextProjection, snapshotEvery);
  const state: ContextState = read.state;
  const cut = chooseCut(state.messages, o.keepRecentTokens ?? 8000);
  if (cut <= 0) return { compacted: false, reason: 'nothing to compact: the context is already as short as it can be' };

  const before = contextMessages(state);
  const { text, result, cost } = await summarize(state.summary?.text ?? null, state.messages.slice(0, cut), o);
  const kept = state.messages.slice(cut);
  const append = (tx: StoreOps) =>
    log.append(
      sessionId,
      [
        {
          type: 'compaction',
          ...(o.turn !== undefined ? { turn: o.turn } : {}),
          ...(o.step !== undefined ? { step: o.step } : {}),
          ...(o.runId !== undefined ? { runId: o.runId } : {}),
          data: {
            summary: text,
            firstKeptEntryId: state.entryIds[cut]!,
            tokensBefore: state.lastInputTokens ?? estimateTokens(before),
            tokensAfter: estimateTokens([{ id: '', role: 'summary', text }, ...kept]),
            estimated: state.lastInputTokens === null,
            model: { provider: o.model.provider, modelId: o.model.modelId },
            usage: result.usage,
            cost,
            reason: o.reason ?? 'manual',
          },
        },
      ],
      // Refuse to cut a context that changed while the summary was written.
      { expectLastSeq: read.asOfSeq, tx },
    );
  const [event] = await log.transaction(async (tx) => {
    const appended = await append(tx);
    await o.within?.(tx, appended[0] as SessionEvent<'compaction'>);
    return appended;
  });
  const after: ContextState = contextProjection.apply(state, event!);
  return { compacted: true, event: event as SessionEvent<'compaction'>, context: contextMessages(after) };
}

export interface CompactionSettings {
  /** The model's context window, in tokens. */
  contextWindow: number;
  /** Headroom left for the answer: compaction starts above contextWindow - reserveTokens. */
  reserveTokens?: number;
  keepRecentTokens?: number;
  /** Defaults to the agent's model. */
  model?: LanguageModelV4;
  pricing?: Pricing;
}

/**
 * The loop's compaction hook for a session: checked at every step boundary (so also in the middle
 * of a long tool loop), and on a context overflow from the provider.
 */
export function compactionHook(
  log: SessionLog,
  sessionId: string,
  agentModel: LanguageModelV4,
  settings: CompactionSettings,
  snapshotEvery: number,
  runId?: string,
): TurnHooks {
  return {
    async compact(ctx) {
      if (ctx.reason === 'threshold') {
        const tokens = Math.max(ctx.lastInputTokens ?? 0, estimateTokens(ctx.conversation));
        if (tokens <= settings.contextWindow - (settings.reserveTokens ?? 16_000)) return undefined;
      }
      // The compaction reads the log: what the turn reported so far must be in it.
      await ctx.flush();
      const res = await compactSession(
        log,
        sessionId,
        {
          model: settings.model ?? agentModel,
          reason: ctx.reason,
          signal: ctx.signal,
          turn: ctx.turn,
          ...(ctx.step > 0 ? { step: ctx.step } : {}),
          ...(runId !== undefined ? { runId } : {}),
          ...(settings.pricing ? { pricing: settings.pricing } : {}),
          ...(settings.keepRecentTokens !== undefined ? { keepRecentTokens: settings.keepRecentTokens } : {}),
        },
        snapshotEvery,
      );
      if (!res.compacted) return undefined;
      // This turn's messages keep their reasoning (the working copies); earlier turns' never regain it.
      const working = new Map(ctx.conversation.map((m) => [m.id, m]));
      return res.context.flatMap((m) => {
        const w = working.get(m.id);
        return w ? [w] : portableMessages([m]);
      });
    },
  };
}
