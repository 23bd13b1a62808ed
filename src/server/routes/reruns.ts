/**
 * Reruns over HTTP (issue 40, docs/evals.md): `POST /v1/runs/{id}/rerun` forks a run of the
 * caller's tenant at a step onto another agent version or with overrides, tools by policy; `GET
 * /v1/runs` lists the tenant's runs by lineage (`rerun_of`), agent, status and creation time.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { JsonValue } from '../../model/index.ts';
import type { AgentOverrides, RerunRequest, ToolPolicies, ToolPolicy } from '../../runs/index.ts';
import { RUN_STATUS_ORDER } from '../../runs/lifecycle/run-status.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { runFor, runJsonFor, runsPage } from '../lookups.ts';
import { body, IdParam, json, problem, problems } from '../openapi.ts';
import { HttpProblem } from '../problems.ts';
import { ContentSchema, Cursor, cursorOf, JsonObjectSchema, RunSchema, toUserInput } from '../schemas.ts';
import type { BatchRecord } from '../../store/index.ts';
import { runFilter, RunFilterSchema } from './datasets.ts';

const ToolMode = z.enum(['reuse', 'execute']);
const ToolPolicySchema = z.union([
  ToolMode,
  z.strictObject({
    mode: z.literal('reuse'),
    on_mismatch: z
      .enum(['execute', 'fail', 'serve'])
      .optional()
      .describe(
        'A call with no recorded result of the same arguments: run it, fail the rerun, or serve a recorded one',
      ),
  }),
  z.strictObject({ mode: z.literal('execute') }),
  z.strictObject({ mode: z.literal('mock'), value: z.unknown().describe('The result every call of the tool gets') }),
]);

const SettingsSchema = z.strictObject({
  maxOutputTokens: z.number().int().positive().optional(),
  temperature: z.number().optional(),
  topP: z.number().optional(),
  topK: z.number().optional(),
  stopSequences: z.array(z.string()).optional(),
  seed: z.number().int().optional(),
  reasoning: z.enum(['provider-default', 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']).optional(),
});

export const OverridesSchema = z
  .strictObject({
    system: z.string().optional(),
    model: z.string().min(3).optional().describe('A model id, e.g. openai:gpt-4.1-mini'),
    settings: SettingsSchema.optional(),
    tools: z.array(z.string()).optional().describe("Only these of the agent's tools"),
    max_steps: z.number().int().min(1).optional(),
  })
  .openapi('AgentOverrides');

export const ToolPoliciesSchema = z
  .union([
    ToolMode,
    z.strictObject({ default: ToolMode.optional(), by_tool: z.record(z.string(), ToolPolicySchema).optional() }),
  ])
  .openapi('ToolPolicies');

/** Overrides as the runtime takes them. */
export function overridesOf(o: z.infer<typeof OverridesSchema>): AgentOverrides {
  return {
    ...(o.system !== undefined ? { system: o.system } : {}),
    ...(o.model !== undefined ? { model: o.model } : {}),
    ...(o.settings !== undefined ? { settings: o.settings } : {}),
    ...(o.tools !== undefined ? { tools: o.tools } : {}),
    ...(o.max_steps !== undefined ? { maxSteps: o.max_steps } : {}),
  };
}

export const RerunBody = z
  .strictObject({
    from: z.number().int().min(1).optional().describe("The source run's step to rerun from; default its first"),
    agent: z
      .string()
      .min(1)
      .optional()
      .describe("`name@version` (or `name`: its latest) of a registered agent; default the source run's"),
    overrides: OverridesSchema.optional(),
    message: ContentSchema.optional().describe(
      'Replaces the message that started the source run (from its first step)',
    ),
    tools: ToolPoliciesSchema.optional().describe(
      'Default: read-only tools execute, the others reuse the recorded result; an effectful call without one fails the rerun',
    ),
    title: z.string().max(500).optional(),
  })
  .openapi('RerunRequest');

