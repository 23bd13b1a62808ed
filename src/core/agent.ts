import type { WaitPolicy } from './wait-spec.ts';
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { defaultRetryPolicy, type JsonValue, type Pricing, type RetryPolicy } from '../model/index.ts';
import type { Tool, UnknownOutcomePolicy } from './tools.ts';

export interface SystemPromptContext {
  turn: number;
  step: number;
}

export type SystemPrompt = string | ((ctx: SystemPromptContext) => string);

/** Provider call settings Keel passes through (and records in every request header). */
export interface CallSettings {
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  stopSequences?: string[];
  seed?: number;
  reasoning?: 'provider-default' | 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh' | 'max';
  providerOptions?: Record<string, Record<string, JsonValue>>;
}

export interface AgentLimits {
  /** Steps per turn. */
  maxSteps: number;
  /** Input + output tokens per turn. */
  maxTokens?: number;
  /** US dollars per turn; needs `pricing`. */
  maxCostUsd?: number;
}

export interface AgentDefinition {
  name: string;
  version: string;
  model: LanguageModelV4;
  system?: SystemPrompt;
  tools: readonly Tool[];
  settings: CallSettings;
  limits: AgentLimits;
  retry: RetryPolicy;
  /** Calls of one model decision that may run at once. */
  toolConcurrency: number;
  /** MCP servers whose tools the agent's runs get, recorded at each run's start (validated and connected by src/mcp; docs/mcp.md). */
  mcpServers?: readonly McpServerEntry[];
  pricing?: Pricing;
  /** How long an approval or a question may wait, and what happens then (a tool's own `wait` wins; ADR-0015). */
  waits?: WaitPolicy;
  /** An effectful call's outcome is unknown after a crash: what then (a tool's own policy wins; ADR-0018). Default `tell_model`. */
  onUnknownOutcome?: UnknownOutcomePolicy;
}

/** An MCP server's configuration as the loop carries it (its shape: `McpServerConfig` in src/mcp/config.ts). */
export type McpServerEntry = { readonly name: string; readonly [option: string]: unknown };

export type AgentOptions = Pick<AgentDefinition, 'name' | 'model'> &
  Partial<Omit<AgentDefinition, 'name' | 'model' | 'limits' | 'retry'>> & {
    limits?: Partial<AgentLimits>;
    retry?: Partial<RetryPolicy>;
  };

export function defineAgent(options: AgentOptions): AgentDefinition {
  if (!options.name) throw new TypeError('an agent needs a name');
  const names = new Set<string>();
  for (const t of options.tools ?? []) {
    if (names.has(t.name)) throw new TypeError(`agent ${options.name}: two tools are named "${t.name}"`);
    names.add(t.name);
  }
  const agent: AgentDefinition = {
    name: options.name,
    version: options.version ?? '1',
    model: options.model,
    tools: options.tools ?? [],
    settings: options.settings ?? {},
    limits: { maxSteps: 50, ...options.limits },
    retry: { ...defaultRetryPolicy, ...options.retry },
    toolConcurrency: options.toolConcurrency ?? 8,
    ...(options.system !== undefined ? { system: options.system } : {}),
    ...(options.pricing ? { pricing: options.pricing } : {}),
    ...(options.mcpServers?.length ? { mcpServers: options.mcpServers } : {}),
    ...(options.waits ? { waits: options.waits } : {}),
    ...(options.onUnknownOutcome ? { onUnknownOutcome: options.onUnknownOutcome } : {}),
  };
  if (!(agent.limits.maxSteps >= 1)) throw new TypeError(`agent ${agent.name}: limits.maxSteps must be at least 1`);
  if (!(agent.toolConcurrency >= 1)) throw new TypeError(`agent ${agent.name}: toolConcurrency must be at least 1`);
  if (agent.limits.maxCostUsd !== undefined && !agent.pricing) {
    throw new TypeError(`agent ${agent.name}: limits.maxCostUsd needs pricing to compute cost`);
  }
  return agent;
}
