import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';

import type { JsonValue } from '../../model/index.ts';
import { type RunRecord } from '../../store/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, IdParam, json, pathParam, problem, problems as problemsOf } from '../openapi.ts';
import { HttpProblem } from '../problems.ts';
import {
  ApprovalBody,
  InputBody,
  JsonObjectSchema,
  RunSchema,
  SteerBody,
  ToolResultsBody,
  toUserInput,
} from '../schemas.ts';
import { recordedMessage, runFor, runJsonFor } from '../lookups.ts';

const problems = {
  ...problemsOf('run'),
  409: problem('Not possible in the run’s current state'),
} as const;

export function runRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;
  const action = (path: string, summary: string, act: (id: string) => Promise<RunRecord>) =>
    app.openapi(
      createRoute({
        method: 'post',
        path: `/v1/runs/{id}/${path}`,
        tags: ['runs'],
        summary,
        request: { params: IdParam },
        responses: { 200: json(RunSchema, 'The run after the request'), ...problems },
      }),
      async (c) => {
        const run = await runFor(ctx, c, c.req.valid('param').id);
        return c.json(await runJsonFor(ctx, await act(run.id)), 200);
      },
    );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/runs/{id}',
      tags: ['runs'],
      summary: 'Get a run',
      request: { params: IdParam },
      responses: { 200: json(RunSchema, 'The run'), ...problems },
    }),
    async (c) => c.json(await runJsonFor(ctx, await runFor(ctx, c, c.req.valid('param').id)), 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/runs/{id}/steps',
      tags: ['runs'],
      summary: "The run's steps: requests, model decisions, tool calls and results, usage, timing",
      request: { params: IdParam },
      responses: { 200: json(z.object({ data: z.array(JsonObjectSchema) }), 'Steps'), ...problems },
    }),
    async (c) => {
      const run = await runFor(ctx, c, c.req.valid('param').id);
      const view = await rt.sessions.developerView(run.sessionId);
      const steps = view.turns.filter((t) => t.turn === run.turn).flatMap((t) => t.steps);
      // Headers name the system prompt and tool schemas by content hash: show them resolved.
      const content = await rt.sessions.content(steps.flatMap((s) => s.requests.flatMap((r) => [r.system, r.tools])));
      const data = steps.map((s) => ({
        ...s,
        requests: s.requests.map((r) => ({
          ...r,
          systemHash: r.system,
          toolsHash: r.tools,
          system: r.system === null ? null : (content.get(r.system) ?? null),
          tools: r.tools === null ? [] : (content.get(r.tools) ?? null),
        })),
      }));
      return c.json({ data: data as unknown as Record<string, unknown>[] }, 200);
    },
  );

  action('cancel', 'Cancel (in any non-terminal state; idempotent)', (id) =>
    rt.runs.cancel(id, { graceMs: ctx.options.cancelGraceMs }),
  );
  action('pause', 'Pause at the next step boundary', (id) => rt.runs.pause(id));
  action('resume', 'Resume a paused run', (id) => rt.runs.resume(id));

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/runs/{id}/steer',
      tags: ['runs'],
      summary: "Send input into the run's next step",
      request: { params: IdParam, ...body(SteerBody) },
      responses: {
        202: json(z.object({ message: z.object({ id: z.string() }), run: RunSchema }), 'Accepted'),
        ...problems,
      },
    }),
    async (c) => {
      const run = await runFor(ctx, c, c.req.valid('param').id);
      const recorded = await recordedMessage(ctx, c);
      if (recorded) return c.json({ message: recorded.message, run: recorded.run }, 202);
      const idempotency = c.get('idempotency');
      const r = await rt.runs.steer(
        run.id,
        toUserInput(c.req.valid('json').content),
        idempotency ? { idempotency } : {},
      );
      return c.json({ message: { id: r.message.id }, run: await runJsonFor(ctx, r.run) }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/runs/{id}/tool-results',
      tags: ['runs'],
      summary:
        "Deliver the outputs of the run's client tool calls (declared with `client_tools`): each ends its call's wait, exactly once; the run goes on when every pending call has one",
      request: { params: IdParam, ...body(ToolResultsBody) },
      responses: {
        200: json(RunSchema, 'The run'),
        ...problems,
        404: problem('No such run (or not yours), or it made no such client tool call (unknown_tool_call)'),
        409: problem('An output for the call was already delivered (already_delivered), or the run has ended'),
      },
    }),
    async (c) => {
      const run = await runFor(ctx, c, c.req.valid('param').id);
      const results = c.req.valid('json').results.map((r) => ({
        callId: r.tool_call_id,
        output: r.output as JsonValue,
        ...(r.is_error !== undefined ? { isError: r.is_error } : {}),
      }));
      return c.json(await runJsonFor(ctx, await rt.runs.submitToolResults(run.id, results, { source: 'api' })), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/runs/{id}/input',
      tags: ['runs'],
      summary: "Answer the run's ask_user question; the run resumes",
      request: { params: IdParam, ...body(InputBody) },
      responses: { 200: json(RunSchema, 'The run'), ...problems },
    }),
    async (c) => {
      const run = await runFor(ctx, c, c.req.valid('param').id);
      const b = c.req.valid('json');
      return c.json(
        await runJsonFor(
          ctx,
          await rt.runs.input(run.id, b.answers as JsonValue, b.tool_call_id ? { toolCallId: b.tool_call_id } : {}),
        ),
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/runs/{id}/approvals/{approval_id}',
      tags: ['runs'],
      summary: 'Approve (optionally with edited arguments) or deny a pending tool call',
      request: {
        params: IdParam.extend({ approval_id: pathParam('approval_id') }),
        ...body(ApprovalBody),
      },
      responses: { 200: json(RunSchema, 'The run'), ...problems },
    }),
    async (c) => {
      const { id, approval_id } = c.req.valid('param');
      const run = await runFor(ctx, c, id);
      const b = c.req.valid('json');
      if (b.decision === 'deny' && b.arguments !== undefined)
        throw new HttpProblem('validation', 'arguments: only an approval takes edited arguments');
      const after =
        b.decision === 'approve'
          ? await rt.runs.approve(
              run.id,
              approval_id,
              b.arguments !== undefined ? { input: b.arguments as JsonValue } : {},
            )
          : await rt.runs.deny(run.id, approval_id, b.reason !== undefined ? { reason: b.reason } : {});
      return c.json(await runJsonFor(ctx, after), 200);
    },
  );
}
