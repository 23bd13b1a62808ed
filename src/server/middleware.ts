/**
 * The server's middleware and handlers, each on its own: validation failures, errors and unknown
 * routes as problem+json; request metrics and logs; the API-key check except for callback URLs;
 * JSON bodies only, within their size and depth limits; Idempotency-Key replays. app.ts composes them.
 */
import { isOpenAiPath, openAiErrorResponse } from './protocols/openai/openai-errors.ts';
import { isMcpPath, mcpErrorResponse } from './protocols/mcp/mcp-errors.ts';
import { createHash } from 'node:crypto';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, ErrorHandler, MiddlewareHandler, NotFoundHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { Runtime } from '../runs/index.ts';
import type { AuthEnv } from './auth.ts';
import type { AppContext, AppEnv } from './context.ts';
import { HttpProblem, problemResponse, toProblem } from './problems.ts';

/** Validation failures of params, query and body become problem+json with the field errors (the apps's defaultHook). */
export function validationHook(
  result:
    { success: true } | { success: false; error: { issues: ReadonlyArray<{ path: PropertyKey[]; message: string }> } },
  c: Context,
): Response | undefined {
  if (!result.success) {
    const issues = result.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
    return problemResponse(c, 'validation', issues.map((i) => `${i.path || '(body)'}: ${i.message}`).join('; '), {
      errors: issues,
    });
  }
  return undefined;
}

/** Every error as problem+json; internal ones logged. */
export function errorHandler(ctx: AppContext): ErrorHandler<AppEnv> {
  return (err, c) => {
    const p = toProblem(err);
    if (p.type === 'internal') {
      // Logged (with its stack) where operators look; a library user without a logger still hears of it.
      if (ctx.logger.isLevelEnabled('error'))
        ctx.logger.error({ method: c.req.method, path: c.req.path, err }, 'internal error');
      else process.emitWarning(`keel server: ${c.req.method} ${c.req.path}: ${err.stack ?? err.message}`);
    }
    if (p.type === 'rate_limited' || p.type === 'quota_exceeded' || p.type === 'store_unavailable')
      c.header('retry-after', String(p.extensions.retry_after ?? 1));
    // Another request holds this Idempotency-Key: its record stands, this refusal is not recorded.
    if (p.type === 'idempotency_in_progress') c.set('idempotency', undefined);
    // The OpenAI-compatible routes answer in the shape their clients read.
    if (isOpenAiPath(c.req.path)) return openAiErrorResponse(c, p.type, p.detail, p.extensions);
    // So does the MCP endpoint, in JSON-RPC's.
    if (isMcpPath(c.req.path)) return mcpErrorResponse(c, p.type, p.detail, p.extensions);
    return problemResponse(c, p.type, p.detail, p.extensions);
  };
}

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

/** No route: 405 with the methods a known path takes, else 404. */
export function notFound(app: OpenAPIHono<AppEnv>): NotFoundHandler<AppEnv> {
  return (c) => {
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
  };
}

/** Counts and times every request (metrics), and logs it. */
export function requestLog(ctx: AppContext): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
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
  };
}

/** Where a callback token is presented: the token alone authorizes (ADR-0015), no API key. */
export const CALLBACK_PREFIX = '/v1/callbacks/';

/**
 * The API-key middleware, except for callback URLs: their unguessable token is their only
 * credential (it stands for one signal of one run, and is checked by the route).
 */
export function exceptCallbacks(auth: MiddlewareHandler<AuthEnv>): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    if (!c.req.path.startsWith(CALLBACK_PREFIX)) return auth(c, next);
    c.set('tenant', '');
    c.set('keyId', null);
    c.set('rateLimit', null);
    return next();
  };
}

/** A POST with a body sends JSON (but an import, which sends NDJSON). */
export function jsonBodies(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
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
  };
}

/** Bodies within their size limit (an import's, or any other's). */
export function bodyLimits(ctx: AppContext): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
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
  };
}

/** A JSON body nested deeper than any request needs is refused before anything recurses into it. */
export function jsonDepthLimit(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
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
  };
}

/** Replays the first response to a POST with the same Idempotency-Key and body; refuses another body. */
export function idempotency(store: Runtime['idempotency'], ttlMs: number): MiddlewareHandler<AppEnv> {
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
