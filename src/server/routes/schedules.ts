import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ScheduleValidationError, type CreateScheduleInput } from '../../runs/index.ts';
import { NotFoundError, type ScheduleFireRecord, type ScheduleRecord } from '../../store/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, IdParam, json, problem, problems as problemsOf } from '../openapi.ts';
import { HttpProblem } from '../problems.ts';
import { ContentSchema, Cursor, JsonObjectSchema, plainText, cursorOf, toUserInput } from '../schemas.ts';

/**
 * Schedules (ADR-0016): a message sent at each tick of a cron expression (in a time zone) or of an
 * interval, to one session or to a new session per fire. Tenant-scoped: another tenant's schedule
 * answers 404. Bad input answers 400 `validation` naming the field (a cron expression with the
 * parser's own message), an unknown agent 422 `unknown_agent`.
 */
const problems = problemsOf('schedule');
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export const CreateScheduleBody = z
  .strictObject({
    name: plainText(200).optional(),
    cron: z
      .strictObject({
        expression: plainText(200, 1).describe(
          '5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first',
        ),
        timezone: plainText(100, 1).default('UTC').describe('An IANA time zone, e.g. Europe/Paris'),
      })
      .optional(),
    interval: z.strictObject({ seconds: z.number().describe('Whole seconds, at least 1') }).optional(),
    message: ContentSchema,
    target: z.union([
      z.strictObject({ session_id: plainText(200, 1) }),
      z.strictObject({
        new_session: z.strictObject({ title: plainText(500).optional(), metadata: JsonObjectSchema.optional() }),
      }),
    ]),
    agent: plainText(200, 1).optional(),
    overlap: z
      .enum(['skip', 'enqueue', 'interrupt'])
      .default('skip')
      .describe("When the target session's previous run is still active at a tick (one-session targets only)"),
    catch_up: z
      .enum(['once', 'skip'])
      .default('once')
      .describe('After downtime: the latest missed tick fires once, or none does'),
  })
  .openapi('CreateSchedule');

