import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { WAITING_FOR_PEOPLE } from '../../runs/lifecycle/run-status.ts';
import type { RunRecord, SessionRecord } from '../../store/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { runJsonFor, sessionFor } from '../lookups.ts';
import { IdParam, json, problems as problemsOf } from '../openapi.ts';
import { Cursor, cursorOf, RunSchema, SessionSchema, sessionJson } from '../schemas.ts';

/**
 * Views across a tenant's sessions, and the replay check, for clients that watch (the inspector
 * first): which runs wait for a person (the inbox), sessions with their latest run and cost
 * (searchable), and whether a session's log explains every model request it recorded.
 */
const problems = problemsOf('session');
/** Sessions a summaries request looks at before it answers with what it found so far (and a cursor). */
const SCAN_LIMIT = 2000;

const SessionSummarySchema = z
  .object({
    session: SessionSchema,
    runs: z.number().int().describe('How many runs the session has had'),
    cost: z.number().describe('The cost of its runs, summed'),
    usage: z.object({ input_tokens: z.number(), output_tokens: z.number() }).describe('Tokens of its runs, summed'),
    latest_run: z.object({ id: z.string(), status: RunSchema.shape.status, created_at: z.string() }).nullable(),
  })
  .openapi('SessionSummary');

const InboxItemSchema = z
  .object({ session: z.object({ id: z.string(), title: z.string().nullable() }), run: RunSchema })
  .openapi('InboxItem');

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

/** Whether the session's title, id or metadata contains `q` (case-insensitive). */
function matches(s: SessionRecord, q: string): boolean {
  const needle = q.toLowerCase();
  return [s.id, s.title ?? '', JSON.stringify(s.metadata)].some((h) => h.toLowerCase().includes(needle));
}

export function overviewRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const { rt } = ctx;

  async function summary(s: SessionRecord) {
    const runs: RunRecord[] = [];
    for (let after: string | undefined; ;) {
      const page = await rt.runs.list({ sessionId: s.id, limit: 1000, ...(after ? { after } : {}) });
      runs.push(...page);
      if (page.length < 1000) break;
      after = page.at(-1)!.id;
    }
    const latest = runs.reduce<RunRecord | undefined>(
      (a, r) => (!a || r.createdAt > a.createdAt || (r.createdAt === a.createdAt && r.id > a.id) ? r : a),
      undefined,
    );
    const usage = (r: RunRecord, k: string) => num((r.usage as Record<string, unknown>)[k]);
    return {
      session: sessionJson(s),
      runs: runs.length,
      cost: runs.reduce((t, r) => t + num(r.cost), 0),
      usage: {
        input_tokens: runs.reduce((t, r) => t + usage(r, 'inputTokens'), 0),
        output_tokens: runs.reduce((t, r) => t + usage(r, 'outputTokens'), 0),
      },
      latest_run: latest
        ? { id: latest.id, status: latest.status, created_at: new Date(latest.createdAt).toISOString() }
        : null,
    };
  }

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/session-summaries',
      tags: ['views'],
      summary: 'Sessions with their latest run, run count, tokens and cost; `q` searches title, id and metadata',
      description: `Oldest first, paged like every list. With \`q\`, a request looks at up to ${SCAN_LIMIT} sessions: a page may hold fewer than \`limit\` matches and still have a \`next_cursor\`.`,
      request: {
        query: z.object({
          q: z
            .string()
            .max(200)
            .optional()
            .describe('Case-insensitive text to find in the title, id or metadata (as JSON)'),
          cursor: z.string().optional().describe('The `next_cursor` of the previous page'),
          after: z.string().optional().describe('Deprecated: the older name of `cursor`'),
          limit: z.coerce.number().int().min(1).max(200).default(25),
          include_archived: z.enum(['true', 'false']).optional(),
        }),
      },
      responses: {
        200: json(
          z.object({ data: z.array(SessionSummarySchema), next_cursor: z.string().nullable() }),
          'A page of session summaries',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const text = q.q?.trim() ?? '';
      let cursor = cursorOf(q);
      const found: SessionRecord[] = [];
      let scanned = 0;
      let more = false;
      scan: while (scanned < SCAN_LIMIT) {
        const want = Math.min(text === '' ? q.limit : 200, SCAN_LIMIT - scanned);
        const page = await rt.sessions.list({
          tenant: c.get('tenant'),
          limit: want + 1,
          ...(cursor ? { after: cursor } : {}),
          includeArchived: q.include_archived === 'true',
        });
        for (const s of page.slice(0, want)) {
          if (found.length === q.limit) {
            more = true;
            break scan;
          }
          scanned++;
          cursor = s.id;
          if (text === '' || matches(s, text)) found.push(s);
        }
        more = page.length > want;
        if (!more || found.length === q.limit) break;
      }
      const data = await Promise.all(found.map(summary));
      return c.json({ data, next_cursor: more && cursor !== undefined ? cursor : null }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/inbox',
      tags: ['runs'],
      summary:
        "Every run of the caller's tenant that waits for a person: an approval or an answer, oldest first (cursor pagination)",
      request: { query: Cursor },
      responses: {
        200: json(
          z.object({ data: z.array(InboxItemSchema), next_cursor: z.string().nullable() }),
          'A page of waiting runs',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const after = cursorOf(q);
      // The tenant's waiting runs, from the store's index of them by tenant: another tenant's
      // waiting runs are never read, however many there are.
      const page = await rt.runs.list({
        tenant: c.get('tenant'),
        statuses: WAITING_FOR_PEOPLE,
        limit: q.limit + 1,
        ...(after ? { after } : {}),
      });
      const runs = page.slice(0, q.limit);
      const sessions = new Map<string, SessionRecord | undefined>();
      const data = [];
      for (const run of runs) {
        if (!sessions.has(run.sessionId)) sessions.set(run.sessionId, await rt.sessions.find(run.sessionId));
        const s = sessions.get(run.sessionId);
        // Never an erased session's runs (erasure ends them first: none should be waiting).
        if (!s || s.erasedAt !== null) continue;
        data.push({ session: { id: s.id, title: s.title }, run: await runJsonFor(ctx, run) });
      }
      return c.json({ data, next_cursor: page.length > q.limit ? runs.at(-1)!.id : null }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/sessions/{id}/replay-check',
      tags: ['views'],
      summary:
        'The replay check: does the log alone explain every model request the session recorded? (as `keel replay --verify`)',
      request: { params: IdParam },
      responses: {
        200: json(
          z.object({
            ok: z.boolean(),
            events: z.number().int(),
            requests: z.number().int(),
            mismatches: z.array(
              z.object({ seq: z.number().int(), message_id: z.string(), kind: z.string(), detail: z.string() }),
            ),
          }),
          'The verdict',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const s = await sessionFor(ctx, c, c.req.valid('param').id);
      const r = await rt.sessions.verifyReplay(s.id);
      return c.json(
        {
          ok: r.ok,
          events: r.events,
          requests: r.requests,
          mismatches: r.mismatches.map((m) => ({
            seq: m.seq,
            message_id: m.messageId,
            kind: m.kind,
            detail: m.detail,
          })),
        },
        200,
      );
    },
  );
}