/** The request as the runtime takes it. */
export function rerunRequest(b: z.infer<typeof RerunBody>): RerunRequest {
  return {
    ...(b.from !== undefined ? { from: b.from } : {}),
    ...(b.agent !== undefined ? { agent: b.agent } : {}),
    ...(b.overrides ? { overrides: overridesOf(b.overrides) } : {}),
    ...(b.message !== undefined ? { message: toUserInput(b.message) } : {}),
    ...(b.tools !== undefined ? { tools: toolPolicies(b.tools) } : {}),
    ...(b.title !== undefined ? { title: b.title } : {}),
  };
}

export function toolPolicies(t: z.infer<typeof ToolPoliciesSchema>): NonNullable<RerunRequest['tools']> {
  if (typeof t === 'string') return t;
  const policies: ToolPolicies = {};
  if (t.default) policies.default = t.default;
  if (t.by_tool) {
    policies.tools = Object.fromEntries(
      Object.entries(t.by_tool).map(([name, p]): [string, ToolPolicy] => {
        if (typeof p === 'string') return [name, { mode: p }];
        if (p.mode === 'reuse')
          return [name, { mode: 'reuse', ...(p.on_mismatch ? { onMismatch: p.on_mismatch } : {}) }];
        if (p.mode === 'mock') return [name, { mode: 'mock', value: (p.value ?? null) as JsonValue }];
        return [name, { mode: 'execute' }];
      }),
    );
  }
  return policies;
}

const RunListQuery = Cursor.extend({
  rerun_of: z.string().optional().describe('Only the reruns of this run'),
  agent: z.string().optional().describe('`name` or `name@version`'),
  status: z
    .string()
    .optional()
    .describe(`Comma-separated statuses (${RUN_STATUS_ORDER.join(', ')})`),
  created_from: z.iso.datetime({ offset: true }).optional().describe('ISO 8601, inclusive'),
  created_to: z.iso.datetime({ offset: true }).optional().describe('ISO 8601, exclusive'),
});

/** The statuses of a `status=a,b` query; 400 for an unknown one. */
export function statusesOf(q: string | undefined): (typeof RUN_STATUS_ORDER)[number][] | undefined {
  if (q === undefined) return undefined;
  const known = new Set<string>(RUN_STATUS_ORDER);
  const list = q.split(',').map((s) => s.trim());
  const unknown = list.filter((s) => !known.has(s));
  if (unknown.length > 0)
    throw new HttpProblem('validation', `unknown status ${unknown.join(', ')} (known: ${RUN_STATUS_ORDER.join(', ')})`);
  return list as (typeof RUN_STATUS_ORDER)[number][];
}

