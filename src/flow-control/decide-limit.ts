/**
 * Flow control's policy for one acquisition of a model's limits: what the key's rows say decides
 * whether the request goes now or when to try again. The store runs it inside its transaction
 * (`store.limits.acquire(a, decideLimit)`) without knowing the policy.
 */
import type { LimitAcquire, LimitDecision, LimitGrant, LimitRowState } from '../store/index.ts';

/**
 * The decision of an acquisition from what the key's rows say (the same for both backends, run
 * inside their transaction): pause, a waiter ahead, concurrency, requests, tokens, in that order.
 */
export const decideLimit: LimitDecision = (a: LimitAcquire, s: LimitRowState): LimitGrant => {
  const poll = a.now + 50;
  if (s.pausedUntil > a.now) return { granted: false, reason: 'paused', retryAt: s.pausedUntil };
  if (s.ahead) return { granted: false, reason: 'queued', retryAt: poll };
  if (a.concurrency !== undefined && s.slots >= a.concurrency) {
    return {
      granted: false,
      reason: 'concurrency',
      retryAt: Math.max(poll, Math.min(s.oldestSlotExpiry ?? poll, a.now + 1000)),
    };
  }
  const rpm = a.requestsPerWindow;
  const tpm = a.tokensPerWindow;
  const tokens = tpm !== undefined ? Math.min(a.tokens, tpm) : a.tokens;
  const overRequests = rpm !== undefined && s.requests + 1 > rpm;
  const overTokens = tpm !== undefined && s.tokens + tokens > tpm;
  if (overRequests || overTokens) {
    // When enough of the window's oldest grants leave it.
    const rows = s.usage();
    let requests = s.requests;
    let used = s.tokens;
    let retryAt = a.now + a.windowMs;
    for (const r of rows) {
      requests -= 1;
      used -= r.tokens;
      if ((rpm === undefined || requests + 1 <= rpm) && (tpm === undefined || used + tokens <= tpm)) {
        retryAt = r.at + a.windowMs;
        break;
      }
    }
    return { granted: false, reason: overRequests ? 'requests' : 'tokens', retryAt: Math.max(a.now + 1, retryAt) };
  }
  return { granted: true };
};
