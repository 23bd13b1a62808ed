import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_MAX_PAGES, DEFAULT_MAX_TOOLS, type McpServerConfig } from './config.ts';
import { McpUnavailableError, type McpPool } from './pool.ts';

/** A server's tools/list went past a bound (`tools.maxPages`, `tools.maxTools`): the run does not take its tools. */
export class McpToolListTooLongError extends Error {
  readonly kind = 'mcp_tool_list_too_long';
  readonly server: string;
  /** The bound it went past, and its value. */
  readonly bound: 'maxPages' | 'maxTools';
  readonly max: number;
  constructor(server: string, bound: 'maxPages' | 'maxTools', max: number) {
    super(
      `MCP server ${server}: its tools/list has more than ${max} ${bound === 'maxPages' ? 'pages' : 'tools'} (tools.${bound}: ${max})`,
    );
    this.name = 'McpToolListTooLongError';
    this.server = server;
    this.bound = bound;
    this.max = max;
  }
}

export type ListedTools = {
  serverInfo?: { name: string; version: string };
  tools: Array<{
    name: string;
    title?: string;
    description?: string;
    inputSchema: unknown;
    annotations?: Record<string, unknown>;
  }>;
};

/**
 * The server's tools, read page by page (`tools/list` with the previous page's `nextCursor`): at
 * most `tools.maxPages` pages and `tools.maxTools` tools (100 and 1,000 by default), so that a
 * server whose cursor never ends, or that offers a huge list, neither hangs the run's start nor
 * fills the worker's memory. Past a bound: McpToolListTooLongError, without asking another page.
 * A failed request: McpUnavailableError (and the client is dropped: the next use connects again).
 */
export async function listServerTools(pool: McpPool, s: McpServerConfig): Promise<ListedTools> {
  const client = await pool.client(s);
  const timeout = s.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const maxPages = s.tools?.maxPages ?? DEFAULT_MAX_PAGES;
  const maxTools = s.tools?.maxTools ?? DEFAULT_MAX_TOOLS;
  const tools: ListedTools['tools'] = [];
  let cursor: string | undefined;
  for (let pages = 0; ;) {
    let page;
    try {
      page = await client.listTools(cursor ? { cursor } : undefined, { timeout });
    } catch (e) {
      await pool.discard(s, client);
      throw new McpUnavailableError(s.name, `listing its tools failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    pages++;
    if (tools.length + page.tools.length > maxTools) throw new McpToolListTooLongError(s.name, 'maxTools', maxTools);
    tools.push(...(page.tools as ListedTools['tools']));
    cursor = page.nextCursor;
    if (!cursor) break;
    if (pages >= maxPages) throw new McpToolListTooLongError(s.name, 'maxPages', maxPages);
  }
  const info = client.getServerVersion();
  return { ...(info ? { serverInfo: { name: info.name, version: info.version } } : {}), tools };
}
