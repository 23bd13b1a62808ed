/**
 * The limits flow control enforces, as configured: what a model's limit is (`ModelLimit`), the keys
 * they are configured under and which one applies to a model (`limitKeyFor`), the priorities of
 * waiting runs, and what one request counts against a limit (`estimateTokens`, `windowWithMargin`).
 */
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';

/** A model's limits (per model id, or per provider with `provider:*`, or `*`). */
export interface ModelLimit {
  /** Requests in flight at once, across every worker and process on the store. */
  concurrency?: number;
  /** Requests started per window (a minute by default). */
  requestsPerMinute?: number;
  /** Tokens (input estimate + max output, settled to the actual usage) per window. */
  tokensPerMinute?: number;
  /** The window's length (default 60 000 ms): shorter windows for tests and benchmarks. */
  windowMs?: number;
}

/** Keys: `provider:modelId` (e.g. `openai:gpt-4.1`), `provider:*`, or `*`. */
export type ModelLimits = Record<string, ModelLimit>;

/** Who goes first when several wait: `interactive` (0) before `batch` (100); a number: lower first. */
export type Priority = 'interactive' | 'batch' | number;

export const rankOf = (p: Priority | undefined): number =>
  p === undefined || p === 'interactive' ? 0 : p === 'batch' ? 100 : p;

/** The limit key that applies to a model, or undefined: the most specific configured key wins. */
export function limitKeyFor(limits: ModelLimits, provider: string, modelId: string): string | undefined {
  const base = provider.split('.')[0]!;
  for (const k of [`${provider}:${modelId}`, `${base}:${modelId}`, `${provider}:*`, `${base}:*`, '*'])
    if (limits[k]) return k;
  return undefined;
}

/** A rough token estimate of a request: its prompt's characters / 4, plus its max output. */
export function estimateTokens(options: LanguageModelV4CallOptions, defaultMaxOutput = 1024): number {
  let chars = 0;
  for (const m of options.prompt) {
    if (typeof m.content === 'string') chars += m.content.length;
    else
      for (const p of m.content as unknown as Array<Record<string, unknown>>)
        chars += JSON.stringify(p.text ?? p.input ?? p.output ?? '').length;
  }
  for (const t of options.tools ?? []) chars += JSON.stringify(t).length;
  return Math.ceil(chars / 4) + (options.maxOutputTokens ?? defaultMaxOutput);
}

/**
 * The window the store counts in: the configured one plus a margin of 2% (20 ms to 1 s) for the
 * time between a grant and the provider's receipt of the request, so that a provider counting by
 * arrival never sees one request too many in its window.
 */
export const windowWithMargin = (windowMs: number): number =>
  windowMs + Math.min(1000, Math.max(20, Math.round(windowMs * 0.02)));
