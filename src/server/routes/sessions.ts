import type { ClientToolSpec } from '../../runs/index.ts';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { stream } from 'hono/streaming';
import { type SessionRecord, type StoreOps } from '../../store/index.ts';
import { recordEffect } from '../../runs/index.ts';
import { traceOfRequest } from '../../telemetry/trace-context.ts';
import { eventPosition, formatPosition, parsePosition } from '../../session/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, IdParam, json, problem, problems as problemsOf } from '../openapi.ts';
import { recordedMessage, runJsonFor, sessionFor, runsPage } from '../lookups.ts';
import { HttpProblem } from '../problems.ts';
import {
  CompactBody,
  CreateSessionBody,
  Cursor,
  EventSchema,
  ForkBody,
  JsonObjectSchema,
  LeafBody,
  RunSchema,
  cursorOf,
  SendMessageBody,
  SessionSchema,
  eventJson,
  sessionJson,
  toUserInput,
} from '../schemas.ts';

const problems = problemsOf('session');
/**
 * For routes that create a session: its Idempotency-Key is written in the creating transaction
 * (`within`), so a retry after the server failed between the effect and its answer finds the
 * session it created (`recorded`), instead of creating a second one.
 */
function sessionEffect(c: Context<AppEnv>) {
  const claim = c.get('idempotency');
  const recorded = c.get('recordedEffect');
  return {
    recorded: recorded === undefined ? undefined : (JSON.parse(recorded) as { session_id: string; leaf_id?: string }),
    within: claim
      ? {
          within: (tx: StoreOps, s: SessionRecord | string) =>
            recordEffect(tx, claim, { session_id: typeof s === 'string' ? s : s.id }),
        }
      : {},
  };
}

