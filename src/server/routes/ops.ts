import { timingSafeEqual } from 'node:crypto';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { AppContext, AppEnv } from '../context.ts';
import { authenticate } from '../auth.ts';
import { HttpProblem, problemResponse, STORE_UNAVAILABLE_RETRY_AFTER_S } from '../problems.ts';
import { isStoreUnavailable } from '../../store/index.ts';

/**
 * Liveness and readiness need no API key, so probes just work. `/metrics` does when keys exist:
 * its own bearer token (`metricsToken`) if one is set, else any API key; with auth off, nothing.
 */
export function opsRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  // Not ready while the store does not answer: 503 store_unavailable with Retry-After, saying why
  // (ADR-0045), so a load balancer sends the traffic elsewhere until the database is back.
  app.get('/readyz', async (c) => {
    try {
      await ctx.rt.ping();
      return c.json({ status: 'ready' });
    } catch (e) {
      c.header('retry-after', String(STORE_UNAVAILABLE_RETRY_AFTER_S));
      return problemResponse(c, 'store_unavailable', `the store is not reachable: ${(e as Error).message}`, {
        reason: isStoreUnavailable(e) ? 'database_unreachable' : 'store_failed',
        retry_after: STORE_UNAVAILABLE_RETRY_AFTER_S,
      });
    }
  });

  app.get('/metrics', async (c) => {
    await allowedToScrape(c, ctx);
    // Runs by status are kept by the store as runs move (a few rows, however many runs there
    // are); the rest is counted in memory as it happens.
    const { body, contentType } = await ctx.metrics.render();
    return c.body(body, 200, { 'content-type': contentType });
  });
}

async function allowedToScrape(c: Context<AppEnv>, ctx: AppContext): Promise<void> {
  const token = ctx.options.metricsToken;
  if (token !== undefined && token !== '') {
    ctx.authFailures.check(ctx.clientAddress(c));
    const sent = /^Bearer\s+(\S+)$/i.exec(c.req.header('authorization') ?? '')?.[1] ?? '';
    const a = Buffer.from(sent);
    const b = Buffer.from(token);
    if (a.length !== b.length || !timingSafeEqual(a, b)) {
      ctx.authFailures.failed(ctx.clientAddress(c));
      throw new HttpProblem('unauthorized', 'send the metrics token as "Authorization: Bearer <token>"');
    }
    return;
  }
  if (ctx.options.auth === 'required') await authenticate(c, ctx.keys, ctx.authFailures, ctx.clientAddress);
}
