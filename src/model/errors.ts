import { APICallError } from '@ai-sdk/provider';
import type { AssistantMessage } from './messages.ts';

/**
 * How the loop must react to a failed model call:
 * - `transient`: retry the same call (rate limit, overload, 5xx, network);
 * - `context_overflow`: the prompt is too large; the session layer may compact and retry once;
 * - `aborted`: the call was cancelled by us;
 * - `fatal`: anything else; the turn fails.
 */
export type ModelErrorKind = 'transient' | 'context_overflow' | 'aborted' | 'fatal';

export interface ModelErrorInfo {
  kind: ModelErrorKind;
  message: string;
  status?: number;
  code?: string;
  retryAfterMs?: number;
}

export class ModelCallError extends Error {
  readonly kind: ModelErrorKind;
  readonly status: number | undefined;
  readonly code: string | undefined;
  readonly retryAfterMs: number | undefined;
  /** What the model produced before the failure, if anything. */
  partial: AssistantMessage['content'] = [];

  constructor(info: ModelErrorInfo, options?: { cause?: unknown }) {
    super(info.message, options);
    this.name = 'ModelCallError';
    this.kind = info.kind;
    this.status = info.status;
    this.code = info.code;
    this.retryAfterMs = info.retryAfterMs;
  }

  toJSON(): ModelErrorInfo {
    return {
      kind: this.kind,
      message: this.message,
      ...(this.status !== undefined ? { status: this.status } : {}),
      ...(this.code !== undefined ? { code: this.code } : {}),
      ...(this.retryAfterMs !== undefined ? { retryAfterMs: this.retryAfterMs } : {}),
    };
  }
}

const OVERFLOW =
  /context[_ ]length|context window|prompt is too long|maximum context|too many (input )?tokens|input is too long|exceeds the (maximum|context)|exceed context limit|request_too_large|reduce the length/i;
const TRANSIENT_TYPES = new Set([
  'overloaded_error',
  'api_error',
  'rate_limit_error',
  'server_error',
  'rate_limit_exceeded',
  'timeout',
]);
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/** Parses `retry-after-ms`, then `retry-after` (seconds or an HTTP date). */
export function retryAfterMs(
  headers: Record<string, string | undefined> | undefined,
  now = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const get = (name: string) => {
    for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
    return undefined;
  };
  const ms = get('retry-after-ms');
  if (ms !== undefined && ms.trim() !== '' && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const ra = get('retry-after');
  if (ra === undefined || ra.trim() === '') return undefined;
  if (Number.isFinite(Number(ra))) return Math.max(0, Number(ra) * 1000);
  const date = Date.parse(ra);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function errorCode(e: unknown): string | undefined {
  let cur: unknown = e;
  for (let i = 0; i < 4 && cur && typeof cur === 'object'; i++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

function isTransientStatus(status: number | undefined): boolean {
  return (
    status !== undefined && (status === 408 || status === 409 || status === 425 || status === 429 || status >= 500)
  );
}

/** Maps anything a provider throws (or streams as an error part) to a ModelCallError. */
export function classifyModelError(error: unknown, aborted: boolean): ModelCallError {
  if (error instanceof ModelCallError) return error;
  if (aborted) return new ModelCallError({ kind: 'aborted', message: 'model call aborted' }, { cause: error });

  if (APICallError.isInstance(error)) {
    const text = `${error.message} ${error.responseBody ?? ''}`;
    const status = error.statusCode;
    const kind: ModelErrorKind =
      OVERFLOW.test(text) && (status === undefined || status < 500)
        ? 'context_overflow'
        : error.isRetryable || isTransientStatus(status)
          ? 'transient'
          : 'fatal';
    return new ModelCallError(
      { kind, message: error.message, status, retryAfterMs: retryAfterMs(error.responseHeaders) },
      { cause: error },
    );
  }

  if (error && typeof error === 'object' && !(error instanceof Error)) {
    // Provider stream errors arrive as plain objects: { message, type, code, statusCode, isRetryable }.
    const o = error as {
      message?: unknown;
      type?: unknown;
      code?: unknown;
      statusCode?: unknown;
      isRetryable?: unknown;
      error?: unknown;
    };
    const inner = o.error && typeof o.error === 'object' ? (o.error as typeof o) : o;
    const message = typeof inner.message === 'string' ? inner.message : JSON.stringify(error);
    const type = typeof inner.type === 'string' ? inner.type : undefined;
    const code = typeof inner.code === 'string' ? inner.code : type;
    const status = typeof inner.statusCode === 'number' ? inner.statusCode : undefined;
    const kind: ModelErrorKind = OVERFLOW.test(`${message} ${code ?? ''}`)
      ? 'context_overflow'
      : inner.isRetryable === true ||
          (type !== undefined && TRANSIENT_TYPES.has(type)) ||
          (code !== undefined && TRANSIENT_TYPES.has(code)) ||
          isTransientStatus(status)
        ? 'transient'
        : 'fatal';
    return new ModelCallError({ kind, message, status, code }, { cause: error });
  }

  const err = error instanceof Error ? error : new Error(String(error));
  if (err.name === 'AbortError')
    return new ModelCallError({ kind: 'aborted', message: 'model call aborted' }, { cause: err });
  const code = errorCode(err);
  const network =
    (code !== undefined && NETWORK_CODES.has(code)) ||
    (err instanceof TypeError && /fetch failed|network|terminated/i.test(err.message));
  return new ModelCallError({ kind: network ? 'transient' : 'fatal', message: err.message, code }, { cause: err });
}
