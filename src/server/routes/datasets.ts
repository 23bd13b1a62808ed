/**
 * Datasets over HTTP (issue 40, docs/evals.md): frozen copies of a tenant's ended runs, from a
 * list of runs or a filter, to evaluate candidates on (routes/experiments.ts).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { JsonValue } from '../../model/index.ts';
import type { FrozenRun, RunFilter } from '../../runs/index.ts';
import { RUN_STATUS_ORDER } from '../../runs/lifecycle/run-status.ts';
import type { DatasetItemRecord, DatasetRecord, RunStatus } from '../../store/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, IdParam, json, problems } from '../openapi.ts';
import { Cursor, cursorOf, JsonObjectSchema } from '../schemas.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export const RunFilterSchema = z
  .strictObject({
    agent: z.string().min(1).optional().describe('`name` or `name@version`'),
    status: z.array(z.enum(RUN_STATUS_ORDER as [RunStatus, ...RunStatus[]])).optional(),
    created_from: z.iso.datetime({ offset: true }).optional().describe('ISO 8601, inclusive'),
    created_to: z.iso.datetime({ offset: true }).optional().describe('ISO 8601, exclusive'),
    limit: z.number().int().min(1).max(10_000).optional(),
  })
  .openapi('RunFilter');

/** The filter as the runtime takes it. */
export function runFilter(f: z.infer<typeof RunFilterSchema>): RunFilter {
  return {
    ...(f.agent !== undefined ? { agent: f.agent } : {}),
    ...(f.status !== undefined ? { statuses: f.status } : {}),
    ...(f.created_from !== undefined ? { createdFrom: Date.parse(f.created_from) } : {}),
    ...(f.created_to !== undefined ? { createdTo: Date.parse(f.created_to) } : {}),
    ...(f.limit !== undefined ? { limit: f.limit } : {}),
  };
}

const DatasetBody = z
  .strictObject({
    name: z.string().min(1).max(200),
    runs: z
      .array(
        z.union([
          z.string().min(1),
          z.strictObject({
            run_id: z.string().min(1),
            expected: z.unknown().optional().describe('What a person expects (a text is compared by final_text)'),
            notes: z.string().max(10_000).optional(),
          }),
        ]),
      )
      .min(1)
      .max(5_000)
      .optional(),
    filter: RunFilterSchema.optional(),
  })
  .openapi('DatasetRequest');

export const DatasetSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    source: JsonObjectSchema.describe('The runs or the filter it was made from'),
    item_count: z.number().int(),
    created_at: z.string(),
  })
  .openapi('Dataset');

const DatasetItemSchema = z
  .object({
    id: z.string(),
    position: z.number().int(),
    source_session_id: z.string(),
    source_run_id: z.string(),
    agent: z.object({ name: z.string(), version: z.string() }),
    steps: z.number().int().describe('Recorded steps (each a request step replay sends again)'),
    trigger: z.string().nullable().describe('The text of the message that started the run'),
    reference: JsonObjectSchema.describe(
      'How the recorded run came out: status, final text, tool calls, usage, cost, latency',
    ),
    expected: z.unknown(),
    notes: z.string().nullable(),
    created_at: z.string(),
  })
  .openapi('DatasetItem');

export const datasetJson = (d: DatasetRecord) => ({
  id: d.id,
  name: d.name,
  source: d.source,
  item_count: d.itemCount,
  created_at: iso(d.createdAt)!,
});

function itemJson(i: DatasetItemRecord) {
  const f = i.data as unknown as FrozenRun;
  const text = f.trigger?.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('') ?? null;
  return {
    id: i.id,
    position: i.position,
    source_session_id: i.sourceSessionId,
    source_run_id: i.sourceRunId,
    agent: f.run.agent,
    steps: f.steps.length,
    trigger: text,
    reference: f.outcome as unknown as Record<string, unknown>,
    expected: i.expected as JsonValue,
    notes: i.notes,
    created_at: iso(i.createdAt)!,
  };
}

export function datasetRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/datasets',
      tags: ['evals'],
      summary:
        "A dataset from the tenant's ended runs (a list, or a filter): frozen copies of what they were asked and did",
      request: body(DatasetBody),
      responses: { 201: json(DatasetSchema, 'The dataset'), ...problems('run') },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const d = await rt.evals.datasets.create(
        {
          name: b.name,
          ...(b.runs
            ? {
                runs: b.runs.map((r) =>
                  typeof r === 'string'
                    ? r
                    : {
                        runId: r.run_id,
                        ...(r.expected !== undefined ? { expected: r.expected as JsonValue } : {}),
                        ...(r.notes !== undefined ? { notes: r.notes } : {}),
                      },
                ),
              }
            : {}),
          ...(b.filter ? { filter: runFilter(b.filter) } : {}),
        },
        { tenant: c.get('tenant') },
      );
      return c.json(datasetJson(d), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/datasets',
      tags: ['evals'],
      summary: "The tenant's datasets",
      request: { query: Cursor },
      responses: {
        200: json(z.object({ data: z.array(DatasetSchema), next_cursor: z.string().nullable() }), 'A page of datasets'),
        ...problems('dataset'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.evals.datasets.list({
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor ? { after: cursor } : {}),
      });
      const data = page.slice(0, q.limit);
      return c.json({ data: data.map(datasetJson), next_cursor: page.length > q.limit ? data.at(-1)!.id : null }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/datasets/{id}',
      tags: ['evals'],
      summary: 'Get a dataset',
      request: { params: IdParam },
      responses: { 200: json(DatasetSchema, 'The dataset'), ...problems('dataset') },
    }),
    async (c) =>
      c.json(datasetJson(await rt.evals.datasets.get(c.req.valid('param').id, { tenant: c.get('tenant') })), 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/datasets/{id}/items',
      tags: ['evals'],
      summary: "A dataset's items, in order",
      request: { params: IdParam, query: Cursor },
      responses: {
        200: json(
          z.object({ data: z.array(DatasetItemSchema), next_cursor: z.string().nullable() }),
          'A page of items',
        ),
        ...problems('dataset'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.evals.datasets.items(c.req.valid('param').id, {
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor !== undefined && /^\d+$/.test(cursor) ? { afterPosition: Number(cursor) } : {}),
      });
      const data = page.slice(0, q.limit);
      return c.json(
        { data: data.map(itemJson), next_cursor: page.length > q.limit ? String(data.at(-1)!.position) : null },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/datasets/{id}',
      tags: ['evals'],
      summary: 'Delete a dataset and its items (experiments run on it keep their results)',
      request: { params: IdParam },
      responses: { 204: { description: 'Deleted' }, ...problems('dataset') },
    }),
    async (c) => {
      await rt.evals.datasets.delete(c.req.valid('param').id, { tenant: c.get('tenant') });
      return c.body(null, 204);
    },
  );
}
