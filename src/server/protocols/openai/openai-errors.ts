/**
 * Errors under `/openai/v1` in the shape OpenAI clients read (`{ error: { message, type, param,
 * code } }`), from the same problems Keel's own API answers with (problems.ts): the official
 * `openai` SDK raises its typed errors (BadRequestError, NotFoundError, ...) from the status, and
 * shows the message.
 */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { PROBLEMS, type ProblemType } from '../../problems.ts';

/** The OpenAI error `type` for an HTTP status. */
function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** Whether a request is one of the OpenAI-compatible routes (its errors take their shape). */
export const isOpenAiPath = (path: string): boolean => path.startsWith('/openai/');

/** The problem `type` as an OpenAI error; `param` names the request field at fault, if known. */
export function openAiErrorResponse(
  c: Context,
  type: ProblemType,
  detail: string,
  extensions: Record<string, unknown> = {},
): Response {
  const status = PROBLEMS[type].status;
  const param =
    typeof extensions.param === 'string'
      ? extensions.param
      : typeof extensions.field === 'string'
        ? extensions.field
        : null;
  return c.body(
    JSON.stringify({ error: { message: detail, type: errorType(status), param, code: type } }),
    status as ContentfulStatusCode,
    { 'content-type': 'application/json' },
  );
}