export function rerunRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/runs/{id}/rerun',
      tags: ['runs'],
      summary: 'Rerun a run from one of its steps, in a new session forked there (the original is untouched)',
      request: { params: IdParam, ...body(RerunBody) },
      responses: {
        201: json(RunSchema, 'The rerun, queued; its session is a fork of the source at the step'),
        ...problems('run'),
        422: problem('The rerun cannot be made (no such step, agent, tool or model)'),
      },
    }),
    async (c) => {
      const source = await runFor(ctx, c, c.req.valid('param').id);
      const run = await rt.runs.rerun(source.id, rerunRequest(c.req.valid('json')));
      return c.json(await runJsonFor(ctx, run), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/runs',
      tags: ['runs'],
      summary: "The tenant's runs, oldest first: by lineage (rerun_of), agent, status, creation time",
      request: { query: RunListQuery },
      responses: {
        200: json(z.object({ data: z.array(RunSchema), next_cursor: z.string().nullable() }), 'A page of runs'),
        ...problems('run'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const [agentName, agentVersion] = q.agent?.split('@') ?? [];
      const statuses = statusesOf(q.status);
      const page = await rt.runs.list({
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor ? { after: cursor } : {}),
        ...(q.rerun_of !== undefined ? { rerunOf: q.rerun_of } : {}),
        ...(agentName ? { agentName } : {}),
        ...(agentVersion ? { agentVersion } : {}),
        ...(statuses ? { statuses } : {}),
        ...(q.created_from !== undefined ? { createdFrom: Date.parse(q.created_from) } : {}),
        ...(q.created_to !== undefined ? { createdTo: Date.parse(q.created_to) } : {}),
      });
      return c.json(await runsPage(ctx, page, q.limit), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/reruns',
      tags: ['runs'],
      summary: 'Rerun every run a filter matches, the same way, as one tracked batch with a concurrency limit',
      request: body(BulkRerunBody),
      responses: { 201: json(RerunBatchSchema, 'The batch, running'), ...problems('run') },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const { message: _m, ...rerun } = rerunRequest(b.rerun ?? {});
      const batch = await rt.evals.reruns.create(
        { filter: runFilter(b.filter), rerun, ...(b.concurrency !== undefined ? { concurrency: b.concurrency } : {}) },
        { tenant: c.get('tenant') },
      );
      return c.json(await rerunBatchJson(ctx, batch), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/reruns/{id}',
      tags: ['runs'],
      summary: 'A bulk rerun and how far it is',
      request: { params: IdParam },
      responses: { 200: json(RerunBatchSchema, 'The batch'), ...problems('rerun batch') },
    }),
    async (c) =>
      c.json(
        await rerunBatchJson(ctx, await rt.evals.reruns.get(c.req.valid('param').id, { tenant: c.get('tenant') })),
        200,
      ),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/reruns/{id}/items',
      tags: ['runs'],
      summary: "A bulk rerun's items: each source run, its rerun and how it ended",
      request: { params: IdParam, query: Cursor },
      responses: {
        200: json(
          z.object({
            data: z.array(
              z.object({
                id: z.string(),
                position: z.number().int(),
                source_run_id: z.string(),
                run_id: z.string().nullable(),
                status: z.enum(['pending', 'running', 'done', 'failed']),
                run_status: z.string().nullable(),
                error: JsonObjectSchema.nullable(),
              }),
            ),
            next_cursor: z.string().nullable(),
          }),
          'A page of items',
        ),
        ...problems('rerun batch'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.evals.reruns.items(c.req.valid('param').id, {
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor !== undefined && /^\d+$/.test(cursor) ? { afterPosition: Number(cursor) } : {}),
      });
      const data = page.slice(0, q.limit).map((i) => ({
        id: i.id,
        position: i.position,
        source_run_id: (i.subject as { runId: string }).runId,
        run_id: i.runId,
        status: i.status,
        run_status: (i.result?.status as string | undefined) ?? null,
        error: i.error,
      }));
      return c.json({ data, next_cursor: page.length > q.limit ? String(data.at(-1)!.position) : null }, 200);
    },
  );
}

const BulkRerunBody = z
  .strictObject({
    filter: RunFilterSchema,
    rerun: RerunBody.omit({ message: true, title: true }).optional().describe('How each run is rerun'),
    concurrency: z.number().int().min(1).max(256).optional().describe('Reruns at once (default 4)'),
  })
  .openapi('BulkRerunRequest');

const RerunBatchSchema = z
  .object({
    id: z.string(),
    status: z.enum(['running', 'completed', 'cancelled']),
    filter: JsonObjectSchema,
    rerun: JsonObjectSchema,
    concurrency: z.number().int(),
    counts: z.object({ pending: z.number(), running: z.number(), done: z.number(), failed: z.number() }),
    created_at: z.string(),
    ended_at: z.string().nullable(),
  })
  .openapi('RerunBatch');

async function rerunBatchJson(ctx: AppContext, b: BatchRecord) {
  const spec = b.spec as { filter: Record<string, unknown>; rerun: Record<string, unknown> };
  return {
    id: b.id,
    status: b.status,
    filter: spec.filter,
    rerun: spec.rerun,
    concurrency: b.concurrency,
    counts: await ctx.rt.evals.counts(b),
    created_at: new Date(b.createdAt).toISOString(),
    ended_at: b.endedAt === null ? null : new Date(b.endedAt).toISOString(),
  };
}
