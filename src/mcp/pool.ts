import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { connectionKey, DEFAULT_CONNECT_TIMEOUT_MS, type McpServerConfig } from './config.ts';

/** A server could not be reached (connecting, or listing its tools). */
export class McpUnavailableError extends Error {
  readonly kind = 'mcp_unavailable';
  readonly server: string;
  constructor(server: string, why: string) {
    super(`MCP server ${server} is unavailable: ${why}`);
    this.name = 'McpUnavailableError';
    this.server = server;
  }
}

const reasonOf = (e: unknown): string => (e instanceof Error ? e.message : String(e)) || 'unknown error';

interface Entry {
  key: string;
  connecting: Promise<Client>;
  client?: Client;
}

/**
 * One MCP client per server (per runtime): connected at first use, shared by every run that uses
 * the server, dropped when its connection closes or fails (the next use connects again), and
 * closed with the runtime.
 */
export class McpPool {
  private readonly entries = new Map<string, Entry>();
  /** Bumped by close(): a connection made for an older generation is closed at once. */
  private generation = 0;

  /** The connected client of `server`; throws McpUnavailableError when it cannot connect. */
  client(server: McpServerConfig): Promise<Client> {
    const key = connectionKey(server);
    const existing = this.entries.get(key);
    if (existing) return existing.connecting;
    const entry: Entry = { key, connecting: Promise.resolve(undefined as unknown as Client) };
    entry.connecting = this.connect(server, entry);
    this.entries.set(key, entry);
    return entry.connecting;
  }

  /** Whether a client of `server` is connected now (for tests and diagnostics). */
  connected(server: McpServerConfig): boolean {
    return this.entries.get(connectionKey(server))?.client !== undefined;
  }

  private async connect(server: McpServerConfig, entry: Entry): Promise<Client> {
    const generation = this.generation;
    const client = new Client({ name: 'keel', version: '1' });
    const transport = transportOf(server);
    const drop = () => {
      if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    };
    client.onclose = drop;
    try {
      await client.connect(transport, { timeout: server.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS });
    } catch (e) {
      drop();
      await client.close().catch(() => {});
      throw new McpUnavailableError(server.name, reasonOf(e));
    }
    if (generation !== this.generation) {
      await client.close().catch(() => {});
      throw new McpUnavailableError(server.name, 'the runtime is closed');
    }
    entry.client = client;
    return client;
  }

  /** Forgets a client that failed (a transport error): the next use connects again. */
  async discard(server: McpServerConfig, client: Client): Promise<void> {
    const entry = this.entries.get(connectionKey(server));
    if (entry?.client === client) this.entries.delete(entry.key);
    await client.close().catch(() => {});
  }

  /** Closes every client (the stdio servers' processes end). */
  async close(): Promise<void> {
    this.generation++;
    const entries = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(entries.map(async (e) => (await e.connecting.catch(() => undefined))?.close().catch(() => {})));
  }
}

function transportOf(server: McpServerConfig): Transport {
  if (server.stdio) {
    const { command, args, env, cwd } = server.stdio;
    return new StdioClientTransport({
      command,
      ...(args ? { args } : {}),
      ...(env ? { env } : {}),
      ...(cwd ? { cwd } : {}),
      stderr: 'inherit',
    });
  }
  const http = server.http!;
  return new StreamableHTTPClientTransport(new URL(http.url), {
    ...(http.headers ? { requestInit: { headers: http.headers } } : {}),
    // A broken stream fails the call at once; the next call connects again (no silent retries).
    reconnectionOptions: {
      maxRetries: 0,
      initialReconnectionDelay: 100,
      maxReconnectionDelay: 100,
      reconnectionDelayGrowFactor: 1,
    },
  });
}
