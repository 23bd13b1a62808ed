import { z } from 'zod';

/**
 * How an agent lists an MCP server (docs/mcp.md): where it runs (a command over stdio, or a
 * streamable HTTP endpoint), which of its tools the agent gets and under which names, their
 * approval policy, a timeout per call, and what a run does when the server is down at its start.
 */
const approvalValue = z.enum(['always', 'never']);
/** `auto`: ask (`always`) unless the server marks the tool read-only (`annotations.readOnlyHint`). */
const approvalDefault = z.enum(['auto', 'always', 'never']);

export const mcpServerSchema = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, 'letters, digits, dashes, underscores (at most 32)'),
    stdio: z
      .strictObject({
        command: z.string().min(1),
        args: z.array(z.string()).optional(),
        env: z.record(z.string(), z.string()).optional(),
        cwd: z.string().optional(),
      })
      .optional(),
    http: z
      .strictObject({
        url: z.url({ protocol: /^https?$/ }),
        headers: z.record(z.string(), z.string()).optional(),
      })
      .optional(),
    tools: z
      .strictObject({
        /** Only these tools (the server's names); default all. */
        allow: z.array(z.string().min(1)).min(1).optional(),
        /** Put before each tool's name; default `<name>__`; '' for none. */
        prefix: z
          .string()
          .regex(/^[A-Za-z0-9_-]*$/, 'letters, digits, dashes, underscores')
          .optional(),
        /** Pages of tools/list read at most (a server whose cursor never ends); default 100. */
        maxPages: z.number().int().positive().max(10_000).optional(),
        /** Tools the server may offer at most (all pages, before `allow`); default 1,000. */
        maxTools: z.number().int().positive().max(100_000).optional(),
      })
      .optional(),
    /** A policy for every tool, or `{ default, tools: { <server's tool name>: policy } }`. Default `auto`. */
    approval: z
      .union([
        approvalDefault,
        z.strictObject({ default: approvalDefault.optional(), tools: z.record(z.string(), approvalValue).optional() }),
      ])
      .optional(),
    /** Per call (Keel's tool timeout: the call is aborted and the model sees a timeout). Default 60 s. */
    timeoutMs: z.number().int().positive().optional(),
    /** Connecting and listing the tools at a run's start. Default 10 s. */
    connectTimeoutMs: z.number().int().positive().optional(),
    /** A server down at a run's start: fail the run (`mcp_unavailable`), or run without its tools (recorded). */
    onUnavailable: z.enum(['fail', 'skip']).optional(),
  })
  .refine((s) => (s.stdio === undefined) !== (s.http === undefined), {
    message: 'an MCP server needs exactly one of stdio or http',
  });

export type McpServerConfig = z.infer<typeof mcpServerSchema>;

export const mcpServersSchema = z.array(mcpServerSchema).superRefine((list, ctx) => {
  const seen = new Set<string>();
  for (const [i, s] of list.entries()) {
    if (seen.has(s.name))
      ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `two MCP servers are named ${s.name}` });
    seen.add(s.name);
  }
});

export class McpConfigError extends Error {
  readonly kind = 'mcp_config';
  constructor(message: string) {
    super(message);
    this.name = 'McpConfigError';
  }
}

/** Validates one server's configuration (for `defineAgent({ mcpServers: [mcpServer({...})] })`). */
export function mcpServer(config: McpServerConfig): McpServerConfig {
  const parsed = mcpServerSchema.safeParse(config);
  if (!parsed.success)
    throw new McpConfigError(
      `MCP server ${String((config as { name?: unknown }).name)}: ${z.prettifyError(parsed.error)}`,
    );
  return parsed.data;
}

/** Validates an agent's list of servers. */
export function parseMcpServers(list: readonly unknown[], agent: string): McpServerConfig[] {
  const parsed = mcpServersSchema.safeParse(list);
  if (!parsed.success) throw new McpConfigError(`agent ${agent}: mcpServers: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_PAGES = 100;
export const DEFAULT_MAX_TOOLS = 1000;

/** The name a server's tool gets in Keel (and at the provider). */
export const prefixOf = (s: McpServerConfig): string => s.tools?.prefix ?? `${s.name}__`;

/** The approval of one of the server's tools: the configuration's, else `auto` (read-only tools need none). */
export function approvalOf(s: McpServerConfig, remoteName: string, readOnly: boolean): 'always' | 'never' {
  const a = s.approval;
  const policy = typeof a === 'string' ? a : (a?.tools?.[remoteName] ?? a?.default ?? 'auto');
  return policy === 'auto' ? (readOnly ? 'never' : 'always') : policy;
}

/** What identifies a connection: two agents listing the same server share one client. */
export const connectionKey = (s: McpServerConfig): string => JSON.stringify([s.name, s.stdio ?? null, s.http ?? null]);
