import { createHash } from 'node:crypto';
import { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { IdempotencyClaim, Runtime } from '../runs/index.ts';
import { exceptCallbacks, waitRoutes } from './routes/waits.ts';
import { ApiKeyCache, authMiddleware, FailedAuthLimiter, type AuthEnv } from './auth.ts';
import { clientAddressOf, type ClientAddress } from './client-address.ts';
import { rateLimitMiddleware } from './rate-limit.ts';
import { instrumentRuntime, type KeelMetrics, type Logger } from '../monitoring/index.ts';
import { HttpProblem, problemResponse, toProblem } from './problems.ts';
import { knownQueryParams } from './query-params.ts';
import { refuseNulParams } from './nul-guard.ts';
import { chatRoutes } from './routes/chat.ts';
import { inspectorRoutes } from './routes/inspector.ts';
import { opsRoutes } from './routes/ops.ts';
import { overviewRoutes } from './routes/overview.ts';
import { runRoutes } from './routes/runs.ts';
import { scheduleRoutes } from './routes/schedules.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { streamRoutes } from './routes/streams.ts';
import { usageRoutes } from './routes/usage.ts';
import { webhookRoutes } from './routes/webhooks.ts';

export interface ServerOptions {
  runtime: Runtime;
  /** `required`: every request needs an API key; `off`: one `default` tenant (loopback only). */
  auth: 'required' | 'off';
  version: string;
  bodyLimitBytes?: number;
  importLimitBytes?: number;
  heartbeatMs?: number;
  sseQueueLimit?: number;
  /** Requests a minute per API key, unless the key sets its own (0: no limit). */
  rateLimitPerMinute?: number;
  /** How long a cancel waits for the worker that holds the run before cancelling it here. */
  cancelGraceMs?: number;
  /**
   * What `/metrics` asks for: this bearer token when set; otherwise an API key when keys are
   * required; nothing when auth is off (loopback).
   */
  metricsToken?: string;
  /** How long an Idempotency-Key is remembered (default 24 h); older records are pruned. */
  idempotencyTtlMs?: number;
  /** Failed authentications a client address may make in a minute before it is refused (429). Default 30. */
  authFailuresPerMinute?: number;
  /**
   * Addresses of the reverse proxies in front of the server (exact addresses, e.g. `10.0.0.5`).
   * From one of them, the client is the last address in X-Forwarded-For that is not a trusted
   * proxy; from anyone else, X-Forwarded-For is ignored. Default: none (the socket's peer).
   */
  trustedProxies?: readonly string[];
  /** Structured logs (pino): requests, runs, failures. Default: none. */
  logger?: Logger;
}

export type AppEnv = { Variables: AuthEnv['Variables'] & IdempotencyEnv['Variables'] };

/**
 * What the idempotency middleware tells a route that records its effect in its own transaction:
 * the key to record, and the effect an earlier attempt already recorded (status 0) if there is one.
 */
type IdempotencyEnv = { Variables: { idempotency?: IdempotencyClaim; recordedEffect?: string } };

const patterns = new Map<string, RegExp>();
/** `/v1/runs/:id/approvals/:approval_id` as a regular expression over request paths. */
function routePattern(path: string): RegExp {
  let re = patterns.get(path);
  if (!re) {
    re = new RegExp(
      `^${path
        .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
        .replace(/\\\*$/, '.*')
        .replace(/:[A-Za-z_]+/g, '[^/]+')}$`,
    );
    patterns.set(path, re);
  }
  return re;
}

/** What the routes work with: the runtime (never the store: the runtime is the server's interface to everything durable). */
export interface AppContext {
  rt: Runtime;
  /** Releases the log's recent deltas (kept while the server runs, for streams that start mid-message). */
  releaseRecentDeltas: () => void;
  /** Prometheus metrics of this process (`/metrics`), and its logger. */
  metrics: KeelMetrics;
  logger: Logger;
  /** API keys looked up recently, and failed authentications by client address. */
  keys: ApiKeyCache;
  authFailures: FailedAuthLimiter;
  /** Who a request comes from, for the limits per address (see client-address.ts). */
  clientAddress: ClientAddress;
  options: Required<Omit<ServerOptions, 'runtime' | 'metricsToken' | 'logger'>> &
    Pick<ServerOptions, 'runtime' | 'metricsToken' | 'logger'>;
}

/** Replays the first response to a POST with the same Idempotency-Key and body; refuses another body. */
function idempotency(store: Runtime['idempotency'], ttlMs: number): MiddlewareHandler<AppEnv> {
  const inFlight = new Set<string>();
  let prunedAt = 0;
  return async (c, next) => {
    const key = c.req.header('idempotency-key');
    if (c.req.method !== 'POST' || key === undefined) return next();
    if (key.length === 0 || key.length > 255)
      throw new HttpProblem('validation', 'Idempotency-Key must be 1-255 characters');
    const tenant = c.get('tenant');
    const body = await c.req.text();
    const fingerprint = createHash('sha256')
      .update(`${c.req.method} ${new URL(c.req.url).pathname}\n${body}`)
      .digest('hex');
    // Records older than the TTL are forgotten: pruned (at most once a minute, and whenever one is met).
    const now = Date.now();
    let seen = await store.get(tenant, key);
    if ((seen && seen.createdAt < now - ttlMs) || now - prunedAt > 60_000) {
      prunedAt = now;
      await store.prune(now - ttlMs);
      if (seen && seen.createdAt < now - ttlMs) seen = undefined;
    }
    if (seen) {
      if (seen.fingerprint !== fingerprint) {
        throw new HttpProblem(
          'idempotency_mismatch',
          `Idempotency-Key ${JSON.stringify(key)} was first used for a different request`,
        );
      }
      if (seen.status !== 0) {
        const type = seen.status >= 400 ? 'application/problem+json' : 'application/json';
        return c.body(seen.body, seen.status as ContentfulStatusCode, {
          'content-type': type,
          'idempotent-replayed': 'true',
        });
      }
    }
    const slot = `${tenant}\u0000${key}`;
    if (inFlight.has(slot))
      throw new HttpProblem(
        'idempotency_in_progress',
        `a request with Idempotency-Key ${JSON.stringify(key)} is still being processed`,
      );
    inFlight.add(slot);
    // The effect committed but its response was never recorded (the server failed in between):
    // the route answers from the recorded effect instead of doing it again.
    if (seen) c.set('recordedEffect', seen.body);
    c.set('idempotency', { tenant, key, fingerprint });
    try {
      await next();
      const type = c.res.headers.get('content-type') ?? '';
      // Only definite JSON answers are remembered: a server error may succeed when retried.
      // Nor is a refusal because another request holds the key (onError clears the claim).
      if (c.res.status < 500 && /json/.test(type) && c.get('idempotency') !== undefined) {
        await store.put({
          tenant,
          key,
          fingerprint,
          status: c.res.status,
          body: await c.res.clone().text(),
          createdAt: Date.now(),
        });
      }
    } finally {
      inFlight.delete(slot);
    }
  };
}

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
  const app = new OpenAPIHono<AppEnv>({
    // Validation failures of params, query and body become problem+json with the field errors.
    defaultHook: (result, c) => {
      if (!result.success) {
        const issues = result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
        return problemResponse(c, 'validation', issues.map((i) => `${i.path || '(body)'}: ${i.message}`).join('; '), {
          errors: issues,
        });
      }
      return undefined;
    },
  });

  app.onError((err, c) => {
    const p = toProblem(err);
    if (p.type === 'internal') {
      // Logged (with its stack) where operators look; a library user without a logger still hears of it.
      if (ctx.logger.isLevelEnabled('error'))
        ctx.logger.error({ method: c.req.method, path: c.req.path, err }, 'internal error');
      else process.emitWarning(`keel server: ${c.req.method} ${c.req.path}: ${err.stack ?? err.message}`);
    }
    if (p.type === 'rate_limited') c.header('retry-after', String(p.extensions.retry_after ?? 1));
    // Another request holds this Idempotency-Key: its record stands, this refusal is not recorded.
    if (p.type === 'idempotency_in_progress') c.set('idempotency', undefined);
    return problemResponse(c, p.type, p.detail, p.extensions);
  });
  app.notFound((c) => {
    // A known path with another method: 405 and the methods it takes.
    const allowed = [
      ...new Set(
        app.routes.filter((r) => r.method !== 'ALL' && routePattern(r.path).test(c.req.path)).map((r) => r.method),
      ),
    ];
    if (allowed.length > 0) {
      c.header('allow', allowed.join(', '));
      return problemResponse(
        c,
        'method_not_allowed',
        `${c.req.path} takes ${allowed.join(', ')}, not ${c.req.method}`,
        { allow: allowed },
      );
    }
    return problemResponse(c, 'not_found', `no route for ${c.req.method} ${c.req.path}`);
  });

  app.use('*', async (c, next) => {
    const t0 = performance.now();
    await next();
    const seconds = (performance.now() - t0) / 1000;
    const route = c.req.routePath;
    ctx.metrics.httpRequests.inc({ method: c.req.method, route, status: String(c.res.status) });
    ctx.metrics.httpDuration.observe({ method: c.req.method, route }, seconds);
    if (ctx.logger.isLevelEnabled('info')) {
      const traceId = /^[\da-f]{2}-([\da-f]{32})-/.exec(c.req.header('traceparent') ?? '')?.[1];
      const line = {
        method: c.req.method,
        path: c.req.path,
        status: c.res.status,
        ms: Math.round(seconds * 10_000) / 10,
        ...(traceId ? { trace_id: traceId } : {}),
      };
      if (c.res.status >= 500) ctx.logger.error(line, 'request failed');
      else ctx.logger.info(line, 'request');
    }
  });
  opsRoutes(app, ctx);

  // Callback URLs (ADR-0015) carry their own credential, the token: no API key.
  app.use('/v1/*', exceptCallbacks(authMiddleware(ctx.keys, ctx.authFailures, options.auth, ctx.clientAddress)));
  // Per API key; per client address for requests without one (callback URLs, auth off).
  app.use('/v1/*', rateLimitMiddleware(ctx.options.rateLimitPerMinute, ctx.clientAddress));
  app.use('/v1/*', knownQueryParams(app));
  app.use('/v1/*', refuseNulParams());
  app.use('/v1/*', async (c, next) => {
    if (c.req.method === 'POST') {
      const type = c.req.header('content-type') ?? '';
      const isImport = c.req.path === '/v1/sessions/import';
      const length = Number(c.req.header('content-length') ?? '0');
      // A chunked body has no content-length: it is a body all the same.
      const hasBody = length > 0 || c.req.header('transfer-encoding') !== undefined;
      if (hasBody && !isImport && !/^application\/json\b/i.test(type))
        throw new HttpProblem(
          'unsupported_media_type',
          `send JSON with content-type application/json, not ${type || 'nothing'}`,
        );
    }
    return next();
  });
  app.use('/v1/*', async (c, next) => {
    const limit = c.req.path === '/v1/sessions/import' ? ctx.options.importLimitBytes : ctx.options.bodyLimitBytes;
    return bodyLimit({
      maxSize: limit,
      onError: (c2) => {
        // The rest of the body is not read: the connection cannot carry another request after it.
        const r = problemResponse(c2, 'payload_too_large', `the body is larger than ${limit} bytes`, {
          limit_bytes: limit,
        });
        r.headers.set('connection', 'close');
        return r;
      },
    })(c, next);
  });
  app.use('/v1/*', async (c, next) => {
    // A JSON body nested deeper than any request needs is refused before anything recurses into it.
    if (
      c.req.method === 'POST' &&
      c.req.path !== '/v1/sessions/import' &&
      /^application\/json\b/i.test(c.req.header('content-type') ?? '')
    ) {
      const depth = jsonDepth(await c.req.text());
      if (depth > MAX_JSON_DEPTH)
        throw new HttpProblem(
          'validation',
          `the body is nested ${depth} levels deep; at most ${MAX_JSON_DEPTH} are allowed`,
          { max_depth: MAX_JSON_DEPTH },
        );
    }
    return next();
  });
  app.use('/v1/*', idempotency(rt.idempotency, ctx.options.idempotencyTtlMs));

  sessionRoutes(app, ctx);
  usageRoutes(app, ctx);
  webhookRoutes(app, ctx);
  scheduleRoutes(app, ctx);
  runRoutes(app, ctx);
  waitRoutes(app, ctx);
  streamRoutes(app, ctx);
  chatRoutes(app, ctx);
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

/** How deep a request body's JSON may nest (objects and arrays). */
export const MAX_JSON_DEPTH = 64;

/** The deepest nesting of objects and arrays in a JSON text, by a scan that recurses into nothing. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 92 /* \\ */) i++;
      else if (ch === 34 /* " */) inString = false;
    } else if (ch === 34) inString = true;
    else if (ch === 91 /* [ */ || ch === 123 /* { */) {
      if (++depth > max) max = depth;
    } else if (ch === 93 /* ] */ || ch === 125 /* } */) depth--;
  }
  return max;
}
