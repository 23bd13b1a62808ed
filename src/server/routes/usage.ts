import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { AppContext, AppEnv } from '../context.ts';
import { problem } from '../openapi.ts';
import { HttpProblem } from '../problems.ts';

import {
  parseUsageParams,
  usageCsv,
  usageReport,
  UsageParamsError,
  USAGE_DEFAULT_DAYS,
  USAGE_MAX_DAYS,
  USAGE_MAX_HOURLY_DAYS,
} from '../usage.ts';

const Numbers = {
  runs: z.number().int().describe('Runs that ended in the group'),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
  cached_input_tokens: z
    .number()
    .int()
    .describe('Input tokens served from the provider’s prompt cache (part of input_tokens)'),
  reasoning_tokens: z.number().int().describe('Output tokens spent on reasoning (part of output_tokens)'),
  cost: z.number().describe('US dollars, to the nano-dollar'),
};

const UsageRowSchema = z
  .object({
    tenant: z.string().optional(),
    agent: z.string().optional(),
    model: z
      .string()
      .nullable()
      .optional()
      .describe('provider:modelId as recorded when the run was created; null if its agent spec names none'),
    day: z.string().optional().describe('2025-01-31 (UTC)'),
    hour: z.string().optional().describe('2025-01-31T12:00:00Z'),
    ...Numbers,
  })
  .openapi('UsageRow');

const QuotaLineSchema = z.object({
  limit: z.number(),
  used: z
    .number()
    .describe(
      'Settled: the actual tokens or cost of calls made (runs started, for runs_per_minute; runs holding a slot, for concurrent_runs)',
    ),
  reserved: z.number().optional().describe('Reserved by model calls in flight (their estimate, until they settle)'),
  resets_at: z
    .string()
    .nullable()
    .describe('ISO 8601: when the period ends (the next UTC day or month; a minute from now for runs_per_minute)'),
});

const QuotaReportSchema = z
  .object({
    scope: z.string().describe('tenant:<id> or key:<id>'),
    on_limit: z
      .enum(['wait', 'fail'])
      .describe('What happens to a run at a limit (waiting_for_quota, or failed with quota_exceeded)'),
    concurrent_runs: QuotaLineSchema.optional(),
    runs_per_minute: QuotaLineSchema.optional(),
    tokens_per_day: QuotaLineSchema.optional(),
    cost_per_day: QuotaLineSchema.optional(),
    cost_per_month: QuotaLineSchema.optional(),
  })
  .openapi('QuotaReport');

const UsageReportSchema = z
  .object({
    from: z.string().describe('ISO 8601, inclusive'),
    to: z.string().describe('ISO 8601, exclusive'),
    group_by: z.array(z.enum(['tenant', 'agent', 'model', 'day', 'hour'])),
    data: z
      .array(UsageRowSchema)
      .describe('One row per group, ordered by the keys in group_by order (a missing model last)'),
    totals: z.object(Numbers),
    quota: z
      .object({
        tenant: QuotaReportSchema.nullable().describe(
          "The caller's tenant's quotas against their use now (null: none apply)",
        ),
        key: QuotaReportSchema.nullable().describe("The caller's API key's own quotas (null: none)"),
      })
      .describe('Quotas against their use now, whatever the range (ADR-0043)'),
  })
  .openapi('UsageReport');

const time = (what: string) =>
  z
    .string()
    .optional()
    .describe(`${what}: a date (2025-01-31, UTC) or an ISO 8601 timestamp with an offset (2025-01-31T12:00:00Z)`);

const UsageQuerySchema = z.object({
  from: time(`Runs that ended at or after this (default: ${USAGE_DEFAULT_DAYS} days before to)`),
  to: time('Runs that ended before this (default: now); a date includes that day'),
  group_by: z
    .string()
    .optional()
    .describe('Comma-separated: tenant, agent, model, and day or hour (default: day; empty: the totals only)'),
  tenant: z.string().optional().describe('Only this tenant: an API key sees only its own'),
  agent: z.string().optional().describe('Only this agent (by name)'),
  model: z.string().optional().describe('Only this model (provider:modelId)'),
  format: z.enum(['json', 'csv']).optional().describe('csv: text/csv (also with Accept: text/csv)'),
});

/** `GET /v1/usage`: tokens and cost of the caller's tenant's runs, grouped; JSON or CSV. */
export function usageRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/usage',
      tags: ['usage'],
      summary:
        'Tokens and cost by tenant, agent, model and day or hour: each run’s own usage once, by the time it ended',
      description:
        `Runs that ended in [from, to). A run counts its own usage (a parent's recorded usage includes its subagents', which count as their own runs); ` +
        `runs of erased sessions count; runs not ended yet are left out. At most ${USAGE_MAX_DAYS} days, ${USAGE_MAX_HOURLY_DAYS} grouped by hour.`,
      request: { query: UsageQuerySchema },
      responses: {
        200: {
          description: 'The report',
          content: {
            'application/json': { schema: UsageReportSchema },
            'text/csv': { schema: z.string().describe('A header line, then one line per row (no totals line)') },
          },
        },
        400: problem('Invalid parameters (each one named in errors)'),
        401: problem('Missing or invalid API key'),
        403: problem('Another tenant’s usage'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const tenant = c.get('tenant');
      let query;
      try {
        query = parseUsageParams(q);
      } catch (e) {
        if (e instanceof UsageParamsError) throw new HttpProblem('validation', e.message, { errors: e.errors });
        throw e;
      }
      // Every API key is bound to its tenant: it sees that tenant's usage and no other's.
      if (query.tenant !== undefined && query.tenant !== tenant)
        throw new HttpProblem(
          'forbidden',
          `this API key is tenant ${tenant}'s: it sees only that tenant's usage, not ${query.tenant}'s`,
        );
      const report = usageReport(query, await ctx.rt.runs.usage({ ...query, tenant }));
      const csv = q.format === 'csv' || (q.format === undefined && /\btext\/csv\b/i.test(c.req.header('accept') ?? ''));
      if (csv) {
        const name = `keel-usage-${report.from.slice(0, 10)}-${report.to.slice(0, 10)}.csv`;
        return c.body(usageCsv(report), 200, {
          'content-type': 'text/csv; charset=utf-8',
          'content-disposition': `attachment; filename="${name}"`,
        });
      }
      return c.json({ ...report, quota: await ctx.rt.runs.quota(tenant, c.get('keyId')) }, 200);
    },
  );
}
