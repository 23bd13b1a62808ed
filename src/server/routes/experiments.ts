/**
 * Experiments over HTTP (issue 40, docs/evals.md): a dataset against candidates and a baseline,
 * by step replay or full reruns; results per candidate with the regressions first; late scores.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { BatchItemRecord, BatchRecord } from '../../store/index.ts';
import type { CandidateInput, ExperimentResults, ExperimentSpec } from '../../runs/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, json, pathParam, problems } from '../openapi.ts';
import { Cursor, cursorOf, JsonObjectSchema } from '../schemas.ts';
import { OverridesSchema, overridesOf, ToolPoliciesSchema, toolPolicies } from './reruns.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const CandidateSchema = z.union([
  z.string().min(1).describe('`name@version` of a registered agent'),
  z.strictObject({
    agent: z.string().min(1),
    label: z.string().min(1).max(100).optional().describe('Its name in the results (default `agent`)'),
    overrides: OverridesSchema.optional(),
  }),
]);

const ExperimentBody = z
  .strictObject({
    dataset: z.string().min(1),
    name: z.string().min(1).max(200).optional(),
    mode: z.enum(['step_replay', 'rerun']).optional().describe('Default step_replay'),
    candidates: z.array(CandidateSchema).min(1).max(10),
    baseline: z
      .union([z.literal('recorded'), CandidateSchema])
      .optional()
      .describe('`recorded` (default): the recorded runs; or a candidate'),
    scorers: z.array(z.string().min(1)).optional().describe('Default: every built-in and configured scorer'),
    tools: ToolPoliciesSchema.optional().describe('Tool policies of full reruns'),
    concurrency: z.number().int().min(1).max(256).optional(),
  })
  .openapi('ExperimentRequest');

const ExperimentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    status: z.enum(['running', 'completed', 'cancelled']),
    mode: z.enum(['step_replay', 'rerun']),
    dataset_id: z.string(),
    candidates: z.array(JsonObjectSchema),
    baseline: z.string().describe('`recorded` or the baseline candidate’s label'),
    scorers: z.array(z.string()),
    concurrency: z.number().int(),
    counts: z.object({ pending: z.number(), running: z.number(), done: z.number(), failed: z.number() }),
    created_at: z.string(),
    ended_at: z.string().nullable(),
  })
  .openapi('Experiment');

const ResultsSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    status: z.string(),
    mode: z.string(),
    dataset_id: z.string(),
    baseline: z.string(),
    counts: z.record(z.string(), z.number()),
    candidates: z.array(
      z.object({
        label: z.string(),
        agent: z.string(),
        items: z.number(),
        done: z.number(),
        failed: z.number(),
        scores: z
          .record(z.string(), z.number())
          .describe('Mean of each score over the items done; `score` is the overall one'),
        metrics: z.record(z.string(), z.number()).describe('Mean tokens, cost and latency_ms'),
        vs_baseline: z.number().nullable().describe('Mean score minus the baseline’s, over the same items'),
        regressions: z.array(
          z.object({
            dataset_item_id: z.string(),
            source_run_id: z.string(),
            score: z.number(),
            baseline: z.number(),
            diff: z.number(),
          }),
        ),
      }),
    ),
    created_at: z.string(),
    ended_at: z.string().nullable(),
  })
  .openapi('ExperimentResults');

const ExperimentItemSchema = z
  .object({
    id: z.string(),
    position: z.number().int(),
    dataset_item_id: z.string(),
    source_run_id: z.string().describe('The recorded run the dataset item froze'),
    candidate: z.string(),
    status: z.enum(['pending', 'running', 'done', 'failed']),
    run_id: z.string().nullable().describe('A full rerun: the run'),
    attempt: z.number().int(),
    scores: z.record(z.string(), z.unknown()),
    result: JsonObjectSchema.nullable().describe('Outcome, reference, metrics; per step for step replay'),
    error: JsonObjectSchema.nullable(),
    started_at: z.string().nullable(),
    ended_at: z.string().nullable(),
  })
  .openapi('ExperimentItem');

async function experimentJson(ctx: AppContext, b: BatchRecord) {
  const spec = b.spec as unknown as ExperimentSpec;
  return {
    id: b.id,
    name: spec.name,
    status: b.status,
    mode: spec.mode,
    dataset_id: spec.datasetId,
    candidates: spec.candidates as unknown as Record<string, unknown>[],
    baseline: spec.baseline === 'recorded' ? 'recorded' : spec.baseline.label,
    scorers: spec.scorers,
    concurrency: b.concurrency,
    counts: await ctx.rt.evals.counts(b),
    created_at: iso(b.createdAt)!,
    ended_at: iso(b.endedAt),
  };
}

export function resultsJson(r: ExperimentResults) {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    mode: r.mode,
    dataset_id: r.datasetId,
    baseline: r.baseline,
    counts: r.counts,
    candidates: r.candidates.map((c) => ({
      label: c.label,
      agent: c.agent,
      items: c.items,
      done: c.done,
      failed: c.failed,
      scores: c.scores,
      metrics: c.metrics,
      vs_baseline: c.vsBaseline,
      regressions: c.regressions.map((x) => ({
        dataset_item_id: x.datasetItemId,
        source_run_id: x.sourceRunId,
        score: x.score,
        baseline: x.baseline,
        diff: x.diff,
      })),
    })),
    created_at: iso(r.createdAt)!,
    ended_at: iso(r.endedAt),
  };
}

export const batchItemJson = (i: BatchItemRecord) => ({
  id: i.id,
  position: i.position,
  dataset_item_id: String((i.subject as { datasetItemId?: string }).datasetItemId ?? ''),
  source_run_id: String((i.subject as { sourceRunId?: string }).sourceRunId ?? ''),
  candidate: String((i.subject as { candidate?: string }).candidate ?? ''),
  status: i.status,
  run_id: i.runId,
  attempt: i.attempt,
  scores: i.scores as Record<string, unknown>,
  result: i.result,
  error: i.error,
  started_at: iso(i.startedAt),
  ended_at: iso(i.endedAt),
});

const candidateInput = (c: z.infer<typeof CandidateSchema>): CandidateInput =>
  typeof c === 'string'
    ? c
    : {
        agent: c.agent,
        ...(c.label !== undefined ? { label: c.label } : {}),
        ...(c.overrides ? { overrides: overridesOf(c.overrides) } : {}),
      };

const ExperimentParam = z.object({ id: pathParam('id') });

export function experimentRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;
  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/experiments',
      tags: ['evals'],
      summary: 'Run a dataset against candidates and a baseline (step replay or full reruns), each item once',
      request: body(ExperimentBody),
      responses: { 201: json(ExperimentSchema, 'The experiment, running'), ...problems('dataset') },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const e = await rt.evals.experiments.create(
        {
          dataset: b.dataset,
          candidates: b.candidates.map(candidateInput),
          ...(b.name !== undefined ? { name: b.name } : {}),
          ...(b.mode !== undefined ? { mode: b.mode } : {}),
          ...(b.baseline !== undefined
            ? { baseline: b.baseline === 'recorded' ? 'recorded' : candidateInput(b.baseline) }
            : {}),
          ...(b.scorers !== undefined ? { scorers: b.scorers } : {}),
          ...(b.tools !== undefined ? { tools: toolPolicies(b.tools) } : {}),
          ...(b.concurrency !== undefined ? { concurrency: b.concurrency } : {}),
        },
        { tenant: c.get('tenant') },
      );
      return c.json(await experimentJson(ctx, e), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/experiments',
      tags: ['evals'],
      summary: "The tenant's experiments",
      request: { query: Cursor },
      responses: {
        200: json(z.object({ data: z.array(ExperimentSchema), next_cursor: z.string().nullable() }), 'A page'),
        ...problems('experiment'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.evals.experiments.list({
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor ? { after: cursor } : {}),
      });
      const data = page.slice(0, q.limit);
      return c.json(
        {
          data: await Promise.all(data.map((e) => experimentJson(ctx, e))),
          next_cursor: page.length > q.limit ? data.at(-1)!.id : null,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/experiments/{id}',
      tags: ['evals'],
      summary: 'Get an experiment and how far it is',
      request: { params: ExperimentParam },
      responses: { 200: json(ExperimentSchema, 'The experiment'), ...problems('experiment') },
    }),
    async (c) =>
      c.json(
        await experimentJson(ctx, await rt.evals.experiments.get(c.req.valid('param').id, { tenant: c.get('tenant') })),
        200,
      ),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/experiments/{id}/results',
      tags: ['evals'],
      summary: 'Results per candidate: mean scores, metrics, the difference to the baseline, regressions worst first',
      request: { params: ExperimentParam },
      responses: { 200: json(ResultsSchema, 'The results so far'), ...problems('experiment') },
    }),
    async (c) =>
      c.json(
        resultsJson(await rt.evals.experiments.results(c.req.valid('param').id, { tenant: c.get('tenant') })),
        200,
      ),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/experiments/{id}/items',
      tags: ['evals'],
      summary: "An experiment's items: one per dataset item and candidate, with its scores and result",
      request: { params: ExperimentParam, query: Cursor },
      responses: {
        200: json(z.object({ data: z.array(ExperimentItemSchema), next_cursor: z.string().nullable() }), 'A page'),
        ...problems('experiment'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.evals.experiments.items(c.req.valid('param').id, {
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor !== undefined && /^\d+$/.test(cursor) ? { afterPosition: Number(cursor) } : {}),
      });
      const data = page.slice(0, q.limit);
      return c.json(
        { data: data.map(batchItemJson), next_cursor: page.length > q.limit ? String(data.at(-1)!.position) : null },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/experiments/{id}/items/{item_id}/scores',
      tags: ['evals'],
      summary: "A late score (a person's rating): merged into the item's scores",
      request: {
        params: z.object({ id: pathParam('id'), item_id: pathParam('item_id') }),
        ...body(
          z.strictObject({
            scores: z
              .record(z.string().min(1).max(100), z.number().min(0).max(1))
              .describe('From 0 to 1, by name; `score` is reserved'),
          }),
        ),
      },
      responses: { 200: json(ExperimentItemSchema, 'The item'), ...problems('experiment') },
    }),
    async (c) => {
      const { id, item_id } = c.req.valid('param');
      const item = await rt.evals.experiments.score(id, item_id, c.req.valid('json').scores, {
        tenant: c.get('tenant'),
      });
      return c.json(batchItemJson(item), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/experiments/{id}/cancel',
      tags: ['evals'],
      summary: 'Cancel: no pending item starts (running ones finish)',
      request: { params: ExperimentParam },
      responses: { 200: json(ExperimentSchema, 'The experiment'), ...problems('experiment') },
    }),
    async (c) =>
      c.json(
        await experimentJson(
          ctx,
          await rt.evals.experiments.cancel(c.req.valid('param').id, { tenant: c.get('tenant') }),
        ),
        200,
      ),
  );
}
