/**
 * The tenants registry over HTTP (issue 42, docs/operations.md): each tenant's
 * weight in fair dispatch and its quotas, and its API keys. Only an API key with the admin scope
 * reaches these routes (auth.ts `checkScope`; with authentication off, the loopback operator does),
 * and an admin key reaches nothing else. Admin keys themselves are made with `keel keys create
 * --scope admin`, never here.
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { ApiKeyRecord, QuotaLimits, TenantQuotas, TenantRecord } from '../../store/index.ts';
import { createApiKey } from '../auth.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, json, pathParam, problem } from '../openapi.ts';
import { HttpProblem } from '../problems.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Each quota's name in the API (snake_case) and in the runtime. */
const QUOTA_NAMES = {
  concurrent_runs: 'concurrentRuns',
  runs_per_minute: 'runsPerMinute',
  tokens_per_day: 'tokensPerDay',
  cost_per_day: 'costPerDay',
  cost_per_month: 'costPerMonth',
} as const satisfies Record<string, keyof QuotaLimits>;
type ApiQuotaName = keyof typeof QUOTA_NAMES;

const count = (what: string) => z.number().int().min(0).optional().describe(what);
export const QuotasSchema = z
  .strictObject({
    concurrent_runs: count('Runs not terminal and not queued at once'),
    runs_per_minute: count('Runs created in any sliding minute'),
    tokens_per_day: count('Model tokens (input + output) in a UTC day'),
    cost_per_day: z.number().min(0).optional().describe('Model cost (USD) in a UTC day'),
    cost_per_month: z.number().min(0).optional().describe('Model cost (USD) in a UTC calendar month'),
    on_limit: z.enum(['wait', 'fail']).optional().describe('At a limit a run waits (default) or fails'),
  })
  .openapi('Quotas');
type ApiQuotas = z.infer<typeof QuotasSchema>;

export function quotasFromApi(q: ApiQuotas): TenantQuotas {
  const out: TenantQuotas = {};
  for (const [k, name] of Object.entries(QUOTA_NAMES)) {
    const v = q[k as ApiQuotaName];
    if (v !== undefined) out[name] = v;
  }
  if (q.on_limit !== undefined) out.onLimit = q.on_limit;
  return out;
}

export function quotasJson(q: TenantQuotas): ApiQuotas {
  const out: ApiQuotas = {};
  for (const [k, name] of Object.entries(QUOTA_NAMES)) {
    const v = q[name];
    if (v !== undefined) out[k as ApiQuotaName] = v;
  }
  if (q.onLimit !== undefined) out.on_limit = q.onLimit;
  return out;
}