export function sessionRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions',
      tags: ['sessions'],
      summary: 'Create a session',
      request: body(CreateSessionBody),
      responses: { 201: json(SessionSchema, 'The new session'), ...problems },
    }),
    async (c) => {
      const b = c.req.valid('json');
      if (b.agent !== undefined && !rt.resolveAgent(b.agent.split('@')[0]!, b.agent.split('@')[1]))
        throw new HttpProblem('unknown_agent', `no agent ${b.agent} is registered`);
      const effect = sessionEffect(c);
      if (effect.recorded) return c.json(sessionJson(await sessionFor(ctx, c, effect.recorded.session_id)), 201);
      const s = await rt.sessions.create({
        tenant: c.get('tenant'),
        title: b.title ?? null,
        metadata: b.metadata ?? {},
        agent: b.agent ?? null,
        ...effect.within,
      });
      return c.json(sessionJson(s), 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions',
      tags: ['sessions'],
      summary: 'List sessions (cursor pagination)',
      request: { query: Cursor.extend({ include_archived: z.enum(['true', 'false']).optional() }) },
      responses: {
        200: json(z.object({ data: z.array(SessionSchema), next_cursor: z.string().nullable() }), 'A page of sessions'),
        ...problems,
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.sessions.list({
        tenant: c.get('tenant'),
        limit: q.limit + 1,
        ...(cursor ? { after: cursor } : {}),
        includeArchived: q.include_archived === 'true',
      });
      const data = page.slice(0, q.limit);
      return c.json({ data: data.map(sessionJson), next_cursor: page.length > q.limit ? data.at(-1)!.id : null }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}',
      tags: ['sessions'],
      summary: 'Get a session',
      request: { params: IdParam },
      responses: { 200: json(SessionSchema, 'The session'), ...problems },
    }),
    async (c) => c.json(sessionJson(await sessionFor(ctx, c, c.req.valid('param').id)), 200),
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/sessions/{id}',
      tags: ['sessions'],
      summary: 'Archive a session (its log stays readable)',
      request: { params: IdParam },
      responses: { 200: json(SessionSchema, 'The archived session'), ...problems },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      return c.json(sessionJson(s.archivedAt !== null ? s : await rt.sessions.archive(s.id)), 200);
    },
  );

  const TombstoneSchema = z
    .object({
      id: z.string(),
      tenant: z.string(),
      erased_at: z.string(),
      totals: z
        .object({ runs: z.number().int(), usage: JsonObjectSchema, cost: z.number() })
        .describe('What the session consumed, kept for billing'),
    })
    .openapi('Tombstone');
  const tombstoneJson = (s: SessionRecord) => ({
    id: s.id,
    tenant: s.tenant,
    erased_at: new Date(s.erasedAt!).toISOString(),
    totals: s.erasedTotals ?? { runs: 0, usage: {}, cost: 0 },
  });

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/erase',
      tags: ['sessions'],
      summary:
        'Erase a session: its runs are cancelled, its log, content and run payloads removed; a tombstone with its totals remains (410 Gone from then on)',
      request: { params: IdParam },
      responses: { 200: json(TombstoneSchema, 'The tombstone'), ...problems },
    }),
    async (c) => {
      // A session in the archive store is erased too: its tombstone here, its archive removed there.
      const s = await sessionFor(ctx, c, c.req.valid('param').id, { inArchive: true });
      // Audited (ADR-0041): who asked, when, a hash of the session id.
      await rt.erasure.eraseSession(s.id, { by: c.get('keyId') ?? 'operator', tenant: s.tenant });
      return c.json(tombstoneJson((await rt.sessions.find(s.id))!), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/erase',
      tags: ['sessions'],
      summary: "Erase every session of the caller's tenant (archived ones too)",
      request: {
        body: {
          content: {
            'application/json': {
              schema: z.object({
                confirm: z.string().describe("The tenant's name: what is erased cannot be brought back"),
              }),
            },
          },
          required: true,
        },
      },
      responses: {
        200: json(z.object({ tenant: z.string(), erased: z.number().int() }), 'How many sessions were erased'),
        ...problems,
      },
    }),
    async (c) => {
      const tenant = c.get('tenant');
      if (c.req.valid('json').confirm !== tenant)
        throw new HttpProblem(
          'validation',
          `to erase every session of tenant ${tenant}, send {"confirm": "${tenant}"}`,
        );
      const { sessionIds } = await rt.erasure.eraseTenantSessions(tenant, { by: c.get('keyId') ?? 'operator' });
      return c.json({ tenant, erased: sessionIds.length }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/messages',
      tags: ['sessions'],
      summary: 'Send a user message: creates a run, or follows if_busy when one is active',
      request: { params: IdParam, ...body(SendMessageBody) },
      responses: {
        202: json(
          z.object({
            outcome: z.enum(['created', 'enqueued', 'steered']),
            message: z.object({ id: z.string() }),
            run: RunSchema,
          }),
          'Accepted',
        ),
        409: problem('The session has an active run (if_busy: reject)'),
        429: problem(
          "Over the tenant's (or API key's) runs per minute (quota_exceeded, with Retry-After), or the key's request rate",
        ),
        ...problems,
      },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const b = c.req.valid('json');
      const keyId = c.get('keyId');
      const recorded = await recordedMessage(ctx, c);
      if (recorded) return c.json(recorded, 202);
      const agent = b.agent ?? s.agent ?? undefined;
      const idempotency = c.get('idempotency');
      // The run continues the request's trace (its traceparent, or the active span): see docs/observability.md.
      const trace = traceOfRequest(c.req.header('traceparent'), c.req.header('tracestate'));
      const r = await rt.sessions.send(s.id, toUserInput(b.content), {
        ...(idempotency ? { idempotency } : {}),
        ...(trace ? { trace } : {}),
        ifBusy: b.if_busy,
        ...(agent ? { agent } : {}),
        ...(b.timeout_ms !== undefined ? { timeoutMs: b.timeout_ms } : {}),
        ...(b.wait_timeout_ms !== undefined ? { waitTimeoutMs: b.wait_timeout_ms } : {}),
        ...(b.client_tools ? { clientTools: b.client_tools as ClientToolSpec[] } : {}),
        // The run records the key that made it: the key's own quotas apply to it (ADR-0043).
        ...(keyId ? { apiKey: keyId } : {}),
      });
      return c.json({ outcome: r.outcome, message: { id: r.message.id }, run: await runJsonFor(ctx, r.run) }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}/events',
      tags: ['views'],
      summary: 'Events after a seq, in order',
      request: {
        params: IdParam,
        query: z.object({
          cursor: z
            .string()
            .regex(/^\d+$/, 'a seq: the `next_cursor` of the previous page')
            .optional()
            .describe('The `next_cursor` of the previous page: the seq the page ended at'),
          after: z.coerce.number().int().min(0).optional().describe('The seq to read after (the same as `cursor`)'),
          limit: z.coerce.number().int().min(1).max(1000).default(100),
        }),
      },
      responses: {
        200: json(
          z.object({
            data: z.array(EventSchema),
            next_cursor: z.string().nullable(),
            next_after: z.number().int().nullable().describe('Deprecated: `next_cursor` as a number'),
          }),
          'A page of events',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const q = c.req.valid('query');
      // The cursor is an event's feed position (its seq), checked by the query schema.
      const after = parsePosition(cursorOf({ cursor: q.cursor, after: q.after?.toString() }))?.seq ?? 0;
      const events = await rt.sessions.events(s.id, { after, limit: q.limit });
      const next = events.length === q.limit ? events.at(-1)!.seq : null;
      return c.json(
        {
          data: events.map(eventJson),
          next_cursor: next === null ? null : formatPosition(eventPosition(next)),
          next_after: next,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}/transcript',
      tags: ['views'],
      summary: 'The transcript for people',
      request: { params: IdParam },
      responses: { 200: json(z.object({ items: z.array(JsonObjectSchema) }), 'Transcript'), ...problems },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      return c.json({ items: (await rt.sessions.transcript(s.id)) as unknown as Record<string, unknown>[] }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}/context',
      tags: ['views'],
      summary: 'The model context of the next request',
      request: { params: IdParam, query: z.object({ budget_tokens: z.coerce.number().int().positive().optional() }) },
      responses: { 200: json(JsonObjectSchema, 'Context'), ...problems },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const q = c.req.valid('query');
      const ctxt = await rt.sessions.context(
        s.id,
        q.budget_tokens !== undefined ? { budgetTokens: q.budget_tokens } : {},
      );
      return c.json(
        {
          messages: ctxt.messages,
          tokens: ctxt.tokens,
          last_input_tokens: ctxt.lastInputTokens,
          omitted: ctxt.omitted,
          as_of_seq: ctxt.asOfSeq,
          leaf_id: ctxt.leafId,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}/runs',
      tags: ['runs'],
      summary: 'Runs of a session, oldest first',
      request: { params: IdParam, query: Cursor },
      responses: {
        200: json(z.object({ data: z.array(RunSchema), next_cursor: z.string().nullable() }), 'A page of runs'),
        ...problems,
      },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const q = c.req.valid('query');
      const cursor = cursorOf(q);
      const page = await rt.runs.list({ sessionId: s.id, limit: q.limit + 1, ...(cursor ? { after: cursor } : {}) });
      return c.json(await runsPage(ctx, page, q.limit), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/fork',
      tags: ['branches'],
      summary: 'Fork at an entry: a new branch here, or a new session',
      request: { params: IdParam, ...body(ForkBody) },
      responses: { 201: json(z.object({ session_id: z.string(), leaf_id: z.string() }), 'Forked'), ...problems },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const b = c.req.valid('json');
      if (b.into === 'session' && b.summary !== undefined)
        throw new HttpProblem('validation', 'summary: only a fork into a branch takes a summary');
      const effect = sessionEffect(c);
      if (effect.recorded && b.into === 'session') {
        const copy = await sessionFor(ctx, c, effect.recorded.session_id);
        return c.json({ session_id: copy.id, leaf_id: copy.leafId! }, 201);
      }
      const r = await rt.sessions.fork(s.id, b.entry_id, {
        into: b.into,
        ...(b.summary !== undefined ? { summary: b.summary } : {}),
        ...(b.title !== undefined ? { title: b.title } : {}),
        ...(b.into === 'session' ? effect.within : {}),
      });
      return c.json({ session_id: r.sessionId, leaf_id: r.leafId }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/leaf',
      tags: ['branches'],
      summary: 'Switch the current branch: move the leaf to an entry',
      request: { params: IdParam, ...body(LeafBody) },
      responses: {
        200: json(z.object({ leaf_id: z.string().nullable(), seq: z.number().int() }), 'Moved'),
        ...problems,
      },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const e = await rt.sessions.switchBranch(s.id, c.req.valid('json').entry_id);
      return c.json({ leaf_id: c.req.valid('json').entry_id, seq: e.seq }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/compact',
      tags: ['branches'],
      summary: "Compact the session's context now (summarized by the session's agent model)",
      request: { params: IdParam, ...body(CompactBody, false) },
      responses: { 200: json(JsonObjectSchema, 'The outcome'), ...problems },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const b = (c.req.valid('json') as z.infer<typeof CompactBody> | undefined) ?? {};
      const agent =
        (s.agent ? rt.resolveAgent(s.agent.split('@')[0]!) : undefined) ?? rt.resolveAgent(rt.defaultAgent.name)!;
      const active = await rt.runs.active(s.id);
      if (active && active.status === 'running')
        throw new HttpProblem('run_busy', 'compaction between runs only: the session has a running run', {
          active_run_id: active.id,
        });
      // An Idempotency-Key is recorded with the compaction (a retry after a crash gets the same one).
      const claim = c.get('idempotency');
      const recorded = c.get('recordedEffect');
      if (recorded !== undefined) {
        const [e] = await rt.sessions.entries(s.id, [
          (JSON.parse(recorded) as { compaction_id: string }).compaction_id,
        ]);
        if (e?.type === 'compaction')
          return c.json(
            {
              compacted: true,
              event: eventJson(e),
              tokens_before: e.data.tokensBefore,
              tokens_after: e.data.tokensAfter,
            },
            200,
          );
      }
      const r = await rt.sessions.compact(s.id, {
        model: agent.model,
        ...(b.keep_recent_tokens !== undefined ? { keepRecentTokens: b.keep_recent_tokens } : {}),
        ...(claim
          ? { within: (tx: StoreOps, e: { id: string }) => recordEffect(tx, claim, { compaction_id: e.id }) }
          : {}),
      });
      if (!r.compacted) return c.json({ compacted: false, reason: r.reason }, 200);
      return c.json(
        {
          compacted: true,
          event: eventJson(r.event),
          tokens_before: r.event.data.tokensBefore,
          tokens_after: r.event.data.tokensAfter,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}/export',
      tags: ['sessions'],
      summary: 'Export the session as versioned JSONL',
      request: { params: IdParam },
      responses: {
        200: { description: 'JSONL, one record a line', content: { 'application/x-ndjson': { schema: z.string() } } },
        ...problems,
      },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      c.header('content-type', 'application/x-ndjson');
      c.header('content-disposition', `attachment; filename="${s.id}.jsonl"`);
      return stream(c, async (out) => {
        for await (const line of rt.sessions.export(s.id)) await out.write(`${line}\n`);
      }) as never;
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/import',
      tags: ['sessions'],
      summary: 'Import a JSONL export (validated line by line; all or nothing), under new ids unless ids=keep',
      request: {
        query: z.object({
          ids: z
            .enum(['new', 'keep'])
            .default('new')
            .describe(
              "`new`: a new session with new event ids, its origin the session it came from (imports anywhere, also where it was exported); `keep`: the export's ids (409 when they exist here)",
            ),
        }),
        body: { content: { 'application/x-ndjson': { schema: z.string() } }, required: true },
      },
      responses: {
        201: json(SessionSchema, 'The imported session'),
        422: problem('Refused, with line-numbered problems'),
        ...problems,
      },
    }),
    async (c) => {
      const text = await c.req.text();
      if (text.trim() === '') throw new HttpProblem('validation', 'the body is empty: send a session export (JSONL)');
      const effect = sessionEffect(c);
      if (effect.recorded) return c.json(sessionJson(await sessionFor(ctx, c, effect.recorded.session_id)), 201);
      const s = await rt.sessions.import(text, {
        tenant: c.get('tenant'),
        ids: c.req.valid('query').ids,
        ...effect.within,
      });
      return c.json(sessionJson(s), 201);
    },
  );
}
