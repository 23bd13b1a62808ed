import type { AgentDefinition } from '../core/index.ts';
import type { SessionLog } from '../session/index.ts';
import { parseMcpServers } from './config.ts';
import type { McpPool } from './pool.ts';
import { discoverMcpTools, readMcpRecord, writeMcpRecord, type McpToolsRecord } from './record.ts';
import { mcpTool } from './tools.ts';

export interface McpRunRef {
  id: string;
  sessionId: string;
  fencingToken: number;
}

/**
 * The agent a run executes with: its own tools and its MCP servers' tools. At the run's first
 * start the servers are asked (`listTools`) and what they offered is recorded (`mcp/tools`);
 * every later execution of the run (after a wait, a crash, a restart) takes the recorded tools.
 * A server that is down at the first start throws McpUnavailableError (unless `onUnavailable: 'skip'`).
 */
export async function agentWithMcpTools(pool: McpPool, log: SessionLog, agent: AgentDefinition, run: McpRunRef): Promise<{ agent: AgentDefinition; record?: McpToolsRecord }> {
  if (!agent.mcpServers || agent.mcpServers.length === 0) return { agent };
  const servers = parseMcpServers(agent.mcpServers, agent.name);
  let record = await readMcpRecord(log, run.sessionId, run.id);
  if (!record) {
    record = await discoverMcpTools(pool, servers, new Set(agent.tools.map((t) => t.name)));
    await writeMcpRecord(log, run.sessionId, run.id, run.fencingToken, record);
  }
  const tools = record.servers.flatMap((r) => {
    const config = servers.find((s) => s.name === r.name);
    return r.tools.map((t) => mcpTool(pool, config, r.name, t));
  });
  return { agent: { ...agent, tools: [...agent.tools, ...tools] }, record };
}
