import type { AgentDefinition, Tool } from '../core/index.ts';
import type { SessionLog } from '../session/index.ts';
import type { StoreOps } from '../store/index.ts';
import { parseMcpServers } from './config.ts';
import type { McpPool } from './pool.ts';
import { discoverMcpTools, readMcpRecord, writeMcpRecord, type McpToolsRecord } from './record.ts';
import { mcpTool } from './tools.ts';

export interface McpRunRef {
  id: string;
  sessionId: string;
  fencingToken: number;
}

/** What a run got from its MCP servers: the record, and each tool with its server. */
export interface McpToolsGot {
  record: McpToolsRecord;
  tools: Array<{ server: string; remoteName: string; tool: Tool }>;
}

export interface McpAgentOptions {
  /** Runs in the transaction that appends the record at the run's first start (not when it was recorded before). */
  recorded?(tx: StoreOps, got: McpToolsGot): Promise<void>;
}

/**
 * The agent a run executes with: its own tools and its MCP servers' tools. At the run's first
 * start the servers are asked (`listTools`) and what they offered is recorded (`mcp/tools`);
 * every later execution of the run (after a wait, a crash, a restart) takes the recorded tools.
 * A server that is down at the first start throws McpUnavailableError (unless `onUnavailable: 'skip'`).
 */
export async function agentWithMcpTools(
  pool: McpPool,
  log: SessionLog,
  agent: AgentDefinition,
  run: McpRunRef,
  options: McpAgentOptions = {},
): Promise<{ agent: AgentDefinition; record?: McpToolsRecord }> {
  if (!agent.mcpServers || agent.mcpServers.length === 0) return { agent };
  const servers = parseMcpServers(agent.mcpServers, agent.name);
  const known = await readMcpRecord(log, run.sessionId, run.id);
  const record = known ?? (await discoverMcpTools(pool, servers, new Set(agent.tools.map((t) => t.name))));
  const got: McpToolsGot = {
    record,
    tools: record.servers.flatMap((r) => {
      const config = servers.find((s) => s.name === r.name);
      return r.tools.map((t) => ({ server: r.name, remoteName: t.remoteName, tool: mcpTool(pool, config, r.name, t) }));
    }),
  };
  if (!known)
    await writeMcpRecord(
      log,
      run.sessionId,
      run.id,
      run.fencingToken,
      record,
      options.recorded && ((tx) => options.recorded!(tx, got)),
    );
  return { agent: { ...agent, tools: [...agent.tools, ...got.tools.map((t) => t.tool)] }, record };
}
