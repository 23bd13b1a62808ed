import type { ModelCallError } from './errors.ts';

export interface RetryPolicy {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  factor: number;
  /** A retry-after longer than this is not waited for: the error is final. */
  maxRetryAfterMs: number;
}

export const defaultRetryPolicy: RetryPolicy = {
  maxAttempts: 5,
  initialDelayMs: 500,
  maxDelayMs: 30_000,
  factor: 2,
  maxRetryAfterMs: 120_000,
};

/**
 * Delay before retry number `attempt` (1 = the first retry), or undefined when the error must
 * not be retried. A provider's retry-after wins over the backoff; otherwise exponential backoff
 * with jitter (half fixed, half random), so many clients hitting one rate limit spread out instead of stampeding.
 */
export function retryDelayMs(
  policy: RetryPolicy,
  attempt: number,
  error: ModelCallError,
  random: () => number = Math.random,
): number | undefined {
  if (error.kind !== 'transient' || attempt >= policy.maxAttempts) return undefined;
  if (error.retryAfterMs !== undefined) {
    return error.retryAfterMs <= policy.maxRetryAfterMs ? error.retryAfterMs : undefined;
  }
  const cap = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** (attempt - 1));
  return Math.round(cap / 2 + random() * (cap / 2));
}

/** Resolves after `ms`, or rejects as soon as the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
