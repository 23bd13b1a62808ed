export {
  mcpServer,
  mcpServerSchema,
  mcpServersSchema,
  parseMcpServers,
  McpConfigError,
  type McpServerConfig,
} from './config.ts';
export { McpPool, McpUnavailableError } from './pool.ts';
export { McpToolListTooLongError } from './tool-list.ts';
export {
  readMcpRecord,
  discoverMcpTools,
  MCP_TOOLS_EVENT,
  type McpToolsRecord,
  type RecordedServer,
  type RecordedTool,
} from './record.ts';
export { mcpTool } from './tools.ts';
export { agentWithMcpTools, type McpAgentOptions, type McpRunRef, type McpToolsGot } from './agent.ts';
