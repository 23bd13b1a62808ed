/**
 * Keel as an MCP server (issue 41, ADR-0038; docs/protocols.md): `/mcp` over streamable HTTP, with
 * Keel's API keys (`Authorization: Bearer`) and tenants. Each agent is a tool, a call is a Keel run
 * (a task, where the client asks for one), sessions, transcripts and runs are resources
 * (mcp-server.ts).
 *
 * Stateless: every POST gets its own MCP server and transport, so any server process answers any
 * request, and nothing is lost in a restart. What the server remembers of the client's
 * `initialize` travels in the session id it hands out (client-session.ts). The client's answers
 * to Keel's elicitations are decided on their runs here, by whichever process receives them
 * (elicitation.ts). There is no standalone SSE stream (GET: 405) and no session to end (DELETE:
 * 405): the protocol lets a server offer neither.
 */
import type { Context, Hono } from 'hono';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  isInitializeRequest,
  isJSONRPCErrorResponse,
  isJSONRPCResultResponse,
  JSONRPCMessageSchema,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import type { Waiting } from '../../../runs/lifecycle/waiting.ts';
import { NotFoundError, StoreError } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { runFor } from '../../lookups.ts';
import { abilitiesOf, abilitiesOfSession, sessionIdFor } from './client-session.ts';
import { applyElicitationResponse, elicitationRef } from './elicitation.ts';
import { mcpServerFor, type ElicitationWaiters } from './mcp-server.ts';
import { TRANSPORT_ERROR } from './mcp-errors.ts';
import { waitsForPeople } from './run-results.ts';

const jsonRpcError = (status: number, message: string, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: TRANSPORT_ERROR, message } }), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });

export function mcpRoutes(app: Hono<AppEnv>, ctx: AppContext): void {
  const waiters: ElicitationWaiters = new Map();
  const validator = new AjvJsonSchemaValidator();

  // A browser page of another origin may not drive the endpoint (the protocol's DNS rebinding
  // rule): an Origin header must name the host the request was sent to.
  app.use('/mcp', async (c, next) => {
    const origin = c.req.header('origin');
    if (origin !== undefined) {
      let host: string | undefined;
      try {
        host = new URL(origin).host;
      } catch {
        host = undefined;
      }
      if (host !== c.req.header('host')) return jsonRpcError(403, `origin ${origin} may not use this endpoint`);
    }
    return next();
  });

  app.on(['GET', 'DELETE'], '/mcp', () =>
    jsonRpcError(
      405,
      'Keel serves MCP statelessly: no standalone SSE stream (GET) and no session to end (DELETE); POST requests',
      { allow: 'POST' },
    ),
  );

  /** A client's answer to one of Keel's elicitations: decided on its run, for the caller's tenant. */
  const answer = async (c: Context<AppEnv>, message: JSONRPCMessage) => {
    if (!isJSONRPCResultResponse(message) && !isJSONRPCErrorResponse(message)) return false;
    const ref = elicitationRef(message.id);
    if (!ref) return false;
    // The request that asked, if it waits in this process: told when the answer leaves the call open.
    const left = () => waiters.get(String(message.id))?.();
    let run;
    try {
      run = await runFor(ctx, c, ref.runId);
    } catch (e) {
      // Not the caller's run (or no longer there): an answer of nobody's.
      if (e instanceof NotFoundError || e instanceof StoreError) return true;
      throw e;
    }
    const w = run.waiting as unknown as Waiting | null;
    const call = w?.calls.find((x) => x.toolCallId === ref.toolCallId);
    // Decided meanwhile (or never this run's): nothing to do.
    if (!call || w?.decisions[call.toolCallId] || !waitsForPeople(run)) return true;
    try {
      if ((await applyElicitationResponse(ctx.rt, run, call, message)) === 'left') left();
    } catch (e) {
      left();
      if (!(e instanceof StoreError))
        ctx.logger.error({ path: '/mcp', err: e }, "applying an MCP client's elicitation answer failed");
    }
    return true;
  };

  app.post('/mcp', async (c) => {
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      return jsonRpcError(400, 'Parse error: the body is not JSON');
    }
    const messages = Array.isArray(body) ? body : [body];
    const parsed = messages.map((m) => JSONRPCMessageSchema.safeParse(m));
    if (parsed.some((p) => !p.success)) return jsonRpcError(400, 'Parse error: not a JSON-RPC message');
    // Answers to Keel's elicitations are Keel's; anything else is the MCP server's.
    const rest: JSONRPCMessage[] = [];
    for (const p of parsed) if (!(await answer(c, p.data!))) rest.push(p.data!);
    if (rest.length === 0) return new Response(null, { status: 202 });

    const init = rest.find((m) => isInitializeRequest(m));
    const abilities =
      init && isInitializeRequest(init)
        ? abilitiesOf(init.params.capabilities)
        : abilitiesOfSession(c.req.header('mcp-session-id'));
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const server = mcpServerFor({ ctx, c, abilities, transport, waiters, validator });
    await server.connect(transport);
    // A client that goes away ends the request's handlers (their runs go on); the server goes with it.
    c.req.raw.signal.addEventListener('abort', () => void server.close(), { once: true });
    const res = await transport.handleRequest(c.req.raw, { parsedBody: Array.isArray(body) ? rest : rest[0] });
    if (init && res.ok) res.headers.set('mcp-session-id', sessionIdFor(abilities));
    return res;
  });
}
