/**
 * The MCP server of one HTTP request to `/mcp` (routes.ts makes one per request: the endpoint
 * keeps no state): its tools (one per agent), its tasks (runs: run-tasks.ts) and its resources
 * (sessions, transcripts, runs: resources.ts), for the request's tenant.
 *
 * Built on the SDK's low-level `Server`, not `McpServer`: the tools are the runtime's agents, and
 * a call without a task must stream progress while a call with one returns its task at once
 * (`McpServer` polls a task-capable tool's task for a call without one, with no progress).
 */
import type { Context } from 'hono';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { AgentDefinition } from '../../../core/index.ts';
import type { RunRecord } from '../../../store/index.ts';
import { isTerminal } from '../../../runs/lifecycle/run-status.ts';
import type { WaitingCall } from '../../../runs/lifecycle/waiting.ts';
import type { AppContext, AppEnv } from '../../context.ts';
import { sessionFor } from '../../lookups.ts';
import { toProblem } from '../../problems.ts';
import type { ClientAbilities } from './client-session.ts';
import { elicitationRequest } from './elicitation.ts';
import { followRun } from './follow-run.ts';
import { listResources, readResource, RESOURCE_TEMPLATES } from './resources.ts';
import { callResult, outputSchema, taskOf } from './run-results.ts';
import { RunTasks } from './run-tasks.ts';

/**
 * What this process waits on of the elicitations it sent: by elicitation id, what to do when the
 * client's answer leaves the call open (routes.ts calls it, when the answer comes to this process).
 */
export type ElicitationWaiters = Map<string, () => void>;

