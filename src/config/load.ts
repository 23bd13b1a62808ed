import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { z } from 'zod';
import { askUser, defineAgent, type AgentDefinition, type LargePayloadPolicy, type Tool } from '../core/index.ts';
import type { CompactionSettings } from '../session/index.ts';
import { demoAgent } from './demo.ts';
import { BUILT_IN_SCORERS, judgeScorer, type Scorer } from '../runs/evals/scorers.ts';
import { modelFromId } from './models.ts';
import { mcpServersSchema, type McpServerConfig } from '../mcp/config.ts';
import type { ModelLimits, Priority } from '../flow-control/index.ts';
import type { TenantQuotas } from '../store/index.ts';
import { TenantQuotasSchema } from '../runs/quotas/quota-options.ts';
import { retentionOptionsFromConfig, type RetentionConfig, type RetentionOptions } from '../retention/index.ts';

/** One agent in a configuration file. In JS/TS configs, `model` may be an AI SDK model and `tools` real tools. */
export interface AgentConfig {
  name: string;
  version?: string;
  model: string | LanguageModelV4;
  system?: string;
  /** Tools, or built-in tool names ("ask_user"). */
  tools?: ReadonlyArray<Tool | 'ask_user'>;
  limits?: { maxSteps?: number; maxTokens?: number; maxCostUsd?: number };
  settings?: { maxOutputTokens?: number; temperature?: number; topP?: number; topK?: number; seed?: number };
  /** Overrides a tool's approval policy by tool name. */
  approvals?: Record<string, 'always' | 'never'>;
  compaction?: {
    contextWindow: number;
    reserveTokens?: number;
    keepRecentTokens?: number;
    model?: string | LanguageModelV4;
  };
  pricing?: { inputPerMTok: number; outputPerMTok: number; cachedInputPerMTok?: number };
  toolConcurrency?: number;
  /** MCP servers whose tools the agent gets (docs/mcp.md). */
  mcpServers?: McpServerConfig[];
  /** When its model calls wait for provider limits: `interactive` (default) before `batch`, or a number (lower first). */
  priority?: Priority;
}

export interface KeelConfig {
  agents: AgentConfig[];
  /**
   * Provider limits held across every process on the database, by `provider:modelId`,
   * `provider:*` or `*` (docs/flow-control.md).
   */
  providerLimits?: ModelLimits;
  /**
   * Experiment scorers by name, beside the built-in ones (docs/evals.md): a function
   * `(item, candidate, reference) => score` from 0 to 1, or a model as judge with a rubric.
   */
  scorers?: Record<string, Scorer | { judge: { model: string | LanguageModelV4; rubric: string } }>;
  /**
   * Tenant quotas (docs/operations.md): `default`, every tenant's (a tenant's own quotas in the
   * tenants registry override it field by field), and `recheckMs`, how soon a run waiting on calls in flight tries again.
   */
  quotas?: { default?: TenantQuotas; recheckMs?: number };
  /**
   * Large payloads (docs/operations.md): the threshold above which a tool result, message
   * text or attachment is stored apart by hash, what the model sees of a large tool result, and the
   * bounds of an event and of a payload.
   */
  largePayloads?: Partial<LargePayloadPolicy>;
  /** Retention: policies, the archive store, the sweeper's pace (docs/operations.md). */
  retention?: RetentionConfig;
}

/** Typed helper for keel.config.ts. */
export const defineConfig = (c: KeelConfig): KeelConfig => c;

export interface LoadedConfig {
  /** The file it came from; null for the built-in demo. */
  source: string | null;
  agents: AgentDefinition[];
  compaction: Record<string, CompactionSettings>;
  /** Provider limits, and the agents' priorities when they wait for them (docs/flow-control.md). */
  providerLimits?: ModelLimits;
  priorities?: Record<string, Priority>;
  /** Experiment scorers (code and judges), by name. */
  scorers?: Record<string, Scorer>;
  /** Tenant quotas (docs/operations.md). */
  quotas?: { default?: TenantQuotas; recheckMs?: number };
  /** Large payloads' threshold, model view and bounds (docs/operations.md). */
  largePayloads?: Partial<LargePayloadPolicy>;
  /** Retention (docs/operations.md). */
  retention?: RetentionOptions;
  demo: boolean;
}

/** Turns a model id into a model the way the configuration's own ids are (scripted files relative to it): what a rerun's model override names. */
export function modelResolverFor(config: Pick<LoadedConfig, 'source'>, cwd = process.cwd()) {
  const baseDir = config.source ? dirname(config.source) : cwd;
  return (id: string): LanguageModelV4 => modelFromId(id, { baseDir });
}

export class ConfigError extends Error {
  constructor(source: string, why: string) {
    super(`${source}: ${why}`);
    this.name = 'ConfigError';
  }
}

export const CONFIG_FILES = ['keel.config.ts', 'keel.config.mjs', 'keel.config.js', 'keel.config.json'];

