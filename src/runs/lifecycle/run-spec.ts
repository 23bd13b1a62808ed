/** The row of a new run: the agent spec it runs with (its MCP tools added at its first start), its options and first status. */
import { newId, type AgentDefinition, type Tool } from '../../core/index.ts';
import { emptyUsage, type Usage, type UserMessage } from '../../model/index.ts';
import type { JsonObject, NewRun } from '../../store/index.ts';
import type { McpToolsGot } from '../../mcp/index.ts';
import type { RunOptions } from './types.ts';

/** The record of the agent a run uses: what it ran with, for audit and for recovery. */
export function agentSpec(agent: AgentDefinition): JsonObject {
  return {
    name: agent.name,
    version: agent.version,
    model: { provider: agent.model.provider, modelId: agent.model.modelId },
    system:
      typeof agent.system === 'function'
        ? { rendered: 'per request (function); see request headers' }
        : (agent.system ?? null),
    tools: agent.tools.map(toolSpec),
    settings: JSON.parse(JSON.stringify(agent.settings)) as JsonObject,
    limits: { ...agent.limits },
    retry: { ...agent.retry },
  };
}

/** One tool in a run's agent spec. */
function toolSpec(t: Tool): JsonObject {
  return {
    ...t.schema,
    approval: typeof t.approval === 'function' ? 'predicate' : t.approval,
    idempotent: t.idempotent,
    interactive: t.interactive,
    sequential: t.sequential,
    ...(t.timeoutMs !== undefined ? { timeoutMs: t.timeoutMs } : {}),
  } as JsonObject;
}

/**
 * The agent spec of a run once it got its MCP servers' tools (at its first start): its tools
 * followed by theirs, each naming its server and the server's own name for it (`mcp`), and which
 * servers it got them from or skipped (`mcp`: the `mcp/tools` record without the tools).
 */
export function specWithMcpTools(spec: JsonObject, got: McpToolsGot): JsonObject {
  const own = Array.isArray(spec.tools) ? spec.tools : [];
  const servers = got.record.servers.map(({ tools: _tools, ...server }) => server);
  return {
    ...spec,
    tools: [
      ...own,
      ...got.tools.map(({ tool: t, server, remoteName }) => ({ ...toolSpec(t), mcp: { server, remoteName } })),
    ],
    mcp: { servers, skipped: got.record.skipped } as unknown as JsonObject,
  };
}

export const usageOf = (u: JsonObject): Usage => ({ ...emptyUsage(), ...(u as Partial<Usage>) });

/** The row of a new run for a message: the agent it runs with, its deadline and options. */
export function newRunOf(
  sessionId: string,
  message: UserMessage,
  agent: AgentDefinition,
  options: RunOptions,
  more: Partial<NewRun> = {},
): NewRun {
  const now = Date.now();
  return {
    id: newId(),
    sessionId,
    agent: { name: agent.name, version: agent.version },
    agentSpec: agentSpec(agent),
    triggerMessageId: message.id,
    createdAt: now,
    deadlineAt: options.timeoutMs !== undefined ? now + options.timeoutMs : null,
    options: options as unknown as JsonObject,
    ...more,
  };
}

/** The data of a new run's first `run/status` event. */
export const queuedStatus = (agent: { name: string; version: string }) => ({
  from: null,
  to: 'queued' as const,
  attempt: 0,
  agent: { name: agent.name, version: agent.version },
});
