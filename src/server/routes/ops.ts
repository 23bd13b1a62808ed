import { timingSafeEqual } from 'node:crypto';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { RUN_STATUSES } from '../../store/index.ts';
import type { AppContext, AppEnv } from '../app.ts';
import { authenticate, clientAddress } from '../auth.ts';
import { HttpProblem, problemResponse } from '../problems.ts';

/**
 * Liveness and readiness need no API key, so probes just work. `/metrics` does when keys exist:
 * its own bearer token (`metricsToken`) if one is set, else any API key; with auth off, nothing.
 */
export function opsRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  ctx.rt.sessions.log.subscribeAll((_s, item) => {
    if (item.kind === 'event') ctx.metrics.eventsPublished++;
  });

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    try {
      await ctx.rt.ping();
      return c.json({ status: 'ready' });
    } catch (e) {
      return problemResponse(c, 'internal', `the store is not reachable: ${(e as Error).message}`);
    }
  });

  app.get('/metrics', async (c) => {
    await allowedToScrape(c, ctx);
    // Kept by the store as runs move: a few rows, however many runs there are.
    const counts = await ctx.rt.runs.countByStatus();
    const body = ctx.metrics.render({
      keel_runs: RUN_STATUSES.map((s) => ({ help: 'Runs by status (terminal statuses count every run that ended so).', labels: `status="${s}"`, value: counts[s] })),
      keel_runs_executing: [{ help: 'Runs this process is executing now.', value: ctx.rt.executions.size }],
      process_resident_memory_bytes: [{ help: 'Resident memory of this process.', value: process.memoryUsage().rss }],
    });
    return c.body(body, 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
  });
}

async function allowedToScrape(c: Context<AppEnv>, ctx: AppContext): Promise<void> {
  const token = ctx.options.metricsToken;
  if (token !== undefined && token !== '') {
    ctx.authFailures.check(clientAddress(c));
    const sent = /^Bearer\s+(\S+)$/i.exec(c.req.header('authorization') ?? '')?.[1] ?? '';
    const a = Buffer.from(sent);
    const b = Buffer.from(token);
    if (a.length !== b.length || !timingSafeEqual(a, b)) {
      ctx.authFailures.failed(clientAddress(c));
      throw new HttpProblem('unauthorized', 'send the metrics token as "Authorization: Bearer <token>"');
    }
    return;
  }
  if (ctx.options.auth === 'required') await authenticate(c, ctx.keys, ctx.authFailures);
}