const isModel = (v: unknown): v is LanguageModelV4 =>
  typeof v === 'object' && v !== null && (v as { specificationVersion?: unknown }).specificationVersion === 'v4';
const isTool = (v: unknown): v is Tool =>
  typeof v === 'object' &&
  v !== null &&
  typeof (v as Tool).execute === 'function' &&
  typeof (v as Tool).name === 'string';

const agentSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, dots, dashes, underscores'),
  version: z.string().min(1).optional(),
  model: z.union([z.string().min(3), z.custom<LanguageModelV4>(isModel, 'an AI SDK language model (v4)')]),
  system: z.string().optional(),
  tools: z.array(z.union([z.literal('ask_user'), z.custom<Tool>(isTool, 'a tool made with tool()')])).optional(),
  limits: z
    .strictObject({
      maxSteps: z.number().int().positive().optional(),
      maxTokens: z.number().int().positive().optional(),
      maxCostUsd: z.number().positive().optional(),
    })
    .optional(),
  settings: z
    .strictObject({
      maxOutputTokens: z.number().int().positive().optional(),
      temperature: z.number().optional(),
      topP: z.number().optional(),
      topK: z.number().optional(),
      seed: z.number().int().optional(),
    })
    .optional(),
  approvals: z.record(z.string(), z.enum(['always', 'never'])).optional(),
  compaction: z
    .strictObject({
      contextWindow: z.number().int().positive(),
      reserveTokens: z.number().int().nonnegative().optional(),
      keepRecentTokens: z.number().int().positive().optional(),
      model: z.union([z.string(), z.custom<LanguageModelV4>(isModel)]).optional(),
    })
    .optional(),
  pricing: z
    .strictObject({
      inputPerMTok: z.number().nonnegative(),
      outputPerMTok: z.number().nonnegative(),
      cachedInputPerMTok: z.number().nonnegative().optional(),
    })
    .optional(),
  toolConcurrency: z.number().int().positive().optional(),
  mcpServers: mcpServersSchema.optional(),
  priority: z.union([z.enum(['interactive', 'batch']), z.number().int()]).optional(),
});
const positive = z.number().int().positive();
const providerLimitsSchema = z.record(
  z.string().regex(/^(\*|[A-Za-z0-9._-]+:(\*|.+))$/, 'a key is provider:modelId, provider:* or *'),
  z.strictObject({
    concurrency: positive.optional(),
    requestsPerMinute: positive.optional(),
    tokensPerMinute: positive.optional(),
    windowMs: positive.optional(),
  }),
);
const scorerSchema = z.union([
  z.custom<Scorer>((v) => typeof v === 'function', 'a function (item, candidate, reference) => score'),
  z.strictObject({
    judge: z.strictObject({
      model: z.union([z.string().min(3), z.custom<LanguageModelV4>(isModel, 'an AI SDK language model (v4)')]),
      rubric: z.string().min(1),
    }),
  }),
]);
const largePayloadsSchema = z.strictObject({
  thresholdBytes: positive.optional(),
  modelView: z.union([z.literal('whole'), z.strictObject({ truncateTo: positive })]).optional(),
  maxEventBytes: positive.optional(),
  maxPayloadBytes: positive.optional(),
});
const configSchema = z.strictObject({
  agents: z.array(agentSchema).min(1),
  providerLimits: providerLimitsSchema.optional(),
  quotas: z.strictObject({ default: TenantQuotasSchema.optional(), recheckMs: positive.optional() }).optional(),
  largePayloads: largePayloadsSchema.optional(),
  scorers: z
    .record(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'lowercase letters, digits and underscores'), scorerSchema)
    .optional(),
  // Checked by retentionOptionsFromConfig, which names the field at fault.
  retention: z.unknown().optional(),
});

function withApproval(t: Tool, approval: 'always' | 'never'): Tool {
  return { ...t, approval };
}

