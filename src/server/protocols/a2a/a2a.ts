/**
 * A2A (issue 41, ADR-0038), protocol version 1.0 as `@a2a-js/sdk` 1.x speaks it, over JSON-RPC:
 *
 * - `GET /.well-known/agent-card.json`: the default agent's card; `GET /a2a/{agent}/.well-known/agent-card.json`
 *   each agent's (agent-card.ts). With keys required, the card takes the key too.
 * - `POST /a2a/{agent}`: the JSON-RPC methods (`SendMessage`, `SendStreamingMessage`, `GetTask`,
 *   `CancelTask`, `SubscribeToTask`, the push notification configs), parsed and serialized by the
 *   SDK's transport-agnostic `JsonRpcTransportHandler` over Keel's handler (task-handler.ts).
 *   Streams are SSE, one JSON-RPC response per event. Errors are JSON-RPC errors with A2A's codes;
 *   a request the HTTP layer refuses (no key, too large, too many) gets Keel's problem+json status.
 *
 * A task is a run, a context a session: both are ordinary Keel objects.
 */
import { AgentCard } from '@a2a-js/sdk';
import { VersionNotSupportedError, type A2AError } from '@a2a-js/sdk/errors';
import { JsonRpcTransportHandler, ServerCallContext } from '@a2a-js/sdk/server';
import type { Context, Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { StoreError } from '../../../store/index.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { HttpProblem } from '../../problems.ts';
import { toA2aError } from './a2a-errors.ts';
import { A2A_VERSION, agentCard } from './agent-card.ts';
import { KeelTaskHandler } from './task-handler.ts';

/** The method names of A2A 0.3, which this endpoint does not speak (it speaks 1.0's). */
const V0_3_METHODS = new Set([
  'message/send',
  'message/stream',
  'tasks/get',
  'tasks/cancel',
  'tasks/resubscribe',
  'tasks/pushNotificationConfig/set',
  'tasks/pushNotificationConfig/get',
  'tasks/pushNotificationConfig/list',
  'tasks/pushNotificationConfig/delete',
  'agent/getAuthenticatedExtendedCard',
]);

type JsonRpcId = string | number | null;

const isAsyncIterable = (x: unknown): x is AsyncIterable<unknown> =>
  typeof (x as { [Symbol.asyncIterator]?: unknown } | null)?.[Symbol.asyncIterator] === 'function';

export function a2aRoutes(app: Hono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  /** The agent a URL names (`name` or `name@version`); 404 for none. */
  const agentOf = (spec: string) => {
    try {
      return rt.agentFor(spec);
    } catch (e) {
      if (e instanceof StoreError && e.code === 'unknown_agent') throw new HttpProblem('not_found', e.message);
      throw e;
    }
  };
  const endpoint = (c: Context<AppEnv>, spec: string) => `${new URL(c.req.url).origin}/a2a/${encodeURIComponent(spec)}`;
  const card = (c: Context<AppEnv>, spec: string) =>
    c.json(AgentCard.toJSON(agentCard(agentOf(spec), endpoint(c, spec), ctx.options.auth)) as object, 200);

  app.get('/.well-known/agent-card.json', (c) => card(c, rt.defaultAgent.name));
  // Where the SDK looks for the card of `…/a2a/{agent}` without a trailing slash: the agent is not named.
  app.get('/a2a/.well-known/agent-card.json', () => {
    throw new HttpProblem(
      'not_found',
      "name the agent: /a2a/{agent}/.well-known/agent-card.json (the A2A SDK's ClientFactory.createFromUrl takes …/a2a/{agent}/, with a trailing slash)",
    );
  });
  app.get('/a2a/:agent/.well-known/agent-card.json', (c) => card(c, c.req.param('agent')));

  const rpc = async (c: Context<AppEnv>) => {
    const spec = c.req.param('agent')!;
    const agent = agentOf(spec);
    const body = await c.req.text();
    let id: JsonRpcId = null;
    let method: unknown;
    try {
      const parsed = JSON.parse(body) as { id?: unknown; method?: unknown } | null;
      if (typeof parsed?.id === 'string' || typeof parsed?.id === 'number') id = parsed.id;
      method = parsed?.method;
    } catch {
      // The transport handler answers with the protocol's parse error.
    }
    const refuse = (e: A2AError) =>
      c.json({ jsonrpc: '2.0', id, error: JsonRpcTransportHandler.mapToJSONRPCError(e) }, 200);
    const version = c.req.header('a2a-version')?.trim();
    if (version !== undefined && version !== '' && !/^1(\.\d+)?$/.test(version))
      return refuse(new VersionNotSupportedError(`A2A-Version ${version}: this endpoint speaks A2A ${A2A_VERSION}`));
    if (typeof method === 'string' && V0_3_METHODS.has(method))
      return refuse(
        new VersionNotSupportedError(
          `${method} is A2A 0.3: this endpoint speaks A2A ${A2A_VERSION} (SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, …)`,
        ),
      );

    // The client went: its stream stops and its wait ends (its task, a run, goes on).
    const gone = new AbortController();
    c.req.raw.signal?.addEventListener('abort', () => gone.abort(), { once: true });
    const handler = new KeelTaskHandler({
      ctx,
      c,
      agent,
      agentSpec: spec,
      url: endpoint(c, spec),
      signal: gone.signal,
    });
    const result = await new JsonRpcTransportHandler(handler).handle(
      body,
      new ServerCallContext({ requestedVersion: A2A_VERSION }),
    );
    if (!isAsyncIterable(result)) return c.json(result, 200);

    // A stream: its first event (or its refusal, answered as JSON) before the SSE response starts.
    const events = result[Symbol.asyncIterator]();
    let first: IteratorResult<unknown>;
    try {
      first = await events.next();
    } catch (e) {
      return refuse(toA2aError(e, ctx.logger));
    }
    return streamSSE(c, async (stream) => {
      stream.onAbort(() => gone.abort());
      let writing = 0;
      const write = async (data: string, event?: string) => {
        writing++;
        try {
          await stream.writeSSE({ data, ...(event ? { event } : {}) });
        } finally {
          writing--;
        }
      };
      // An idle stream (a task waiting on a long tool) is kept open through proxies.
      const heartbeat = setInterval(() => {
        if (writing === 0 && !gone.signal.aborted) void stream.write(': keep-alive\n\n').catch(() => {});
      }, ctx.options.heartbeatMs);
      try {
        for (let r = first; !r.done; r = await events.next()) {
          if (gone.signal.aborted) break;
          await write(JSON.stringify(r.value));
        }
      } catch (e) {
        if (!gone.signal.aborted) {
          const error = JsonRpcTransportHandler.mapToJSONRPCError(toA2aError(e, ctx.logger));
          await write(JSON.stringify({ jsonrpc: '2.0', id, error }), 'error');
        }
      } finally {
        clearInterval(heartbeat);
        gone.abort();
        await events.return?.(undefined).catch(() => {});
      }
    });
  };
  app.post('/a2a/:agent', rpc);
  app.post('/a2a/:agent/', rpc);
}
