/**
 * The HTTP app: its context (context.ts), middleware (middleware.ts) and routes (routes/), composed.
 * Nothing else lives here.
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import { instrumentRuntime } from '../monitoring/index.ts';
import { ApiKeyCache, authMiddleware, FailedAuthLimiter } from './auth.ts';
import { clientAddressOf } from './client-address.ts';
import type { AppContext, AppEnv, ServerOptions } from './context.ts';
import {
  bodyLimits,
  errorHandler,
  exceptCallbacks,
  idempotency,
  jsonBodies,
  jsonDepthLimit,
  notFound,
  requestLog,
  validationHook,
} from './middleware.ts';
import { refuseNulParams } from './nul-guard.ts';
import { knownQueryParams } from './query-params.ts';
import { rateLimitMiddleware } from './rate-limit.ts';
import { blobRoutes } from './routes/blobs.ts';
import { chatRoutes } from './routes/chat.ts';
import { compareRoutes } from './routes/compare.ts';
import { rerunRoutes } from './routes/reruns.ts';
import { openAiResponsesRoutes } from './protocols/openai/responses.ts';
import { aguiRoutes } from './protocols/agui/agui.ts';
import { a2aRoutes } from './protocols/a2a/a2a.ts';
import { mcpRoutes } from './protocols/mcp/routes.ts';
import { datasetRoutes } from './routes/datasets.ts';
import { erasureRoutes } from './routes/erasures.ts';
import { experimentRoutes } from './routes/experiments.ts';
import { inspectorRoutes } from './routes/inspector.ts';
import { opsRoutes } from './routes/ops.ts';
import { overviewRoutes } from './routes/overview.ts';
import { retentionRoutes } from './routes/retention.ts';
import { runRoutes } from './routes/runs.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { streamRoutes } from './routes/streams.ts';
import { tenantRoutes } from './routes/tenants.ts';
import { usageRoutes } from './routes/usage.ts';
import { waitRoutes } from './routes/waits.ts';
import { webhookRoutes } from './routes/webhooks.ts';

export type { AppContext, AppEnv, IdempotencyEnv, ServerOptions } from './context.ts';
export { jsonDepth, MAX_JSON_DEPTH } from './middleware.ts';

export function createApp(options: ServerOptions): { app: OpenAPIHono<AppEnv>; ctx: AppContext; close(): void } {
  const rt = options.runtime;
  const telemetry = instrumentRuntime(rt, options.logger ? { logger: options.logger } : {});
  const ctx: AppContext = {
    rt,
    releaseRecentDeltas: rt.sessions.log.keepRecentDeltas(),
    metrics: telemetry.metrics,
    logger: telemetry.logger,
    keys: new ApiKeyCache({ keys: { find: rt.apiKeys.find } }),
    authFailures: new FailedAuthLimiter({ perMinute: options.authFailuresPerMinute ?? 30 }),
    clientAddress: clientAddressOf(options.trustedProxies),
    options: {
      bodyLimitBytes: 1 << 20,
      importLimitBytes: 64 << 20,
      heartbeatMs: 15_000,
      sseQueueLimit: 5000,
      rateLimitPerMinute: 0,
      cancelGraceMs: 5000,
      idempotencyTtlMs: 24 * 3600_000,
      authFailuresPerMinute: 30,
      trustedProxies: [],
      ...options,
    },
  };
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  app.onError(errorHandler(ctx));
  app.notFound(notFound(app));
  app.use('*', requestLog(ctx));
  opsRoutes(app, ctx);

  // One authentication and one request budget per API key for every protocol the server speaks:
  // a key's requests to /v1, /openai/v1, /mcp, /a2a and /agui spend the same bucket.
  const authenticate = authMiddleware(ctx.keys, ctx.authFailures, options.auth, ctx.clientAddress);
  // Per API key; per client address for requests without one (callback URLs, auth off).
  const rateLimit = rateLimitMiddleware(ctx.options.rateLimitPerMinute, ctx.clientAddress);
  // Callback URLs (ADR-0015) carry their own credential, the token: no API key.
  app.use('/v1/*', exceptCallbacks(authenticate));
  app.use('/v1/*', rateLimit);
  app.use('/v1/*', knownQueryParams(app));
  app.use('/v1/*', refuseNulParams());
  app.use('/v1/*', jsonBodies());
  app.use('/v1/*', bodyLimits(ctx));
  app.use('/v1/*', jsonDepthLimit());
  app.use('/v1/*', idempotency(rt.idempotency, ctx.options.idempotencyTtlMs));
  // The OpenAI-compatible routes take the same API keys, limits and body checks (ADR-0038).
  app.use('/openai/v1/*', authenticate);
  app.use('/openai/v1/*', rateLimit);
  app.use('/openai/v1/*', refuseNulParams());
  app.use('/openai/v1/*', bodyLimits(ctx));
  app.use('/openai/v1/*', jsonDepthLimit());
  // So does the MCP endpoint (its errors in JSON-RPC's shape: protocols/mcp/mcp-errors.ts).
  app.use('/mcp', authenticate);
  app.use('/mcp', rateLimit);
  app.use('/mcp', bodyLimits(ctx));
  app.use('/mcp', jsonDepthLimit());
  // And the A2A agent cards and JSON-RPC endpoints.
  for (const path of ['/a2a/*', '/.well-known/agent-card.json']) {
    app.use(path, authenticate);
    app.use(path, rateLimit);
  }
  app.use('/a2a/*', refuseNulParams());
  app.use('/a2a/*', bodyLimits(ctx));
  app.use('/a2a/*', jsonDepthLimit());
  // And the AG-UI endpoints (their errors are problem+json, as Keel's own).
  app.use('/agui/*', authenticate);
  app.use('/agui/*', rateLimit);
  app.use('/agui/*', refuseNulParams());
  app.use('/agui/*', bodyLimits(ctx));
  app.use('/agui/*', jsonDepthLimit());

  sessionRoutes(app, ctx);
  blobRoutes(app, ctx);
  erasureRoutes(app, ctx);
  usageRoutes(app, ctx);
  tenantRoutes(app, ctx);
  webhookRoutes(app, ctx);
  scheduleRoutes(app, ctx);
  retentionRoutes(app, ctx);
  runRoutes(app, ctx);
  compareRoutes(app, ctx);
  rerunRoutes(app, ctx);
  datasetRoutes(app, ctx);
  experimentRoutes(app, ctx);
  waitRoutes(app, ctx);
  streamRoutes(app, ctx);
  chatRoutes(app, ctx);
  openAiResponsesRoutes(app, ctx);
  aguiRoutes(app, ctx);
  a2aRoutes(app, ctx);
  mcpRoutes(app, ctx);
  overviewRoutes(app, ctx);
  inspectorRoutes(app);

  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'Keel API',
      version: options.version,
      description:
        'Durable agent runtime: sessions, runs, resumable streams. Errors are RFC 9457 problem+json with a stable `type`.',
    },
    security: options.auth === 'required' ? [{ bearer: [] }] : [],
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key from `keel keys create`',
  });

  return {
    app,
    ctx,
    close: () => {
      ctx.releaseRecentDeltas();
      telemetry.stop();
    },
  };
}
