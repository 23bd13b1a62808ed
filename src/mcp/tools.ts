import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { tool, type Tool } from '../core/index.ts';
import type { JsonValue } from '../model/index.ts';
import type { McpServerConfig } from './config.ts';
import type { McpPool } from './pool.ts';
import type { RecordedTool } from './record.ts';

/**
 * A recorded MCP tool as a Keel tool: the model sees the server's description and JSON schema
 * (as recorded); the arguments go to the server as given (the server validates them); the call
 * is the server's `tools/call`, with the call's abort signal (a cancelled turn or a timeout
 * cancels the server's request). An `isError` result becomes an error result the model sees
 * (`execution_error` with the server's text); so does a transport failure, after which the
 * client is dropped and the next call connects again.
 */
export function mcpTool(pool: McpPool, server: McpServerConfig | undefined, serverName: string, t: RecordedTool): Tool {
  const base = tool({
    name: t.name,
    description: t.description,
    input: z.looseObject({}),
    approval: t.approval,
    // ADR-0018: what the server says of the tool (read-only, idempotent), else an effect.
    effect: t.annotations?.readOnlyHint === true ? 'read-only' : t.idempotent ? 'idempotent' : 'effectful',
    timeoutMs: t.timeoutMs,
    execute: async (input, ctx) => {
      if (!server) throw new Error(`MCP server ${serverName} is no longer configured for this agent`);
      const client = await pool.client(server);
      let result: CallToolResult;
      try {
        // Keel's own timeout (timeoutMs) aborts the call first; the SDK's is a backstop.
        result = (await client.callTool(
          { name: t.remoteName, arguments: input as Record<string, unknown> },
          undefined,
          { signal: ctx.signal, timeout: t.timeoutMs + 5_000 },
        )) as CallToolResult;
      } catch (e) {
        if (ctx.signal.aborted) throw e;
        const message = e instanceof Error ? e.message : String(e);
        // The connection may be broken: the next call connects again.
        if (!/^MCP error -32602|^MCP error -32601/.test(message)) await pool.discard(server, client);
        throw new Error(`MCP server ${serverName}: ${message}`, { cause: e });
      }
      if (result.isError) throw new Error(textOf(result) || `MCP tool ${t.remoteName} failed`);
      return outputOf(result);
    },
  });
  return { ...base, schema: { name: t.name, description: t.description, inputSchema: t.inputSchema } };
}

function textOf(r: CallToolResult): string {
  return r.content
    .filter((c): c is Extract<CallToolResult['content'][number], { type: 'text' }> => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/** Structured content when the server gives it; else the text; else the content items as JSON. */
function outputOf(r: CallToolResult): unknown {
  if (r.structuredContent !== undefined) return r.structuredContent as JsonValue;
  if (r.content.every((c) => c.type === 'text')) return textOf(r);
  return r.content;
}
