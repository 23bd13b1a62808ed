/**
 * The OpenAPI prelude every route file shares: problem+json and JSON responses, a JSON request
 * body, path parameters (`{id}`), and the problems an authenticated route answers.
 */
import { z } from '@hono/zod-openapi';
import { ProblemSchema } from './schemas.ts';

/** A problem+json response. */
export const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ProblemSchema } },
});

/** A JSON response. */
export const json = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { 'application/json': { schema } },
});

/** A JSON request body (required unless said otherwise). */
export const body = <T extends z.ZodType>(schema: T, required = true) => ({
  body: { content: { 'application/json': { schema } }, required },
});

/** A path parameter: a non-empty string. */
export const pathParam = (name: string) =>
  z
    .string()
    .min(1)
    .openapi({ param: { name, in: 'path' } });

/** `{id}` in a path. */
export const IdParam = z.object({ id: pathParam('id') });

/**
 * What an authenticated route about a `what` answers: 400, 401 and 404 (another tenant's ids are
 * not found), and 503 while the database cannot be reached (ADR-0045).
 */
export const problems = (what: string) =>
  ({
    400: problem('Invalid request'),
    401: problem('Missing or invalid API key'),
    404: problem(`No such ${what} (or not yours)`),
    503: problem('The database cannot be reached right now (`store_unavailable`): try again after `Retry-After`'),
  }) as const;
