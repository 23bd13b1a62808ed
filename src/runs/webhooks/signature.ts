import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The `Keel-Signature` header of a delivery: `t=<unix seconds>,v1=<hex HMAC-SHA256>` of
 * `"<t>.<body>"` with the subscription's secret (docs/webhooks.md). Given several secrets (the
 * new one first, then the one a rotation replaced, during its overlap), one `v1=` for each.
 */
export function signWebhook(secret: string | readonly string[], body: string, timestampSec: number): string {
  const payload = `${timestampSec}.${body}`;
  return [
    `t=${timestampSec}`,
    ...(typeof secret === 'string' ? [secret] : secret).map((s) => `v1=${hmac(s, payload)}`),
  ].join(',');
}

const hmac = (secret: string, payload: string): string =>
  createHmac('sha256', secret).update(payload, 'utf8').digest('hex');

/**
 * Whether a delivery is genuine: `header` (the `Keel-Signature` value) signs exactly `body` (the raw
 * request body, as received: not a re-serialised parse) with `secret`, and its timestamp is within
 * `toleranceSec` of `nowMs` (replays of old deliveries are refused; 0 skips the check). Compares in
 * constant time. A header may carry several `v1=` signatures (one may match).
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | null | undefined,
  body: string | Uint8Array,
  toleranceSec = 300,
  nowMs = Date.now(),
): boolean {
  if (!header) return false;
  let t: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const key = part.slice(0, i).trim();
    const value = part.slice(i + 1).trim();
    if (key === 't' && /^\d+$/.test(value)) t = Number(value);
    else if (key === 'v1' && /^[0-9a-f]{64}$/i.test(value)) signatures.push(value.toLowerCase());
  }
  if (t === undefined || signatures.length === 0) return false;
  if (toleranceSec > 0 && Math.abs(nowMs / 1000 - t) > toleranceSec) return false;
  const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
  const expected = Buffer.from(hmac(secret, `${t}.${text}`), 'hex');
  return signatures.some((s) => timingSafeEqual(Buffer.from(s, 'hex'), expected));
}