/** Builds agent definitions from a parsed configuration. */
export function agentsFromConfig(
  config: KeelConfig,
  source: string,
  baseDir: string,
): {
  agents: AgentDefinition[];
  compaction: Record<string, CompactionSettings>;
  providerLimits?: ModelLimits;
  priorities?: Record<string, Priority>;
  scorers?: Record<string, Scorer>;
  quotas?: { default?: TenantQuotas; recheckMs?: number };
  largePayloads?: Partial<LargePayloadPolicy>;
  retention?: RetentionOptions;
} {
  const parsed = configSchema.safeParse(config);
  if (!parsed.success) throw new ConfigError(source, z.prettifyError(parsed.error));
  const compaction: Record<string, CompactionSettings> = {};
  const model = (m: string | LanguageModelV4) => (typeof m === 'string' ? modelFromId(m, { baseDir }) : m);
  const agents = parsed.data.agents.map((a) => {
    try {
      const tools = (a.tools ?? []).map((t) => (t === 'ask_user' ? askUser() : t));
      for (const name of Object.keys(a.approvals ?? {})) {
        if (!tools.some((t) => t.name === name)) throw new Error(`approvals: agent ${a.name} has no tool ${name}`);
      }
      if (a.compaction) {
        compaction[a.name] = {
          contextWindow: a.compaction.contextWindow,
          ...(a.compaction.reserveTokens !== undefined ? { reserveTokens: a.compaction.reserveTokens } : {}),
          ...(a.compaction.keepRecentTokens !== undefined ? { keepRecentTokens: a.compaction.keepRecentTokens } : {}),
          ...(a.compaction.model !== undefined ? { model: model(a.compaction.model) } : {}),
          ...(a.pricing ? { pricing: a.pricing } : {}),
        };
      }
      return defineAgent({
        name: a.name,
        ...(a.version !== undefined ? { version: a.version } : {}),
        model: model(a.model),
        ...(a.system !== undefined ? { system: a.system } : {}),
        tools: tools.map((t) => (a.approvals?.[t.name] ? withApproval(t, a.approvals[t.name]!) : t)),
        ...(a.limits ? { limits: a.limits } : {}),
        ...(a.settings ? { settings: a.settings } : {}),
        ...(a.pricing ? { pricing: a.pricing } : {}),
        ...(a.toolConcurrency !== undefined ? { toolConcurrency: a.toolConcurrency } : {}),
        ...(a.mcpServers?.length ? { mcpServers: a.mcpServers } : {}),
      });
    } catch (e) {
      const message = (e as Error).message;
      throw new ConfigError(source, message.startsWith(`agent ${a.name}`) ? message : `agent ${a.name}: ${message}`);
    }
  });
  const names = new Set<string>();
  for (const a of agents) {
    const key = `${a.name}@${a.version}`;
    if (names.has(key)) throw new ConfigError(source, `agent ${key} is defined twice`);
    names.add(key);
  }
  const priorities = Object.fromEntries(
    parsed.data.agents.flatMap((a) => (a.priority !== undefined ? [[a.name, a.priority]] : [])),
  );
  return {
    agents,
    compaction,
    ...(parsed.data.providerLimits ? { providerLimits: parsed.data.providerLimits } : {}),
    ...(parsed.data.quotas ? { quotas: parsed.data.quotas as { default?: TenantQuotas; recheckMs?: number } } : {}),
    ...(Object.keys(priorities).length > 0 ? { priorities } : {}),
    ...(parsed.data.scorers ? { scorers: scorersOf(parsed.data.scorers, model, source) } : {}),
    ...(parsed.data.largePayloads ? { largePayloads: parsed.data.largePayloads } : {}),
    ...(parsed.data.retention !== undefined ? { retention: retentionOf(parsed.data.retention, source, baseDir) } : {}),
  };
}

function retentionOf(raw: unknown, source: string, baseDir: string): RetentionOptions {
  try {
    return retentionOptionsFromConfig(raw, baseDir);
  } catch (e) {
    throw new ConfigError(source, (e as Error).message);
  }
}

/** The configured scorers: functions as they are, judges with their model. */
function scorersOf(
  config: NonNullable<KeelConfig['scorers']>,
  model: (m: string | LanguageModelV4) => LanguageModelV4,
  source: string,
): Record<string, Scorer> {
  const out: Record<string, Scorer> = {};
  for (const [name, s] of Object.entries(config)) {
    if (name in BUILT_IN_SCORERS) throw new ConfigError(source, `scorers: ${name} is a built-in scorer's name`);
    if (typeof s === 'function') out[name] = s;
    else {
      try {
        out[name] = judgeScorer({ model: model(s.judge.model), rubric: s.judge.rubric });
      } catch (e) {
        throw new ConfigError(source, `scorers.${name}: ${(e as Error).message}`);
      }
    }
  }
  return out;
}

/**
 * Loads `path` (or the first keel.config.{ts,mjs,js,json} in `cwd`). With none, the built-in
 * demo agent runs on a scripted model.
 */
export async function loadConfig(path?: string, cwd = process.cwd()): Promise<LoadedConfig> {
  const file = path ? resolve(cwd, path) : CONFIG_FILES.map((f) => resolve(cwd, f)).find((f) => existsSync(f));
  // The demo's first version is the default agent; its second is there to rerun and evaluate on.
  if (!file) return { source: null, agents: [demoAgent('1'), demoAgent('2')], compaction: {}, demo: true };
  if (!existsSync(file)) throw new ConfigError(file, 'no such file');
  let raw: unknown;
  try {
    if (file.endsWith('.json')) raw = JSON.parse(readFileSync(file, 'utf8'));
    else {
      const mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
      raw = mod.default;
    }
  } catch (e) {
    throw new ConfigError(file, `cannot load it: ${(e as Error).message}`);
  }
  if (raw === undefined) throw new ConfigError(file, 'it has no default export');
  return { source: file, ...agentsFromConfig(raw as KeelConfig, file, dirname(file)), demo: false };
}