const TenantSchema = z
  .object({
    id: z.string(),
    name: z.string().nullable(),
    weight: z.number().int().describe("Share of the workers' claims when tenants compete (fair dispatch)"),
    quotas: QuotasSchema,
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Tenant');

const tenantJson = (t: TenantRecord) => ({
  id: t.id,
  name: t.name,
  weight: t.weight,
  quotas: quotasJson(t.quotas),
  created_at: iso(t.createdAt)!,
  updated_at: iso(t.updatedAt)!,
});

const TenantBody = z
  .strictObject({
    name: z.string().max(200).nullable().optional(),
    weight: z.number().int().min(1).max(10_000).optional().describe('Default 1'),
    quotas: QuotasSchema.optional().describe('Replaces all of the quotas'),
  })
  .openapi('TenantUpdate');

const ApiKeySchema = z
  .object({
    id: z.string(),
    tenant: z.string(),
    name: z.string().nullable(),
    prefix: z.string().describe('The first characters of the secret'),
    scope: z.enum(['tenant', 'admin']),
    rate_per_minute: z.number().int().nullable(),
    quotas: QuotasSchema.nullable().describe("The key's own limits, within its tenant's"),
    created_at: z.string(),
    revoked_at: z.string().nullable(),
  })
  .openapi('ApiKey');

const keyJson = (k: ApiKeyRecord) => ({
  id: k.id,
  tenant: k.tenant,
  name: k.name,
  prefix: k.prefix,
  scope: k.scope,
  rate_per_minute: k.ratePerMinute,
  quotas: k.quotas === null ? null : quotasJson(k.quotas),
  created_at: iso(k.createdAt)!,
  revoked_at: iso(k.revokedAt),
});

const KeyBody = z
  .strictObject({
    name: z.string().max(200).optional(),
    rate_per_minute: z.number().int().min(1).optional(),
    quotas: QuotasSchema.optional(),
  })
  .openapi('ApiKeyRequest');

const TenantParam = z.object({ id: pathParam('id') });
const KeyParam = z.object({ id: pathParam('id'), key_id: pathParam('key_id') });

/** What an admin route answers besides its own: 400, 401, 403 (not an admin key) and 404. */
const adminProblems = (what: string) =>
  ({
    400: problem('Invalid request'),
    401: problem('Missing or invalid API key'),
    403: problem('The API key does not have the admin scope (`forbidden_scope`)'),
    404: problem(`No such ${what}`),
  }) as const;

export function tenantRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/tenants',
      tags: ['tenants'],
      summary: 'The tenants an operator set a weight or quotas for (admin scope)',
      responses: {
        200: json(z.object({ data: z.array(TenantSchema) }), 'Every tenant with a row'),
        ...adminProblems('tenant'),
      },
    }),
    async (c) => c.json({ data: (await rt.tenants.list()).map(tenantJson) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/tenants/{id}',
      tags: ['tenants'],
      summary: "A tenant's weight and quotas (admin scope)",
      request: { params: TenantParam },
      responses: { 200: json(TenantSchema, 'The tenant'), ...adminProblems('tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const t = await rt.tenants.get(id);
      if (!t) throw new HttpProblem('not_found', `no tenant ${id} in the registry (it has weight 1 and the defaults)`);
      return c.json(tenantJson(t), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/v1/tenants/{id}',
      tags: ['tenants'],
      summary: "Creates or updates a tenant's row: what the body leaves out keeps its value (admin scope)",
      request: { params: TenantParam, ...body(TenantBody) },
      responses: { 200: json(TenantSchema, 'The tenant as stored'), ...adminProblems('tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const b = c.req.valid('json');
      const t = await rt.tenants.put({
        id,
        ...(b.name !== undefined ? { name: b.name } : {}),
        ...(b.weight !== undefined ? { weight: b.weight } : {}),
        ...(b.quotas !== undefined ? { quotas: quotasFromApi(b.quotas) } : {}),
      });
      return c.json(tenantJson(t), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/tenants/{id}',
      tags: ['tenants'],
      summary:
        "Removes a tenant's row: it goes back to weight 1 and the defaults; its keys and sessions stay (admin scope)",
      request: { params: TenantParam },
      responses: { 204: { description: 'Removed' }, ...adminProblems('tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      if (!(await rt.tenants.delete(id))) throw new HttpProblem('not_found', `no tenant ${id} in the registry`);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/tenants/{id}/keys',
      tags: ['tenants'],
      summary: "A tenant's API keys, never their secrets (admin scope)",
      request: { params: TenantParam },
      responses: { 200: json(z.object({ data: z.array(ApiKeySchema) }), 'The keys'), ...adminProblems('tenant') },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      return c.json({ data: (await rt.apiKeys.list(id)).map(keyJson) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/tenants/{id}/keys',
      tags: ['tenants'],
      summary: 'A new API key of the tenant scope for the tenant: its secret is in this answer only (admin scope)',
      request: { params: TenantParam, ...body(KeyBody) },
      responses: {
        201: json(ApiKeySchema.extend({ secret: z.string() }), 'The key and its secret'),
        ...adminProblems('tenant'),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const b = c.req.valid('json');
      let created;
      try {
        created = await createApiKey(
          { keys: rt.apiKeys },
          {
            tenant: id,
            ...(b.name !== undefined ? { name: b.name } : {}),
            ...(b.rate_per_minute !== undefined ? { ratePerMinute: b.rate_per_minute } : {}),
            ...(b.quotas !== undefined ? { quotas: quotasFromApi(b.quotas) } : {}),
          },
        );
      } catch (e) {
        if (e instanceof TypeError) throw new HttpProblem('validation', e.message);
        throw e;
      }
      return c.json({ ...keyJson(created.key), secret: created.secret }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/tenants/{id}/keys/{key_id}',
      tags: ['tenants'],
      summary: "Revokes one of the tenant's API keys (admin scope)",
      request: { params: KeyParam },
      responses: { 204: { description: 'Revoked' }, ...adminProblems('API key') },
    }),
    async (c) => {
      const { id, key_id: keyId } = c.req.valid('param');
      const key = (await rt.apiKeys.list(id)).find((k) => k.id === keyId);
      if (!key) throw new HttpProblem('not_found', `tenant ${id} has no API key ${keyId}`);
      await rt.apiKeys.revoke(keyId);
      return c.body(null, 204);
    },
  );
}
