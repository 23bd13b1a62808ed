/**
 * `GET /v1/runs/{a}/compare/{b}`: two runs of the caller's tenant compared step by step
 * (session/projections/run-comparison.ts). Read-only.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';

import { compareRuns, readComparedRun } from '../../session/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { json, pathParam, problems } from '../openapi.ts';
import { runFor } from '../lookups.ts';

const compared = <T extends z.ZodType>(t: T) => z.object({ a: t.nullable(), b: t.nullable(), equal: z.boolean() });

const TextDiffSchema = z.object({
  a: z.string().nullable(),
  b: z.string().nullable(),
  equal: z.boolean(),
  parts: z.array(z.object({ op: z.enum(['equal', 'delete', 'insert']), text: z.string() })),
});

const TokensSchema = z.object({ input: compared(z.number()), output: compared(z.number()) });

const ContentSchema = z.object({ hash: compared(z.string()), diff: TextDiffSchema.nullable() });

const ToolCallSideSchema = z.object({
  toolCallId: z.string(),
  name: z.string(),
  arguments: z.unknown(),
  result: z.unknown().openapi({ description: 'The tool output ({type, value} or an error); null without a result' }),
  durationMs: z.number().nullable(),
  source: z.enum(['executed', 'reused', 'mocked']).openapi({
    description: "Where the result came from: the tool ran, or a rerun served the source's recorded result or a mock",
  }),
});

const SideSchema = z.object({
  id: z.string(),
  sessionId: z.string(),
  turn: z.number().nullable(),
  agent: z.object({ name: z.string(), version: z.string() }),
  status: z.string(),
  steps: z.number(),
});

export const RunComparisonSchema = z
  .object({
    a: SideSchema,
    b: SideSchema,
    status: compared(z.string()),
    tokens: TokensSchema,
    cost: compared(z.number()),
    latencyMs: compared(z.number()),
    finalAnswer: TextDiffSchema,
    forkedAt: z.number().nullable().openapi({
      description:
        "When one run is a rerun of the other: the step it was rerun from (earlier steps are the source's alone and left out)",
    }),
    steps: z.array(
      z.object({
        step: z.number(),
        presentIn: z.enum(['both', 'a', 'b']),
        request: z
          .object({
            provider: compared(z.string()),
            modelId: compared(z.string()),
            settings: compared(z.record(z.string(), z.unknown())),
            system: ContentSchema,
            tools: ContentSchema.extend({ names: compared(z.array(z.string())) }),
            fingerprint: compared(z.string()),
          })
          .nullable(),
        text: TextDiffSchema,
        toolCalls: z.array(
          z.object({
            index: z.number(),
            presentIn: z.enum(['both', 'a', 'b']),
            a: ToolCallSideSchema.nullable(),
            b: ToolCallSideSchema.nullable(),
            name: z.boolean(),
            arguments: z.boolean(),
            result: z.boolean(),
            equal: z.boolean(),
          }),
        ),
        endReason: compared(z.string()),
        tokens: TokensSchema,
        cost: compared(z.number()),
        latencyMs: compared(z.number()),
      }),
    ),
  })
  .openapi('RunComparison');

export function compareRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/runs/{a}/compare/{b}',
      tags: ['runs'],
      summary:
        'Compare two runs step by step: requests, assistant text, tool calls, final answer, status, tokens, cost, latency',
      request: { params: z.object({ a: pathParam('a'), b: pathParam('b') }) },
      responses: { 200: json(RunComparisonSchema, 'The comparison, aligned by step number'), ...problems('run') },
    }),
    async (c) => {
      const { a, b } = c.req.valid('param');
      const [ra, rb] = [await runFor(ctx, c, a), await runFor(ctx, c, b)];
      const [ia, ib] = await Promise.all([readComparedRun(ctx.rt.sessions, ra), readComparedRun(ctx.rt.sessions, rb)]);
      return c.json(compareRuns(ia, ib) as z.infer<typeof RunComparisonSchema>, 200);
    },
  );
}
