import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { SweepReport } from '../../retention/index.ts';
import { NotFoundError, type StoredRetentionPolicy } from '../../store/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, IdParam, json, problem, problems as problemsOf } from '../openapi.ts';
import { plainText } from '../schemas.ts';

/**
 * Retention (docs/operations.md): a tenant's key reads and sets its own tenant's policy
 * (and its agents'), sees what a sweep would do to its sessions, runs one on them, and restores a
 * session from the archive store. Operator-wide policies and the operational tables' periods come
 * from keel.config; the sweep of a tenant leaves the tables alone.
 */
const problems = problemsOf('session');
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const Days = z.number().nullable().describe('Days; null: never');

const PolicyBody = z
  .strictObject({
    agent: plainText(200, 1).optional().describe('The policy of this agent’s sessions (default: the tenant’s own)'),
    archive_after_days: Days.optional(),
    delete_after_days: Days.optional(),
    keep_runs: z.number().optional().describe('Not available (ADR-0044): refused (invalid_retention_policy)'),
  })
  .openapi('RetentionPolicyUpdate');

const SessionPolicySchema = z.object({ archive_after_days: Days, delete_after_days: Days });

const PolicySchema = z
  .object({
    tenant: z.string(),
    agent: z.string().nullable(),
    policy: z
      .object({ archive_after_days: Days.optional(), delete_after_days: Days.optional() })
      .nullable()
      .describe('What the tenant set (null: nothing)'),
    effective: SessionPolicySchema.describe('What applies, every source resolved (keel.config and this)'),
    updated_at: z.string().nullable(),
  })
  .openapi('RetentionPolicy');

const ReportSchema = z
  .object({
    dry_run: z.boolean(),
    tenant: z.string().nullable(),
    at: z.string(),
    sessions: z.object({
      archived: z.number().int(),
      deleted: z.number().int(),
      skipped: z.number().int(),
      archived_ids: z.array(z.string()).describe('The first 1000'),
      deleted_ids: z.array(z.string()).describe('The first 1000'),
      errors: z.array(z.object({ session_id: z.string(), message: z.string() })),
    }),
    tables: z.record(z.string(), z.object({ days: z.number().nullable(), rows: z.number().int() })),
    duration_ms: z.number(),
  })
  .openapi('RetentionReport');

export const reportJson = (r: SweepReport) => ({
  dry_run: r.dryRun,
  tenant: r.tenant,
  at: new Date(r.at).toISOString(),
  sessions: {
    archived: r.sessions.archived,
    deleted: r.sessions.deleted,
    skipped: r.sessions.skipped,
    archived_ids: r.sessions.archivedIds,
    deleted_ids: r.sessions.deletedIds,
    errors: r.sessions.errors.map((e) => ({ session_id: e.sessionId, message: e.message })),
  },
  tables: r.tables as Record<string, { days: number | null; rows: number }>,
  duration_ms: r.durationMs,
});

const AgentQuery = z.object({ agent: plainText(200, 1).optional() });