export interface McpRequestScope {
  ctx: AppContext;
  /** The HTTP request: its tenant. */
  c: Context<AppEnv>;
  abilities: ClientAbilities;
  transport: WebStandardStreamableHTTPServerTransport;
  waiters: ElicitationWaiters;
  /** Shared by the requests' servers: each would make its own (most of the cost of making one). */
  validator: jsonSchemaValidator;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

const CallArguments = z.strictObject({
  message: z.string().min(1, 'message: a non-empty string'),
  session_id: z.string().min(1).optional(),
  version: z.string().min(1).optional(),
});

const INSTRUCTIONS =
  'Each tool is a Keel agent: send it a message, get its final answer. Give the session_id of a result to continue ' +
  'that conversation. A call is a durable Keel run (its run_id), also a task where the client asks for one. ' +
  'Sessions, transcripts and runs are resources (keel://sessions/{id}, keel://sessions/{id}/transcript, keel://runs/{id}).';

/** The agents as tools: one per name, its latest version unless the call names another. */
function toolsOf(agents: readonly AgentDefinition[]): Tool[] {
  const byName = new Map<string, string[]>();
  for (const a of agents) byName.set(a.name, [...(byName.get(a.name) ?? []), a.version]);
  return [...byName].map(([name, versions]) => ({
    name,
    title: `${name} (Keel agent)`,
    description:
      `The Keel agent ${name} (version ${versions.at(-1)!}). Send it a message; it answers with text. ` +
      'Give session_id (from an earlier result) to continue that conversation.',
    inputSchema: {
      type: 'object' as const,
      properties: {
        message: { type: 'string', minLength: 1, description: 'What to ask or tell the agent' },
        session_id: {
          type: 'string',
          description: 'Continue this Keel session (the session_id of an earlier result); default: a new session',
        },
        version: {
          type: 'string',
          enum: versions,
          description: `Which version of the agent runs (default: the latest, ${versions.at(-1)!})`,
        },
      },
      required: ['message'],
      additionalProperties: false,
    },
    outputSchema,
    execution: { taskSupport: 'optional' as const },
  }));
}

const toolError = (text: string): CallToolResult => ({ content: [{ type: 'text', text }], isError: true });

export function mcpServerFor(scope: McpRequestScope): Server {
  const { ctx, c, abilities, transport, waiters, validator } = scope;
  const { rt } = ctx;
  const tasks = new RunTasks(ctx, c);
  const server = new Server(
    { name: 'keel', version: ctx.options.version },
    {
      capabilities: {
        tools: {},
        resources: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      instructions: INSTRUCTIONS,
      taskStore: tasks,
      jsonSchemaValidator: validator,
    },
  );

  /** Unexpected failures are logged, as the rest of the server's are; the client gets an internal error. */
  const logged =
    <A extends unknown[], R>(what: string, f: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      try {
        return await f(...a);
      } catch (e) {
        if (!(e instanceof McpError) && toProblem(e).type === 'internal')
          ctx.logger.error({ path: '/mcp', method: what, err: e }, 'internal error');
        throw e;
      }
    };

  /**
   * How the run's approvals and questions are asked, where the client can answer: an elicitation
   * on the request's own stream. `left` is aborted when its answer leaves a call open.
   */
  const askerFor = (extra: Extra, left: AbortController, sent: string[], taskId?: string) => {
    if (!abilities.elicitation) return undefined;
    return async (run: RunRecord, call: WaitingCall): Promise<boolean> => {
      const request = elicitationRequest(run, call, taskId !== undefined ? { taskId } : {});
      if (!request) return false;
      const id = String(request.id);
      waiters.set(id, () => left.abort());
      sent.push(id);
      await transport.send(request, { relatedRequestId: extra.requestId });
      return true;
    };
  };

  /** Follows the run for the request, asking what it can; forgets its elicitations after. */
  const follow = async (
    extra: Extra,
    run: RunRecord,
    o: { taskId?: string; progress?: (m: string) => Promise<void> },
  ) => {
    const left = new AbortController();
    const sent: string[] = [];
    const ask = askerFor(extra, left, sent, o.taskId);
    try {
      return await followRun(ctx, run, {
        signal: extra.signal,
        left: left.signal,
        untilTerminal: o.taskId !== undefined,
        ...(ask ? { ask } : {}),
        ...(o.progress ? { progress: o.progress } : {}),
      });
    } finally {
      for (const id of sent) waiters.delete(id);
    }
  };

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolsOf(rt.listAgents()) }));

  server.setRequestHandler(
    CallToolRequestSchema,
    logged('tools/call', async (request, extra) => {
      const { name, arguments: raw, task } = request.params;
      const versions = rt.listAgents().filter((a) => a.name === name);
      if (versions.length === 0)
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name} (no Keel agent of that name)`);
      // A call with a task returns its task or a protocol error; a call without one, a tool result.
      const refuse = (text: string): CallToolResult => {
        if (task) throw new McpError(ErrorCode.InvalidParams, text);
        return toolError(text);
      };
      const parsed = CallArguments.safeParse(raw ?? {});
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        return refuse(`Input validation error: ${issue.path.join('.') || 'arguments'}: ${issue.message}`);
      }
      const args = parsed.data;
      if (args.version !== undefined && !versions.some((a) => a.version === args.version))
        return refuse(
          `Input validation error: version: ${name} has no version ${args.version} (it has ${versions.map((a) => a.version).join(', ')})`,
        );
      let run: RunRecord;
      try {
        const sessionId = args.session_id
          ? (await sessionFor(ctx, c, args.session_id)).id
          : (
              await rt.sessions.create({
                tenant: c.get('tenant'),
                title: args.message.slice(0, 60),
                agent: name,
                metadata: { via: 'mcp' },
              })
            ).id;
        run = (
          await rt.sessions.send(sessionId, args.message, {
            agent: args.version !== undefined ? `${name}@${args.version}` : name,
            ifBusy: 'reject',
          })
        ).run;
      } catch (e) {
        const p = toProblem(e);
        if (p.type === 'internal') throw e;
        return refuse(p.detail);
      }
      if (task) return { task: taskOf(run) };

      // A call without a task: the run, followed until it has an answer, its progress told.
      const token = request.params._meta?.progressToken;
      let n = 0;
      const progress =
        token === undefined
          ? undefined
          : (message: string) =>
              extra.sendNotification({
                method: 'notifications/progress',
                params: { progressToken: token, progress: ++n, message },
              });
      await progress?.(`run ${run.id} in session ${run.sessionId}`);
      const settled = await follow(extra, run, progress ? { progress } : {});
      return callResult(rt.sessions.log, settled);
    }),
  );

  // tasks/get, tasks/list and tasks/cancel are the SDK's, over the task store; tasks/result is
  // Keel's: it follows the run to its end, asking its approvals and questions where the client can answer.
  server.setRequestHandler(
    GetTaskPayloadRequestSchema,
    logged('tasks/result', async (request, extra) => {
      const { taskId } = request.params;
      const run = await tasks.find(taskId);
      if (!run) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${taskId}`);
      const ended = isTerminal(run.status) ? run : await follow(extra, run, { taskId });
      if (!isTerminal(ended.status))
        throw new McpError(ErrorCode.ConnectionClosed, `the request ended before task ${taskId}`);
      const result = await callResult(rt.sessions.log, ended);
      return { ...result, _meta: { ...result._meta, [RELATED_TASK_META_KEY]: { taskId } } };
    }),
  );

  server.setRequestHandler(
    ListResourcesRequestSchema,
    logged('resources/list', (request) => listResources(ctx, c, request.params?.cursor)),
  );
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: RESOURCE_TEMPLATES }));
  server.setRequestHandler(
    ReadResourceRequestSchema,
    logged('resources/read', (request) => readResource(ctx, c, request.params.uri)),
  );

  return server;
}
