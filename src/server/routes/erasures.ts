/**
 * `/v1/erasures` (ADR-0041, docs/operations.md): erase a session, a tenant, or every
 * session idle since before a date; the erasure audit; verification. A tenant's API key erases only
 * its own sessions. Erasing a tenant or by date, reading the audit and verifying (a scan of every
 * tenant's rows) take an operator: an API key with the admin scope, a server without API keys
 * (loopback or `--insecure`), or the CLI (`keel erase`).
 */
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { ErasureRecord } from '../../store/index.ts';
import type { ErasureResult } from '../../runs/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, json, problem, problems as problemsOf } from '../openapi.ts';
import { HttpProblem } from '../problems.ts';

const problems = { ...problemsOf('session'), 403: problem('Only an operator may do that') };

const ErasureSchema = z
  .object({
    id: z.string(),
    scope: z.enum(['session', 'tenant', 'before']),
    target_hash: z.string().describe('SHA-256 (hex) of `scope:target`: the audit keeps no target'),
    by: z.string().describe("The API key id that asked, or 'operator'"),
    at: z.string(),
    counts: z.record(z.string(), z.number()).describe('What it removed, by kind'),
  })
  .openapi('Erasure');

const ErasureResultSchema = ErasureSchema.extend({
  session_ids: z.array(z.string()).describe('The sessions it erased (not kept in the audit)'),
  physical: z.string().describe('What the store did about physical copies, and what it cannot do'),
}).openapi('ErasureResult');

const FindingSchema = z
  .object({
    table: z.string(),
    column: z.string(),
    row: z.string().describe("The row's key columns, `name=value` joined by `,`"),
    needle: z.string(),
    kept: z.string().optional().describe('Why an erasure keeps it by design (tombstones): absent for a remnant'),
  })
  .openapi('ErasureFinding');

const EraseBody = z
  .object({
    scope: z.enum(['session', 'tenant', 'before']),
    session_id: z.string().min(1).optional().describe('scope session: the session'),
    tenant: z.string().min(1).optional().describe('scope tenant: the tenant'),
    before: z.string().min(1).optional().describe('scope before: an ISO 8601 date; sessions idle since before it'),
    confirm: z
      .string()
      .optional()
      .describe('scope tenant: the tenant again; scope before: the date again (what is erased cannot be brought back)'),
  })
  .openapi('EraseRequest');

const VerifyBody = z
  .object({
    ids: z.array(z.string()).optional().describe('Ids that should be found nowhere but in tombstones'),
    strings: z
      .array(z.string())
      .optional()
      .describe('Strings (e.g. a marker from erased content) that should be found nowhere'),
  })
  .openapi('VerifyRequest');

const iso = (ms: number) => new Date(ms).toISOString();
const erasureJson = (r: ErasureRecord) => ({
  id: r.id,
  scope: r.scope,
  target_hash: r.targetHash,
  by: r.by,
  at: iso(r.at),
  counts: r.counts,
});
const resultJson = (r: ErasureResult) => ({ ...erasureJson(r), session_ids: r.sessionIds, physical: r.physical });

/** An operator: a server without API keys (no key on the request), or an API key with the admin scope. */
const isOperator = (c: Context<AppEnv>) => c.get('keyId') === null || c.get('scope') === 'admin';

function operatorOnly(c: Context<AppEnv>, what: string): void {
  if (!isOperator(c))
    throw new HttpProblem(
      'forbidden',
      `${what} takes an operator: an API key with the admin scope, \`keel erase\` on the store, or a server without API keys (loopback or --insecure)`,
    );
}

export function erasureRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/erasures',
      tags: ['erasures'],
      summary:
        'Erase a session (a tenant key: its own), a tenant or every session idle since before a date (an operator): from the log, every table and every erasure participant; an audit record remains',
      request: body(EraseBody),
      responses: { 200: json(ErasureResultSchema, 'What was erased, and its audit record'), ...problems },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const by = c.get('keyId') ?? 'operator';
      if (b.scope === 'session') {
        if (b.session_id === undefined) throw new HttpProblem('validation', 'session_id: required for scope session');
        const actor = isOperator(c) ? { by } : { by, tenant: c.get('tenant') };
        return c.json(resultJson(await rt.erasure.eraseSession(b.session_id, actor)), 200);
      }
      if (b.scope === 'tenant') {
        operatorOnly(c, 'erasing a tenant');
        if (b.tenant === undefined) throw new HttpProblem('validation', 'tenant: required for scope tenant');
        if (b.confirm !== b.tenant)
          throw new HttpProblem('validation', `to erase tenant ${b.tenant}, send "confirm": "${b.tenant}" too`);
        return c.json(resultJson(await rt.erasure.eraseTenant(b.tenant, { by })), 200);
      }
      operatorOnly(c, 'erasing by date');
      if (b.before === undefined)
        throw new HttpProblem('validation', 'before: required for scope before (an ISO 8601 date)');
      const before = Date.parse(b.before);
      if (!Number.isFinite(before)) throw new HttpProblem('validation', `before: not a date: ${b.before}`);
      if (b.confirm !== b.before)
        throw new HttpProblem(
          'validation',
          `to erase every session idle since before ${b.before}, send "confirm": "${b.before}" too`,
        );
      return c.json(resultJson(await rt.erasure.eraseBefore(before, { by })), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/erasures',
      tags: ['erasures'],
      summary: 'The erasure audit, newest first (an operator)',
      request: {
        query: z.object({
          before: z.string().optional().describe('An erasure id: the page after it'),
          limit: z.coerce.number().int().min(1).max(1000).optional(),
        }),
      },
      responses: { 200: json(z.object({ erasures: z.array(ErasureSchema) }), 'The audit'), ...problems },
    }),
    async (c) => {
      operatorOnly(c, 'reading the erasure audit');
      const q = c.req.valid('query');
      const list = await rt.erasure.list({ limit: q.limit ?? 100, ...(q.before ? { before: q.before } : {}) });
      return c.json({ erasures: list.map(erasureJson) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/erasures/verify',
      tags: ['erasures'],
      summary:
        'Scan every table of the store (from its catalog, the log decompressed) and every erasure participant for ids and strings (an operator)',
      request: body(VerifyBody),
      responses: {
        200: json(
          z.object({
            clean: z.boolean().describe('No remnant: every place found is one an erasure keeps by design'),
            needles: z
              .array(z.string())
              .describe("What was searched for: the ids and strings, and erased sessions' run ids"),
            remnants: z.array(FindingSchema),
            kept: z.array(FindingSchema),
            participants: z.array(z.string()),
          }),
          'What the scan found',
        ),
        ...problems,
      },
    }),
    async (c) => {
      operatorOnly(c, 'verifying an erasure (a scan of every tenant’s rows)');
      const b = c.req.valid('json');
      return c.json(await rt.erasure.verify({ ids: b.ids ?? [], strings: b.strings ?? [] }), 200);
    },
  );
}