export const ScheduleSchema = z
  .object({
    id: z.string(),
    name: z.string().nullable(),
    cron: z.object({ expression: z.string(), timezone: z.string() }).nullable(),
    interval: z.object({ seconds: z.number().int() }).nullable(),
    message: z.unknown(),
    target: z.union([
      z.object({ session_id: z.string() }),
      z.object({
        new_session: z.object({ title: z.string().nullable().optional(), metadata: JsonObjectSchema.optional() }),
      }),
    ]),
    agent: z.string().nullable(),
    overlap: z.enum(['skip', 'enqueue', 'interrupt']),
    catch_up: z.enum(['once', 'skip']),
    paused: z.boolean(),
    paused_at: z.string().nullable(),
    paused_reason: z
      .string()
      .nullable()
      .describe(
        'Why Keel paused it by itself (its target session was archived or erased, its tenant erased); null when paused by request, or running',
      ),
    next_fire_at: z.string().nullable().describe('The next tick (null while paused)'),
    last_tick: z.string().nullable(),
    last_run_id: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Schedule');

export const ScheduleFireSchema = z
  .object({
    tick: z.string().describe('The time the schedule was due'),
    fired_at: z.string().describe('When it was fired (later than the tick after downtime)'),
    outcome: z.enum(['fired', 'skipped', 'failed']),
    reason: z.string().nullable(),
    run_id: z.string().nullable(),
    session_id: z.string().nullable(),
  })
  .openapi('ScheduleFire');

/** The message as the API writes content (file parts with `media_type`). */
function contentJson(message: unknown): unknown {
  if (!Array.isArray(message)) return message;
  return message.map((p: { type: string; mediaType?: string; [k: string]: unknown }) => {
    if (p.type !== 'file') return p;
    const { mediaType, ...rest } = p;
    return { ...rest, media_type: mediaType };
  });
}

export function scheduleJson(s: ScheduleRecord) {
  return {
    id: s.id,
    name: s.name,
    cron: s.cron,
    interval: s.intervalSeconds === null ? null : { seconds: s.intervalSeconds },
    message: contentJson(s.message),
    target: 'sessionId' in s.target ? { session_id: s.target.sessionId } : { new_session: s.target.newSession },
    agent: s.agent,
    overlap: s.overlap,
    catch_up: s.catchUp,
    paused: s.pausedAt !== null,
    paused_at: iso(s.pausedAt),
    paused_reason: s.pausedReason,
    next_fire_at: iso(s.nextFireAt),
    last_tick: iso(s.lastTick),
    last_run_id: s.lastRunId,
    created_at: new Date(s.createdAt).toISOString(),
    updated_at: new Date(s.updatedAt).toISOString(),
  };
}

export const fireJson = (f: ScheduleFireRecord) => ({
  tick: new Date(f.tick).toISOString(),
  fired_at: new Date(f.firedAt).toISOString(),
  outcome: f.outcome,
  reason: f.reason,
  run_id: f.runId,
  session_id: f.sessionId,
});

export function scheduleRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  /** The schedule, if it exists and belongs to the caller's tenant: another tenant's ids answer 404. */
  const scheduleFor = async (c: Context<AppEnv>, id: string): Promise<ScheduleRecord> => {
    const s = await rt.schedules.find(id);
    if (!s || s.tenant !== c.get('tenant')) throw new NotFoundError('schedule', id);
    return s;
  };
  /** The library's validation errors as 400 `validation`, with the field. */
  const validated = async <T>(p: Promise<T>): Promise<T> => {
    try {
      return await p;
    } catch (e) {
      if (e instanceof ScheduleValidationError) throw new HttpProblem('validation', e.message, { field: e.field });
      throw e;
    }
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/schedules',
      tags: ['schedules'],
      summary: 'Create a schedule (cron with a time zone, or an interval)',
      request: { ...body(CreateScheduleBody) },
      responses: {
        201: json(ScheduleSchema, 'The new schedule'),
        422: problem('No such agent'),
        ...problems,
      },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const input: CreateScheduleInput = {
        tenant: c.get('tenant'),
        message: toUserInput(b.message),
        target: 'session_id' in b.target ? { sessionId: b.target.session_id } : { newSession: b.target.new_session },
        overlap: b.overlap,
        catchUp: b.catch_up,
        ...(b.name !== undefined ? { name: b.name } : {}),
        ...(b.cron ? { cron: b.cron } : {}),
        ...(b.interval ? { interval: b.interval } : {}),
        ...(b.agent !== undefined ? { agent: b.agent } : {}),
      };
      const s = await validated(rt.schedules.create(input));
      return c.json(scheduleJson(s), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/schedules',
      tags: ['schedules'],
      summary: "The tenant's schedules (cursor pagination, by id)",
      request: { query: Cursor },
      responses: {
        200: json(
          z.object({ data: z.array(ScheduleSchema), next_cursor: z.string().nullable() }),
          'A page of schedules',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.schedules.list({
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor ? { after: cursor } : {}),
      });
      const data = page.slice(0, q.limit);
      return c.json({ data: data.map(scheduleJson), next_cursor: page.length > q.limit ? data.at(-1)!.id : null }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/schedules/{id}',
      tags: ['schedules'],
      summary: 'Get a schedule',
      request: { params: IdParam },
      responses: { 200: json(ScheduleSchema, 'The schedule'), ...problems },
    }),
    async (c) => c.json(scheduleJson(await scheduleFor(c, c.req.valid('param').id)), 200),
  );

  const action = (path: 'pause' | 'resume', summary: string) =>
    app.openapi(
      createRoute({
        method: 'post',
        path: `/v1/schedules/{id}/${path}`,
        tags: ['schedules'],
        summary,
        request: { params: IdParam },
        responses: { 200: json(ScheduleSchema, 'The schedule after the request'), ...problems },
      }),
      async (c) => {
        const s = await scheduleFor(c, c.req.valid('param').id);
        return c.json(scheduleJson(await rt.schedules[path](s.id)), 200);
      },
    );
  action('pause', 'Pause a schedule: no tick fires until it is resumed (idempotent)');
  action('resume', 'Resume a schedule from now: ticks missed while paused are not fired (idempotent)');

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/schedules/{id}',
      tags: ['schedules'],
      summary: 'Delete a schedule and its history of fires (the runs and sessions it made stay)',
      request: { params: IdParam },
      responses: { 204: { description: 'Deleted' }, ...problems },
    }),
    async (c) => {
      const s = await scheduleFor(c, c.req.valid('param').id);
      await rt.schedules.delete(s.id);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/schedules/{id}/fires',
      tags: ['schedules'],
      summary:
        'The history of fires, newest first: each tick, when it fired, its outcome (and why), its run and session',
      request: {
        params: IdParam,
        query: z.object({
          cursor: z
            .string()
            .regex(/^\d+$/, 'a tick in ms: the `next_cursor` of the previous page')
            .optional()
            .describe('The `next_cursor` of the previous page'),
          limit: z.coerce.number().int().min(1).max(1000).default(50),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(ScheduleFireSchema), next_cursor: z.string().nullable() }),
          'A page of fires',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const s = await scheduleFor(c, c.req.valid('param').id);
      const q = c.req.valid('query');
      const fires = await rt.schedules.fires(s.id, {
        limit: q.limit + 1,
        ...(q.cursor !== undefined ? { before: Number(q.cursor) } : {}),
      });
      const data = fires.slice(0, q.limit);
      return c.json(
        { data: data.map(fireJson), next_cursor: fires.length > q.limit ? String(data.at(-1)!.tick) : null },
        200,
      );
    },
  );
}
