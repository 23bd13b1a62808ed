import type { LanguageModelV4Usage } from '@ai-sdk/provider';

/** Token usage of one or more model calls, normalized across providers. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input tokens served from the provider's prompt cache (a subset of inputTokens). */
  cachedInputTokens: number;
  /** Output tokens spent on reasoning (a subset of outputTokens). */
  reasoningTokens: number;
}

export const emptyUsage = (): Usage => ({ inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 });

export function normalizeUsage(u: LanguageModelV4Usage | undefined): Usage {
  if (!u) return emptyUsage();
  return {
    inputTokens: u.inputTokens.total ?? 0,
    outputTokens: u.outputTokens.total ?? 0,
    cachedInputTokens: u.inputTokens.cacheRead ?? 0,
    reasoningTokens: u.outputTokens.reasoning ?? 0,
  };
}

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
    reasoningTokens: a.reasoningTokens + b.reasoningTokens,
  };
}

export const totalTokens = (u: Usage): number => u.inputTokens + u.outputTokens;

/** Prices in US dollars per million tokens. Cached input falls back to the input price. */
export interface Pricing {
  inputPerMTok: number;
  outputPerMTok: number;
  cachedInputPerMTok?: number;
}

export function costOf(u: Usage, p: Pricing | undefined): number {
  if (!p) return 0;
  const uncached = u.inputTokens - u.cachedInputTokens;
  return (
    (uncached * p.inputPerMTok +
      u.cachedInputTokens * (p.cachedInputPerMTok ?? p.inputPerMTok) +
      u.outputTokens * p.outputPerMTok) /
    1_000_000
  );
}
