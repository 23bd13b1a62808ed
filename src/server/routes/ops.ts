import type { OpenAPIHono } from '@hono/zod-openapi';
import type { AppContext, AppEnv } from '../app.ts';
import { problemResponse } from '../problems.ts';

/** Liveness, readiness and metrics: no API key needed, so probes and scrapers just work. */
export function opsRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  ctx.rt.sessions.log.subscribeAll((_s, item) => {
    if (item.kind === 'event') ctx.metrics.eventsPublished++;
  });

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    try {
      await ctx.store.listSessions({ limit: 1 });
      return c.json({ status: 'ready' });
    } catch (e) {
      return problemResponse(c, 'internal', `the store is not reachable: ${(e as Error).message}`);
    }
  });

  app.get('/metrics', async (c) => {
    const statuses = ['queued', 'running', 'waiting_approval', 'waiting_for_user', 'paused'] as const;
    const counts = await Promise.all(statuses.map(async (s) => (await ctx.store.listRuns({ statuses: [s], limit: 100_000 })).length));
    const body = ctx.metrics.render({
      keel_runs: statuses.map((s, i) => ({ help: 'Non-terminal runs by status.', labels: `status="${s}"`, value: counts[i]! })),
      keel_runs_executing: [{ help: 'Runs this process is executing now.', value: ctx.rt.executions.size }],
      process_resident_memory_bytes: [{ help: 'Resident memory of this process.', value: process.memoryUsage().rss }],
    });
    return c.body(body, 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
  });
}
