import { z, type OpenAPIHono } from '@hono/zod-openapi';
import type { AppContext, AppEnv } from '../context.ts';
import { IdParam } from '../openapi.ts';
import { runFor, sessionFor } from '../lookups.ts';
import { HttpProblem } from '../problems.ts';
import { parsePosition } from '../../session/index.ts';
import { sseStream } from '../sse.ts';

/**
 * Resumable SSE streams: `Last-Event-ID` (or `?after=`) gives where to resume, `seq` or `seq.n`.
 * Durable events arrive as default `message` events with their seq as id; deltas as `delta`
 * events with id `seq.n`; a run stream ends with an `end` event. Comments keep idle streams alive.
 */
export function streamRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const cursorOf = (lastEventId: string | undefined, after: string | undefined) => {
    const raw = lastEventId ?? after;
    const cursor = parsePosition(raw);
    if (raw !== undefined && raw !== '' && !cursor)
      throw new HttpProblem('validation', `cannot resume from ${JSON.stringify(raw)}: expected a seq like 12 or 12.3`);
    return cursor;
  };
  const lifecycle = {
    onOpen: () => {
      ctx.metrics.sseConnections.inc();
      ctx.metrics.sseConnectionsTotal.inc();
    },
    onClose: () => {
      ctx.metrics.sseConnections.dec();
    },
    onDrop: () => ctx.metrics.sseDropped.inc(),
  };

  app.get('/v1/sessions/:id/stream', async (c) => {
    const s = await sessionFor(ctx, c, c.req.param('id'));
    const cursor = cursorOf(c.req.header('last-event-id'), c.req.query('after'));
    return sseStream(c, cursor, {
      log: ctx.rt.sessions.log,
      sessionId: s.id,
      heartbeatMs: ctx.options.heartbeatMs,
      queueLimit: ctx.options.sseQueueLimit,
      ...lifecycle,
    });
  });

  app.get('/v1/runs/:id/stream', async (c) => {
    const run = await runFor(ctx, c, c.req.param('id'));
    const cursor = cursorOf(c.req.header('last-event-id'), c.req.query('after'));
    return sseStream(c, cursor, {
      log: ctx.rt.sessions.log,
      sessionId: run.sessionId,
      run: { id: run.id, status: async () => (await ctx.rt.runs.get(run.id)).status },
      heartbeatMs: ctx.options.heartbeatMs,
      queueLimit: ctx.options.sseQueueLimit,
      ...lifecycle,
    });
  });

  for (const path of ['/v1/sessions/:id/stream', '/v1/runs/:id/stream'] as const) {
    app.openAPIRegistry.registerPath({
      method: 'get',
      path: path.replace(':id', '{id}'),
      tags: ['streams'],
      summary: path.startsWith('/v1/runs')
        ? 'SSE stream of a run; ends with an `end` event'
        : 'SSE stream of a session',
      // OpenAPI requires a path parameter for every template expression in the path.
      request: {
        params: IdParam,
        query: z.object({
          after: z.string().optional().describe('Resume after this id (seq or seq.n); Last-Event-ID wins'),
        }),
        headers: z.object({ 'last-event-id': z.string().optional() }),
      },
      responses: {
        200: {
          description: 'text/event-stream: durable events (id = seq) and deltas (event `delta`, id = seq.n)',
          content: { 'text/event-stream': { schema: { type: 'string' } } },
        },
      },
    });
  }
}
