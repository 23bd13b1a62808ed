import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import {
  EventTooLargeError,
  ImportError,
  InvalidEntryError,
  InvalidEventError,
  UnknownEventError,
} from '../session/index.ts';
import {
  ArgumentsNotEditableError,
  IllegalTransitionError,
  QuotaExceededError,
  RerunRequestError,
} from '../runs/index.ts';
import { RetentionPolicyError } from '../retention/index.ts';
import {
  FencedError,
  NotFoundError,
  RunBusyError,
  RunConflictError,
  SeqConflictError,
  StoreError,
} from '../store/index.ts';

/**
 * RFC 9457 problem details. Every error the API returns has a stable `type` URI, one per kind of
 * problem, so clients can branch on it; `title` is constant per type, `detail` says what happened.
 */
export const PROBLEM_BASE = 'https://keel.dev/problems/';

export const PROBLEMS = {
  validation: { status: 400, title: 'The request is not valid' },
  bad_json: { status: 400, title: 'The body is not valid JSON' },
  arguments_not_editable: { status: 400, title: "This call's arguments cannot be edited" },
  unauthorized: { status: 401, title: 'A valid API key is required' },
  forbidden: { status: 403, title: 'This API key may not do that' },
  forbidden_scope: { status: 403, title: "This API key's scope does not cover this request" },
  not_found: { status: 404, title: 'No such resource' },
  method_not_allowed: { status: 405, title: 'The resource does not take this method' },
  run_busy: { status: 409, title: 'The session already has an active run' },
  illegal_transition: { status: 409, title: 'The run cannot do that in its current state' },
  conflict: { status: 409, title: 'The resource changed or already exists' },
  session_archived: { status: 409, title: 'The session is archived' },
  session_in_archive: { status: 409, title: 'The session is in the archive store: restore it first' },
  not_in_archive: { status: 409, title: 'The session is not in the archive store' },
  no_archive_store: { status: 409, title: 'No archive store is configured' },
  archive_unavailable: { status: 503, title: 'The session’s archive cannot be read' },
  invalid_retention_policy: { status: 422, title: 'The retention policy cannot be kept' },
  gone: { status: 410, title: 'The session was erased' },
  already_decided: { status: 409, title: 'This was already decided' },
  already_delivered: { status: 409, title: 'This signal was already delivered' },
  signal_limit: { status: 409, title: 'The run keeps no more signals' },
  unknown_tool_call: { status: 404, title: 'The run made no such client tool call' },
  idempotency_mismatch: { status: 422, title: 'The idempotency key was used with a different request' },
  idempotency_in_progress: { status: 409, title: 'A request with this idempotency key is still in progress' },
  invalid_import: { status: 422, title: 'The import was refused' },
  unknown_agent: { status: 422, title: 'No such agent' },
  invalid_rerun: { status: 422, title: 'This rerun cannot be made' },
  payload_too_large: { status: 413, title: 'The request body is too large' },
  event_too_large: { status: 413, title: 'The event is too large to record' },
  blob_not_found: { status: 404, title: 'No such blob' },
  range_not_satisfiable: { status: 416, title: 'The range is not satisfiable' },
  unsupported_media_type: { status: 415, title: 'The body must be application/json' },
  rate_limited: { status: 429, title: 'Too many requests' },
  quota_exceeded: { status: 429, title: "The tenant's quota is used up" },
  unreadable_session: { status: 500, title: 'The session log cannot be read by this version' },
  store_unavailable: { status: 503, title: 'The database is unavailable: try again shortly' },
  timeout: { status: 504, title: 'Timed out' },
  internal: { status: 500, title: 'Internal error' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemType = keyof typeof PROBLEMS;

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance?: string;
  [extension: string]: unknown;
}

export class HttpProblem extends Error {
  readonly problem: ProblemType;
  readonly extensions: Record<string, unknown>;
  constructor(problem: ProblemType, detail: string, extensions: Record<string, unknown> = {}) {
    super(detail);
    this.name = 'HttpProblem';
    this.problem = problem;
    this.extensions = extensions;
  }
}

export function problemBody(
  type: ProblemType,
  detail: string,
  extensions: Record<string, unknown> = {},
  instance?: string,
): Problem {
  const p = PROBLEMS[type];
  return {
    type: `${PROBLEM_BASE}${type}`,
    title: p.title,
    status: p.status,
    detail,
    ...(instance ? { instance } : {}),
    ...extensions,
  };
}

export function problemResponse(
  c: Context,
  type: ProblemType,
  detail: string,
  extensions: Record<string, unknown> = {},
): Response {
  const body = problemBody(type, detail, extensions, new URL(c.req.url).pathname);
  return c.body(JSON.stringify(body), body.status as ContentfulStatusCode, {
    'content-type': 'application/problem+json',
  });
}

/**
 * The Retry-After (seconds) of a 503 while the database cannot be reached: a restart or a failover
 * takes seconds, and a client that waits this long mostly finds it back (ADR-0045).
 */
export const STORE_UNAVAILABLE_RETRY_AFTER_S = 2;

/** Maps anything thrown by the layers below to a problem; unknown errors are internal (and logged). */
export function toProblem(e: unknown): { type: ProblemType; detail: string; extensions: Record<string, unknown> } {
  if (e instanceof HttpProblem) return { type: e.problem, detail: e.message, extensions: e.extensions };
  // Hono's validators throw HTTPExceptions: 400 for a body that does not parse, 415 for another media type.
  if (e instanceof HTTPException) {
    if (e.status === 400)
      return /json/i.test(e.message)
        ? { type: 'bad_json', detail: `the body is not valid JSON: ${e.message}`, extensions: {} }
        : { type: 'validation', detail: e.message, extensions: {} };
    if (e.status === 413) return { type: 'payload_too_large', detail: e.message, extensions: {} };
    if (e.status === 415)
      return { type: 'unsupported_media_type', detail: 'send JSON with content-type application/json', extensions: {} };
  }
  if (e instanceof RunBusyError)
    return { type: 'run_busy', detail: e.message, extensions: { active_run_id: e.activeRunId } };
  if (e instanceof ArgumentsNotEditableError)
    return {
      type: 'arguments_not_editable',
      detail: e.message,
      extensions: { run_id: e.runId, approval_id: e.toolCallId },
    };
  if (e instanceof QuotaExceededError)
    return {
      type: 'quota_exceeded',
      detail: e.message,
      extensions: {
        scope: e.scope,
        limit: e.limit,
        max: e.max,
        retry_after: Math.max(1, Math.ceil(e.retryAfterMs / 1000)),
      },
    };
  if (e instanceof IllegalTransitionError)
    return { type: 'illegal_transition', detail: e.message, extensions: { run_id: e.runId, from: e.from, to: e.to } };
  if (e instanceof RerunRequestError)
    return { type: 'invalid_rerun', detail: e.message, extensions: { field: e.field } };
  if (e instanceof ImportError)
    return { type: 'invalid_import', detail: e.message, extensions: { problems: e.problems } };
  if (e instanceof InvalidEntryError) return { type: 'validation', detail: e.message, extensions: {} };
  if (e instanceof EventTooLargeError)
    return { type: 'event_too_large', detail: e.message, extensions: { bytes: e.bytes, limit: e.limit } };
  if (e instanceof InvalidEventError) return { type: 'validation', detail: e.message, extensions: {} };
  if (e instanceof UnknownEventError) return { type: 'unreadable_session', detail: e.message, extensions: {} };
  if (e instanceof NotFoundError) return { type: 'not_found', detail: e.message, extensions: {} };
  if (e instanceof RunConflictError || e instanceof SeqConflictError || e instanceof FencedError)
    return { type: 'conflict', detail: e.message, extensions: {} };
  if (e instanceof RetentionPolicyError)
    return { type: 'invalid_retention_policy', detail: e.message, extensions: { field: e.field } };
  if (e instanceof StoreError && e.code === 'unavailable')
    return {
      type: 'store_unavailable',
      detail: e.message,
      extensions: { retry_after: STORE_UNAVAILABLE_RETRY_AFTER_S },
    };
  if (e instanceof StoreError) {
    const map: Record<string, ProblemType> = {
      not_found: 'not_found',
      conflict: 'conflict',
      already_decided: 'already_decided',
      already_delivered: 'already_delivered',
      signal_limit: 'signal_limit',
      unknown_tool_call: 'unknown_tool_call',
      payload_too_large: 'payload_too_large',
      validation: 'validation',
      idempotency_in_progress: 'idempotency_in_progress',
      session_archived: 'session_archived',
      session_in_archive: 'session_in_archive',
      not_in_archive: 'not_in_archive',
      no_archive_store: 'no_archive_store',
      archive_unavailable: 'archive_unavailable',
      session_erased: 'gone',
      unknown_agent: 'unknown_agent',
      ambiguous: 'validation',
      invalid_entry: 'validation',
      invalid_parent: 'validation',
      timeout: 'timeout',
      // A database statement that waited past its lock timeout (the PostgreSQL store, ADR-0046).
      busy: 'timeout',
    };
    const type = map[e.code];
    if (type) return { type, detail: e.message, extensions: {} };
  }
  return { type: 'internal', detail: 'an internal error occurred', extensions: {} };
}
