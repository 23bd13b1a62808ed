/**
 * Unknown query parameters are refused (400 `validation`, naming them), never ignored: a client
 * that misspells `cursor` must not page through the first page forever. What a route takes is what
 * its OpenAPI definition declares; routes outside the OpenAPI registry (the SSE streams) declare
 * theirs here.
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { HttpProblem } from './problems.ts';

/** Query parameters of the routes that are not in the OpenAPI registry, by `METHOD /path/:param`. */
const PLAIN_ROUTES: Record<string, readonly string[]> = {
  'GET /v1/sessions/:id/stream': ['after'],
  'GET /v1/runs/:id/stream': ['after'],
  'GET /v1/sessions/:id/chat/stream': [],
  'GET /v1/sessions/:id/chat/:chatId/stream': [],
};

type RouteDefinition = {
  type: string;
  route?: { method: string; path: string; request?: { query?: { shape?: Record<string, unknown> } } };
};

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any OpenAPIHono app, whatever its env
export function knownQueryParams(app: OpenAPIHono<any>): MiddlewareHandler {
  let known: Map<string, ReadonlySet<string>> | undefined;
  // Read once the routes are all registered: at the first request.
  const table = () => {
    if (known) return known;
    known = new Map(Object.entries(PLAIN_ROUTES).map(([k, v]) => [k, new Set(v)]));
    for (const d of app.openAPIRegistry.definitions as RouteDefinition[]) {
      if (d.type !== 'route' || !d.route) continue;
      const path = d.route.path.replace(/\{([^}]+)\}/g, ':$1');
      known.set(`${d.route.method.toUpperCase()} ${path}`, new Set(Object.keys(d.route.request?.query?.shape ?? {})));
    }
    return known;
  };
  return async (c, next) => {
    const route = matchedRoutes(c).findLast((r) => r.method !== 'ALL');
    // No route: the 404 (or 405) says so; a HEAD is answered by its GET.
    if (route) {
      const method = c.req.method === 'HEAD' ? 'GET' : c.req.method;
      const allowed = table().get(`${method} ${route.path}`) ?? new Set<string>();
      const unknown = [...new Set(Object.keys(c.req.queries()))].filter((name) => !allowed.has(name));
      if (unknown.length > 0) {
        const takes = allowed.size > 0 ? `it takes ${[...allowed].join(', ')}` : 'it takes none';
        throw new HttpProblem(
          'validation',
          `unknown query parameter${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} for ${method} ${route.path}: ${takes}`,
          {
            unknown_parameters: unknown,
            allowed_parameters: [...allowed],
          },
        );
      }
    }
    return next();
  };
}
