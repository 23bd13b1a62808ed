/**
 * The errors of `keel/client`: a `KeelProblem` for every answer that is not 2xx (the API's RFC 9457
 * problem+json, docs/api.md), a `KeelNetworkError` when the server could not be reached. Runs in
 * browsers and Node alike: no Node-only imports here.
 */
import type { components } from './schema.ts';

/** Every problem type the API answers, by the last segment of its `type` URI (`https://keel.dev/problems/<type>`). */
export const PROBLEM_TYPES = [
  'validation',
  'bad_json',
  'arguments_not_editable',
  'unauthorized',
  'forbidden',
  'forbidden_scope',
  'not_found',
  'method_not_allowed',
  'run_busy',
  'illegal_transition',
  'conflict',
  'session_archived',
  'session_in_archive',
  'not_in_archive',
  'no_archive_store',
  'archive_unavailable',
  'invalid_retention_policy',
  'gone',
  'already_decided',
  'already_delivered',
  'signal_limit',
  'unknown_tool_call',
  'idempotency_mismatch',
  'idempotency_in_progress',
  'invalid_import',
  'unknown_agent',
  'invalid_rerun',
  'payload_too_large',
  'event_too_large',
  'blob_not_found',
  'range_not_satisfiable',
  'unsupported_media_type',
  'rate_limited',
  'quota_exceeded',
  'unreadable_session',
  'store_unavailable',
  'timeout',
  'internal',
] as const;

export type ProblemType = (typeof PROBLEM_TYPES)[number];

/** The base of every problem's `type` URI. */
export const PROBLEM_BASE = 'https://keel.dev/problems/';

/** The problem+json body, as the OpenAPI document describes it. */
export type Problem = components['schemas']['Problem'];

/** The fields some problem types carry beyond `type`, `title`, `status`, `detail` and `instance` (docs/api.md). */
export interface ProblemFields {
  validation: {
    errors?: Array<{ path: string; message: string }>;
    unknown_parameters?: string[];
    allowed_parameters?: string[];
    max_depth?: number;
    field?: string;
  };
  arguments_not_editable: { run_id: string; approval_id: string };
  method_not_allowed: { allow: string };
  run_busy: { active_run_id: string };
  illegal_transition: { run_id: string; from: string; to: string };
  invalid_import: { problems: Array<{ line: number; message: string }> };
  invalid_rerun: { field: string };
  payload_too_large: { limit_bytes?: number };
  rate_limited: { retry_after: number };
}

/** The extra fields of a problem of type `T` (none are known for most types). */
export type FieldsOf<T extends string> = T extends keyof ProblemFields ? ProblemFields[T] : Record<never, never>;

/** A `KeelProblem` known to be of type `T`, with that type's extra fields. */
export type KeelProblemOf<T extends ProblemType> = KeelProblem & { readonly type: T } & Readonly<FieldsOf<T>>;

const RESERVED = new Set(['type', 'title', 'status', 'detail', 'instance', 'message', 'name', 'stack', 'cause']);

/**
 * An answer of the API that is not 2xx. `type` is the problem type's short name (`not_found`,
 * `run_busy`, …; `http_<status>` for an answer that is not problem+json, from a proxy say), and
 * the problem's extra fields (`active_run_id`, `errors`, …) are properties of the error too, as well
 * as in `fields`. Narrow with `e.is('run_busy')`, or `KeelProblem.is(e, 'run_busy')` for an unknown `e`.
 */
export class KeelProblem extends Error {
  /** `not_found`, `validation`, … (`http_<status>` when the body was not a problem). */
  readonly type: string;
  /** The HTTP status. */
  readonly status: number;
  /** Constant per type. */
  readonly title: string;
  /** What happened (also the error's `message`). */
  readonly detail: string;
  /** The request's path. */
  readonly instance: string | undefined;
  /** The extra fields. */
  readonly fields: Record<string, unknown>;
  /** The body as received. */
  readonly body: unknown;

  constructor(status: number, body: unknown, statusText = '') {
    const p = body !== null && typeof body === 'object' ? (body as Record<string, unknown>) : undefined;
    const uri = typeof p?.type === 'string' ? p.type : undefined;
    const detail =
      typeof p?.detail === 'string'
        ? p.detail
        : typeof body === 'string' && body.trim() !== ''
          ? body.trim().slice(0, 200)
          : `HTTP ${status}${statusText ? ` ${statusText}` : ''}`;
    super(detail);
    this.name = 'KeelProblem';
    this.type = uri ? uri.replace(/^.*\//, '') : `http_${status}`;
    this.status = typeof p?.status === 'number' ? p.status : status;
    this.title = typeof p?.title === 'string' ? p.title : statusText || `HTTP ${status}`;
    this.detail = detail;
    this.instance = typeof p?.instance === 'string' ? p.instance : undefined;
    this.body = body;
    const fields: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(uri ? p! : {})) if (!RESERVED.has(k)) fields[k] = v;
    this.fields = fields;
    for (const [k, v] of Object.entries(fields)) if (!(k in this)) (this as Record<string, unknown>)[k] = v;
  }

  /** Whether this problem is of type `type` (and so has its fields). */
  is<T extends ProblemType>(type: T): this is KeelProblemOf<T> {
    return this.type === type;
  }

  /** Whether `e` is a `KeelProblem`, of type `type` when one is given. */
  static is<T extends ProblemType>(e: unknown, type?: T): e is KeelProblemOf<T> {
    return e instanceof KeelProblem && (type === undefined || e.type === type);
  }
}

/** The server could not be reached, or the connection failed before an answer (down, restarting, wrong URL). */
export class KeelNetworkError extends Error {
  /** The server's base URL. */
  readonly baseUrl: string;

  constructor(baseUrl: string, cause: unknown) {
    const inner = (cause as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
    const why =
      (typeof inner?.code === 'string' && inner.code) ||
      (typeof inner?.message === 'string' && inner.message) ||
      (cause instanceof Error ? cause.message : String(cause));
    super(`cannot reach the Keel server at ${baseUrl}: ${why}`, { cause });
    this.name = 'KeelNetworkError';
    this.baseUrl = baseUrl;
  }
}

/** Whether `e` is the rejection of an aborted request (the caller's signal). */
export const isAbort = (e: unknown): boolean =>
  e !== null && typeof e === 'object' && (e as { name?: unknown }).name === 'AbortError';
