/**
 * The NUL character (U+0000) in a path parameter or a query parameter is refused before any route
 * sees it (400 `validation`, naming the parameter): they are ids, cursors and names, which no store
 * keeps with a NUL (store/plain-text.ts), so every backend answers the same. Bodies are checked by
 * their schemas: ids and names refuse NUL, content keeps it.
 */
import type { MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { hasNul, NUL_REFUSAL } from '../store/index.ts';
import { HttpProblem } from './problems.ts';

/** The path parameters of `path` under the route pattern `pattern` (`/v1/runs/:id`), decoded. */
function pathParams(pattern: string, path: string): Array<[string, string]> {
  const names = pattern.split('/');
  const values = path.split('/');
  const out: Array<[string, string]> = [];
  names.forEach((n, i) => {
    if (!n.startsWith(':') || values[i] === undefined) return;
    try {
      out.push([n.slice(1), decodeURIComponent(values[i])]);
    } catch {
      // Not valid percent-encoding: the route answers for it.
    }
  });
  return out;
}

export function refuseNulParams(): MiddlewareHandler {
  return async (c, next) => {
    const errors: Array<{ path: string; message: string }> = [];
    const route = matchedRoutes(c).findLast((r) => r.method !== 'ALL');
    if (route)
      for (const [name, value] of pathParams(route.path, c.req.path))
        if (hasNul(value)) errors.push({ path: name, message: NUL_REFUSAL });
    for (const [name, values] of Object.entries(c.req.queries()))
      if (values.some(hasNul)) errors.push({ path: name, message: NUL_REFUSAL });
    if (errors.length > 0)
      throw new HttpProblem('validation', errors.map((e) => `${e.path}: ${e.message}`).join('; '), { errors });
    return next();
  };
}
