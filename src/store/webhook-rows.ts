/** The webhook tables' rows, shared by both SQL backends, and their records. */
import type {
  ClaimedWebhookDelivery,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryStatus,
  WebhookEventType,
  WebhookFormat,
  WebhookRecord,
} from './port/index.ts';

/** Rows of both SQL backends. */
export interface WebhookRow {
  id: string;
  tenant: string;
  url: string;
  events: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  active: number | boolean;
  created_at: number;
  updated_at: number;
  run_id: string | null;
  format: string | null;
  headers: string | null;
  ref: string | null;
}

export interface WebhookDeliveryRow {
  id: string;
  webhook_id: string;
  tenant: string;
  event_type: string;
  event_id: string;
  session_id: string | null;
  body: string;
  status: string;
  attempts: number;
  claim: number;
  created_at: number;
  next_attempt_at: number | null;
  retry_until: number;
  delivered_at: number | null;
  ended_at: number | null;
  last_error: string | null;
  last_status_code: number | null;
  leased_until: number | null;
}

export interface WebhookAttemptRow {
  delivery_id: string;
  n: number;
  started_at: number;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
}

export const toWebhook = (r: WebhookRow): WebhookRecord => ({
  id: r.id,
  tenant: r.tenant,
  url: r.url,
  events: JSON.parse(r.events) as WebhookEventType[],
  secret: r.secret,
  previousSecret: r.previous_secret,
  previousSecretExpiresAt: r.previous_secret_expires_at === null ? null : Number(r.previous_secret_expires_at),
  active: r.active === true || r.active === 1,
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
  // A run's own subscription (a protocol's): these only when set.
  ...(r.run_id !== null ? { runId: r.run_id } : {}),
  ...(r.format !== null && r.format !== 'keel' ? { format: r.format as WebhookFormat } : {}),
  ...(r.headers !== null ? { headers: JSON.parse(r.headers) as Record<string, string> } : {}),
  ...(r.ref !== null ? { ref: r.ref } : {}),
});

/** The values of the columns a subscription's scope adds (run_id, format, headers, ref), in that order. */
export const scopeColumns = (w: WebhookRecord): [string | null, string | null, string | null, string | null] => [
  w.runId ?? null,
  w.format && w.format !== 'keel' ? w.format : null,
  w.headers ? JSON.stringify(w.headers) : null,
  w.ref ?? null,
];

const num = (v: number | null): number | null => (v === null ? null : Number(v));

export const toWebhookDelivery = (r: WebhookDeliveryRow): WebhookDelivery => ({
  id: r.id,
  webhookId: r.webhook_id,
  tenant: r.tenant,
  eventType: r.event_type as WebhookEventType,
  eventId: r.event_id,
  sessionId: r.session_id,
  body: r.body,
  status: r.status as WebhookDeliveryStatus,
  attempts: Number(r.attempts),
  createdAt: Number(r.created_at),
  nextAttemptAt: num(r.next_attempt_at),
  retryUntil: Number(r.retry_until),
  deliveredAt: num(r.delivered_at),
  endedAt: num(r.ended_at),
  lastError: r.last_error,
  lastStatusCode: num(r.last_status_code),
});

export const toWebhookAttempt = (r: WebhookAttemptRow): WebhookAttempt => ({
  deliveryId: r.delivery_id,
  n: Number(r.n),
  startedAt: Number(r.started_at),
  durationMs: Number(r.duration_ms),
  statusCode: num(r.status_code),
  error: r.error,
});

/** A claimed delivery's row: the delivery's columns with its subscription's URL, secrets, format and headers. */
export type ClaimedRow = WebhookDeliveryRow &
  Pick<WebhookRow, 'url' | 'secret' | 'previous_secret' | 'previous_secret_expires_at' | 'format' | 'headers'>;

/** The subscription's columns a claim returns with each delivery (`w` is the webhooks table). */
export const CLAIMED_COLUMNS =
  'w.url AS url, w.secret AS secret, w.previous_secret AS previous_secret, w.previous_secret_expires_at AS previous_secret_expires_at, w.format AS format, w.headers AS headers';

export const toClaimed = (r: ClaimedRow): ClaimedWebhookDelivery => ({
  ...toWebhookDelivery(r),
  claim: Number(r.claim),
  url: r.url,
  secret: r.secret,
  previousSecret: r.previous_secret,
  previousSecretExpiresAt: num(r.previous_secret_expires_at),
  format: (r.format ?? 'keel') as WebhookFormat,
  headers: r.headers !== null ? (JSON.parse(r.headers) as Record<string, string>) : {},
});