export function retentionRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  const policyJson = async (tenant: string, agent: string | null, stored: StoredRetentionPolicy | undefined) => {
    const effective = await rt.retention.effectivePolicy(tenant, agent);
    const p = stored?.policy as { archiveAfterDays?: number | null; deleteAfterDays?: number | null } | undefined;
    return {
      tenant,
      agent,
      policy: p
        ? {
            ...(p.archiveAfterDays !== undefined ? { archive_after_days: p.archiveAfterDays } : {}),
            ...(p.deleteAfterDays !== undefined ? { delete_after_days: p.deleteAfterDays } : {}),
          }
        : null,
      effective: { archive_after_days: effective.archiveAfterDays, delete_after_days: effective.deleteAfterDays },
      updated_at: iso(stored?.updatedAt ?? null),
    };
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/retention/policy',
      tags: ['retention'],
      summary: 'The retention policy of your tenant (or of one of its agents), and what applies',
      request: { query: AgentQuery },
      responses: { 200: json(PolicySchema, 'The policy'), ...problems },
    }),
    async (c) => {
      const tenant = c.get('tenant');
      const agent = c.req.valid('query').agent ?? null;
      return c.json(await policyJson(tenant, agent, await rt.retention.getPolicy(tenant, agent)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/v1/retention/policy',
      tags: ['retention'],
      summary: 'Set the retention policy of your tenant (or of one of its agents)',
      request: { ...body(PolicyBody) },
      responses: {
        200: json(PolicySchema, 'The policy as set'),
        422: problem('A policy that cannot be kept (invalid_retention_policy, naming the field)'),
        ...problems,
      },
    }),
    async (c) => {
      const tenant = c.get('tenant');
      const b = c.req.valid('json');
      const agent = b.agent ?? null;
      const policy: Record<string, unknown> = {};
      if (b.archive_after_days !== undefined) policy.archiveAfterDays = b.archive_after_days;
      if (b.delete_after_days !== undefined) policy.deleteAfterDays = b.delete_after_days;
      if (b.keep_runs !== undefined) policy.keepRuns = b.keep_runs;
      const stored = await rt.retention.putPolicy(tenant, agent, policy);
      return c.json(await policyJson(tenant, agent, stored), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/retention/policy',
      tags: ['retention'],
      summary: 'Remove the retention policy your tenant set (keel.config’s then applies)',
      request: { query: AgentQuery },
      responses: { 204: { description: 'Removed' }, ...problems },
    }),
    async (c) => {
      const agent = c.req.valid('query').agent ?? null;
      if (!(await rt.retention.deletePolicy(c.get('tenant'), agent)))
        throw new NotFoundError('retention policy', agent ?? c.get('tenant'));
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/retention/status',
      tags: ['retention'],
      summary: 'What retention would do now to your tenant’s sessions (a dry run), and the policy that applies',
      responses: {
        200: json(
          z
            .object({
              policy: SessionPolicySchema,
              archive_store: z.boolean().describe('Whether an archive store is configured'),
              plan: ReportSchema,
            })
            .openapi('RetentionStatus'),
          'The status',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const tenant = c.get('tenant');
      const effective = await rt.retention.effectivePolicy(tenant);
      const plan = await rt.retention.sweep({ dryRun: true, tenant });
      return c.json(
        {
          policy: { archive_after_days: effective.archiveAfterDays, delete_after_days: effective.deleteAfterDays },
          archive_store: rt.retention.archiveStore !== undefined,
          plan: reportJson(plan),
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/retention/run',
      tags: ['retention'],
      summary: 'Sweep your tenant’s sessions now (archive, delete), or say what it would do (dry_run)',
      request: { ...body(z.strictObject({ dry_run: z.boolean().default(false) }).openapi('RetentionRun'), false) },
      responses: {
        200: json(ReportSchema, 'What was done (or would be)'),
        409: problem('A policy archives, and no archive store is configured (no_archive_store)'),
        ...problems,
      },
    }),
    async (c) => {
      // The body is optional: validated when sent.
      const dryRun = (c.req.valid('json') as { dry_run?: boolean } | undefined)?.dry_run === true;
      return c.json(reportJson(await rt.retention.sweep({ dryRun, tenant: c.get('tenant') })), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/restore',
      tags: ['sessions'],
      summary: 'Restore a session from the archive store, with every id it had',
      request: { params: IdParam },
      responses: {
        200: json(
          z.object({ session_id: z.string(), events: z.number().int() }).openapi('RestoredSession'),
          'The session is back',
        ),
        409: problem('The session is not in the archive store (not_in_archive)'),
        ...problems,
        503: problem(
          'Its archive cannot be read (`archive_unavailable`), or the database cannot be reached (`store_unavailable`)',
        ),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const s = await rt.sessions.find(id);
      if (!s || s.tenant !== c.get('tenant')) throw new NotFoundError('session', id);
      const r = await rt.retention.restore(id);
      return c.json({ session_id: r.sessionId, events: r.events }, 200);
    },
  );
}
