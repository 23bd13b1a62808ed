/**
 * Errors under `/mcp` that happen before the MCP server sees the request (no API key, too many
 * requests, a body too large) as a JSON-RPC error, the shape an MCP client reads, with the HTTP
 * status of the problem Keel's own API would answer (problems.ts) and its type in `data`. The MCP
 * SDK's client raises them with the status and the body. Errors of a request the MCP server
 * handled are its own: JSON-RPC errors, or tool results with `isError` (mcp-server.ts).
 */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { PROBLEM_BASE, PROBLEMS, type ProblemType } from '../../problems.ts';

/** Whether a request is for the MCP endpoint (its errors take the JSON-RPC shape). */
export const isMcpPath = (path: string): boolean => path === '/mcp';

/** The JSON-RPC code the MCP SDK's own HTTP transport answers transport-level errors with. */
export const TRANSPORT_ERROR = -32000;

/** The problem as a JSON-RPC error response (id null: no request was read). */
export function mcpErrorResponse(
  c: Context,
  type: ProblemType,
  detail: string,
  extensions: Record<string, unknown> = {},
): Response {
  const status = PROBLEMS[type].status;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  // RFC 6750: a 401 names the scheme it wants.
  if (status === 401) headers['www-authenticate'] = 'Bearer realm="keel"';
  return c.body(
    JSON.stringify({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: TRANSPORT_ERROR,
        message: detail,
        data: { type: `${PROBLEM_BASE}${type}`, status, ...extensions },
      },
    }),
    status as ContentfulStatusCode,
    headers,
  );
}
