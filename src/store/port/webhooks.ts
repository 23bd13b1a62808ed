/**
 * The webhooks part of the storage port (ADR-0017): a tenant's subscriptions, the outbox of
 * deliveries (written in the transaction of the event that causes them) and the attempts made to
 * deliver them. Both backends implement these operations (sqlite/webhooks.ts, postgres/webhooks.ts).
 */

/**
 * The event types a subscription can ask for: `run.<status>` for every run status (RUN_STATUSES in
 * src/runs/lifecycle/run-status.ts, in its order; the outbox checks at compile time that the two agree), and `schedule.fired`.
 */
export const WEBHOOK_EVENT_TYPES = [
  'run.queued',
  'run.running',
  'run.waiting_approval',
  'run.waiting_for_user',
  'run.paused',
  'run.completed',
  'run.failed',
  'run.cancelled',
  'run.timed_out',
  'run.sleeping',
  'run.waiting_for_signal',
  'run.waiting_for_quota',
  'schedule.fired',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/**
 * What a subscription's deliveries carry: Keel's own body (`keel`, docs/webhooks.md), or an A2A
 * push notification (`a2a`: a StreamResponse with the task's status update, docs/protocols.md).
 */
export type WebhookFormat = 'keel' | 'a2a';

export interface WebhookRecord {
  id: string;
  tenant: string;
  url: string;
  events: WebhookEventType[];
  /** The signing secret (HMAC-SHA256 key): shown once at creation, stored so that deliveries can be signed. */
  secret: string;
  /** The secret a rotation replaced: deliveries are signed with it too until `previousSecretExpiresAt`. */
  previousSecret: string | null;
  previousSecretExpiresAt: number | null;
  active: boolean;
  createdAt: number;
  updatedAt: number;
  /**
   * Only this run's events: a protocol's per-task subscription (an A2A push notification config).
   * Absent: every run of the tenant. Such subscriptions are not in `list` (they are the run's:
   * `forRun`), and erasing the run's session removes them.
   */
  runId?: string;
  /** The body's format; absent: `keel`. */
  format?: WebhookFormat;
  /** Headers sent with every attempt beside Keel's (an A2A config's token or credentials). */
  headers?: Record<string, string>;
  /** The protocol's own id of the subscription (an A2A push notification config id), one per run. */
  ref?: string;
}

export type WebhookPatch = Partial<Pick<WebhookRecord, 'url' | 'events' | 'active'>> & { updatedAt: number };

export type WebhookDeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface WebhookDelivery {
  id: string;
  webhookId: string;
  tenant: string;
  eventType: WebhookEventType;
  /** The session event that caused it. */
  eventId: string;
  /** That event's session (erasing the session removes the delivery); null for rows written before it was kept. */
  sessionId: string | null;
  /** The JSON body sent, exactly (what the signature covers, with the timestamp). */
  body: string;
  status: WebhookDeliveryStatus;
  /** Attempts made so far. */
  attempts: number;
  createdAt: number;
  /** When the next attempt is due (pending only); while an attempt is in flight, the end of its lease. */
  nextAttemptAt: number | null;
  /** No attempt starts after this: the delivery is `failed` then. */
  retryUntil: number;
  deliveredAt: number | null;
  /** When it ended `delivered` or `failed` (null while pending): retention counts from it. */
  endedAt: number | null;
  lastError: string | null;
  lastStatusCode: number | null;
}

/** The `lastError` of the deliveries a disabled subscription ended. */
export const DISABLED_SUBSCRIPTION_ERROR = 'subscription disabled';

/** A delivery as the outbox writes it: pending, due at `nextAttemptAt`. */
export type NewWebhookDelivery = Pick<
  WebhookDelivery,
  'id' | 'webhookId' | 'tenant' | 'eventType' | 'eventId' | 'sessionId' | 'body' | 'createdAt' | 'retryUntil'
> & { nextAttemptAt: number };

export interface WebhookAttempt {
  deliveryId: string;
  /** 1 for the first attempt. */
  n: number;
  startedAt: number;
  durationMs: number;
  /** The receiver's HTTP status, or null when no response came (`error` says why). */
  statusCode: number | null;
  error: string | null;
}

/** A delivery a dispatcher claimed: its attempt may be recorded only with this claim. */
export interface ClaimedWebhookDelivery extends WebhookDelivery {
  claim: number;
  url: string;
  secret: string;
  /** The subscription's previous secret, while a rotation's overlap lasts (signs too until then). */
  previousSecret: string | null;
  previousSecretExpiresAt: number | null;
  /** The subscription's body format and extra headers (see WebhookRecord). */
  format: WebhookFormat;
  headers: Record<string, string>;
}

/** A rotation: the new secret, and until when the one it replaces still signs (at or before `updatedAt`: it does not). */
export interface WebhookSecretRotation {
  secret: string;
  previousSecretExpiresAt: number;
  updatedAt: number;
}

/** How many attempts a dispatcher makes at once to one destination (a subscription URL), and how many it has in flight now. */
export interface WebhookClaimDestinations {
  perDestination: number;
  /** Attempts in flight per URL. */
  busy: Readonly<Record<string, number>>;
}

/** How many due deliveries of not-busy URLs a capped claim looks at, per delivery it may take. */
export const CLAIM_WINDOW_FACTOR = 4;

/** What an attempt's outcome does to its delivery (recorded with the attempt, see `webhooks.recordAttempt`). */
export interface WebhookAttemptOutcome {
  deliveryId: string;
  /** The claim the attempt was made under: a stale one records nothing. */
  claim: number;
  attempt: WebhookAttempt;
  status: WebhookDeliveryStatus;
  /** When `pending`: the next attempt's time. */
  nextAttemptAt: number | null;
}

/** Which ended deliveries retention removes: those that ended before these times. */
export interface WebhookRetentionBounds {
  deliveredBefore: number;
  failedBefore: number;
}

export interface WebhookPage {
  /** The id of the last item of the previous page. */
  after?: string;
  limit: number;
}

/** The webhooks namespace of the port (`store.webhooks`). */
export interface WebhookOps {
  create(w: WebhookRecord): Promise<void>;
  get(id: string): Promise<WebhookRecord | undefined>;
  /** A tenant's subscriptions, oldest first (not those of one run: `forRun`). */
  list(tenant: string, page: WebhookPage): Promise<WebhookRecord[]>;
  /** The subscriptions of one run (WebhookRecord.runId), oldest first. */
  forRun(runId: string): Promise<WebhookRecord[]>;
  /**
   * Undefined when there is no such subscription. Disabling one (`active: false`) ends its pending
   * deliveries `failed` (`lastError` DISABLED_SUBSCRIPTION_ERROR, ended at `updatedAt`), those in
   * flight too (their attempts record nothing): a disabled subscription leaves nothing due.
   */
  update(id: string, patch: WebhookPatch): Promise<WebhookRecord | undefined>;
  /**
   * Replaces the secret: the current one becomes the previous one until `previousSecretExpiresAt`
   * (one that was still previous is dropped); undefined when there is no such subscription.
   */
  rotateSecret(id: string, r: WebhookSecretRotation): Promise<WebhookRecord | undefined>;
  /** Removes a subscription with its deliveries and their attempts; false when there was none. */
  delete(id: string): Promise<boolean>;
  /**
   * The active subscriptions of the session's tenant, and those of the runs `runIds` (of that
   * session), in one indexed query (the outbox's only read).
   */
  forSession(sessionId: string, runIds?: readonly string[]): Promise<WebhookRecord[]>;
  /** Writes deliveries into the outbox (in the caller's transaction: with the event that causes them). */
  addDeliveries(deliveries: readonly NewWebhookDelivery[]): Promise<void>;
  getDelivery(id: string): Promise<WebhookDelivery | undefined>;
  /** A subscription's deliveries, newest first. */
  listDeliveries(webhookId: string, page: WebhookPage): Promise<WebhookDelivery[]>;
  /** The attempts of these deliveries, in order. */
  listAttempts(deliveryIds: readonly string[]): Promise<WebhookAttempt[]>;
  /**
   * Whether a pending delivery is due at `now` (a cheap read before a claim); with `except`, one
   * to another URL than those (the claimer's busy destinations: no claim is made for nothing).
   */
  hasDueDeliveries(now: number, o?: { except?: readonly string[] }): Promise<boolean>;
  /**
   * Takes up to `limit` pending deliveries due at `now` (oldest due first) of active subscriptions,
   * for one attempt each: their claim increases and their next attempt moves to `now + leaseMs`,
   * so no other dispatcher takes them meanwhile (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: under
   * the write lock). Due deliveries of a disabled subscription (one written in a race with its
   * disabling) are ended `failed` instead, as `webhooks.update` does. With `destinations`, at most
   * `perDestination` deliveries to one URL counting those the claimer has in flight (`busy`):
   * deliveries to a busy URL are passed over for others, however long they have been due.
   */
  claimDeliveries(
    now: number,
    leaseMs: number,
    limit: number,
    destinations?: WebhookClaimDestinations,
  ): Promise<ClaimedWebhookDelivery[]>;
  /**
   * Records an attempt and its outcome, if the delivery is still under `claim` (false otherwise:
   * another claim or a redelivery came meanwhile, and nothing is written).
   */
  recordAttempt(o: WebhookAttemptOutcome): Promise<boolean>;
  /** Whether a delivery ended before its status's bound (`delivered` or `failed`): a cheap read from the end-time index before a prune. */
  hasExpiredDeliveries(o: WebhookRetentionBounds): Promise<boolean>;
  /**
   * Deletes up to `limit` deliveries that ended before their status's bound, with their attempts,
   * those that ended first first (from the end-time index, not a scan); returns how many.
   */
  pruneDeliveries(o: WebhookRetentionBounds & { limit: number }): Promise<number>;
  /**
   * Makes a delivery pending again, due at `now`, to be tried until `retryUntil`. Refused
   * (StoreError `conflict`) while an attempt of it is in flight or while its subscription is
   * disabled; undefined for an unknown id.
   */
  redeliver(id: string, now: number, retryUntil: number): Promise<WebhookDelivery | undefined>;
}
