/**
 * The estimate a model call reserves against its tenant's quotas (ADR-0043), made at the step
 * boundary before it: provider flow control's token estimate (the prompt's characters / 4, plus the
 * most the call may write), and its cost at the agent's prices.
 */
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import type { AgentDefinition } from '../../core/index.ts';
import { estimateTokens } from '../../flow-control/index.ts';
import { costOf, toProviderPrompt, type Message } from '../../model/index.ts';

const DEFAULT_MAX_OUTPUT = 1024;

export function estimateCall(
  agent: Pick<AgentDefinition, 'system' | 'settings' | 'tools' | 'pricing'>,
  conversation: readonly Message[],
): { tokens: number; cost: number } {
  const maxOut = agent.settings.maxOutputTokens ?? DEFAULT_MAX_OUTPUT;
  const system = typeof agent.system === 'string' ? agent.system : undefined;
  const options = {
    prompt: toProviderPrompt(system, conversation),
    maxOutputTokens: maxOut,
  } as LanguageModelV4CallOptions;
  const tokens = estimateTokens(options, DEFAULT_MAX_OUTPUT);
  const cost = costOf(
    { inputTokens: Math.max(0, tokens - maxOut), outputTokens: maxOut, cachedInputTokens: 0, reasoningTokens: 0 },
    agent.pricing,
  );
  return { tokens, cost };
}
