import { randomBytes } from 'node:crypto';
import { newId } from '../../core/index.ts';
import type { SessionLog } from '../../session/index.ts';
import {
  NotFoundError,
  refuseNul,
  StoreError,
  WEBHOOK_EVENT_TYPES,
  type Store,
  type WebhookAttempt,
  type WebhookDelivery,
  type WebhookEventType,
  type WebhookFormat,
  type WebhookRecord,
} from '../../store/index.ts';
import type { Clock } from '../../core/clock.ts';
import { DAY_MS, WebhookDispatcher, type DispatcherOptions } from './dispatcher.ts';
import { privateUrlReason } from './destination.ts';
import { webhookOutbox } from './outbox.ts';
import { a2aPushBodyOf } from './a2a-push.ts';

export { DAY_MS, WebhookDispatcher, webhookBackoff, type DispatcherOptions } from './dispatcher.ts';
export { webhookOutbox, webhookTypeOf } from './outbox.ts';
export { signWebhook, verifyWebhookSignature } from './signature.ts';
export { a2aPushBody, a2aTaskState, type A2aTaskStateName } from './a2a-push.ts';
export {
  isPrivateAddress,
  privateUrlReason,
  RefusedDestinationError,
  resolveDestination,
  systemResolve,
  type Resolve,
  type ResolvedAddress,
} from './destination.ts';

export interface WebhookOptions extends DispatcherOptions {
  /** How long a delivery is retried before it is `failed` (default one day). */
  retryForMs?: number;
}

/** How long a rotated secret still signs by default (a day), and at most (a week). */
export const DEFAULT_SECRET_OVERLAP_MS = DAY_MS;
export const MAX_SECRET_OVERLAP_MS = 7 * DAY_MS;

const newSecret = (): string => `whsec_${randomBytes(24).toString('base64url')}`;

/** Refuses a subscription URL on this machine or a private network, unless they are allowed (StoreError `validation`: a 400 over HTTP). */
function checkDestination(url: string, allowPrivateNetworks: boolean): void {
  if (!isWebhookUrl(url)) throw new StoreError('validation', `not an http(s) URL: ${url}`);
  const reason = allowPrivateNetworks ? undefined : privateUrlReason(url);
  if (reason)
    throw new StoreError(
      'validation',
      `webhooks may not be sent to ${url}: ${reason} (allow private networks with webhooks.allowPrivateNetworks, or KEEL_WEBHOOKS_ALLOW_PRIVATE=1 for keel serve)`,
    );
}

/** Whether a string is an http(s) URL a webhook may be sent to. */
export function isWebhookUrl(url: string): boolean {
  try {
    const u = new URL(url);
    // No control characters (NUL among them): what is sent is what was given.
    return (
      (u.protocol === 'http:' || u.protocol === 'https:') &&
      u.hostname.length > 0 &&
      url.length <= 2048 &&
      ![...url].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f)
    );
  } catch {
    return false;
  }
}

export const isWebhookEventType = (t: string): t is WebhookEventType =>
  (WEBHOOK_EVENT_TYPES as readonly string[]).includes(t);

/**
 * Webhooks of a runtime (ADR-0017): tenant-scoped subscriptions, the outbox hook on the session log
 * (installed at construction, so that every status change this process commits writes its
 * deliveries), and this process's dispatcher (started with the runtime's workers).
 */
export class Webhooks {
  private readonly store: Store;
  private readonly clock: Clock;
  readonly retryForMs: number;
  readonly dispatcher: WebhookDispatcher;
  private readonly allowPrivateNetworks: boolean;

  constructor(store: Store, log: SessionLog, clock: Clock, o: WebhookOptions = {}) {
    this.store = store;
    this.clock = clock;
    this.retryForMs = o.retryForMs ?? DAY_MS;
    this.allowPrivateNetworks = o.allowPrivateNetworks ?? false;
    this.dispatcher = new WebhookDispatcher(store, clock, o);
    log.onAppend(webhookOutbox({ clock, retryForMs: this.retryForMs, written: () => this.dispatcher.wake() }));
  }

  startDispatcher(): void {
    this.dispatcher.start();
  }

  stopDispatcher(): Promise<void> {
    return this.dispatcher.stop();
  }

  /** A new subscription; its secret is generated unless given (returned here, and only here, to show). */
  async create(
    tenant: string,
    o: { url: string; events: readonly WebhookEventType[]; secret?: string; active?: boolean },
  ): Promise<WebhookRecord> {
    refuseNul('secret', o.secret);
    checkDestination(o.url, this.allowPrivateNetworks);
    const now = this.clock.now();
    const w: WebhookRecord = {
      id: newId(),
      tenant,
      url: o.url,
      events: [...new Set(o.events)],
      secret: o.secret ?? newSecret(),
      previousSecret: null,
      previousSecretExpiresAt: null,
      active: o.active ?? true,
      createdAt: now,
      updatedAt: now,
    };
    await this.store.webhooks.create(w);
    return w;
  }

  list(tenant: string, page: { after?: string; limit: number }): Promise<WebhookRecord[]> {
    return this.store.webhooks.list(tenant, page);
  }

  /**
   * A subscription to one run's status changes (a protocol's per-task subscription: an A2A push
   * notification config, `format: 'a2a'`), which replaces the run's subscription with the same
   * `ref`. Its first delivery is the run's status as it is now, written with it in one
   * transaction that holds the run's row: a status change either committed before (and that
   * delivery says it) or commits after (and the outbox writes its own). So a client hears of the
   * task's state from the moment it subscribes, and of every change after, durably.
   */
  async subscribeRun(
    tenant: string,
    runId: string,
    o: { url: string; format: WebhookFormat; ref: string; headers?: Record<string, string> },
  ): Promise<WebhookRecord> {
    refuseNul('ref', o.ref);
    for (const [k, v] of Object.entries(o.headers ?? {})) refuseNul(`header ${k}`, v);
    checkDestination(o.url, this.allowPrivateNetworks);
    const now = this.clock.now();
    const w: WebhookRecord = {
      id: newId(),
      tenant,
      url: o.url,
      events: WEBHOOK_EVENT_TYPES.filter((t) => t.startsWith('run.')),
      secret: newSecret(),
      previousSecret: null,
      previousSecretExpiresAt: null,
      active: true,
      createdAt: now,
      updatedAt: now,
      runId,
      format: o.format,
      ref: o.ref,
      ...(o.headers && Object.keys(o.headers).length > 0 ? { headers: o.headers } : {}),
    };
    await this.store.transaction(async (tx) => {
      const run = await tx.runs.get(runId);
      if (!run) throw new NotFoundError('run', runId);
      for (const old of await tx.webhooks.forRun(runId)) if (old.ref === o.ref) await tx.webhooks.delete(old.id);
      await tx.webhooks.create(w);
      const id = newId();
      await tx.webhooks.addDeliveries([
        {
          id,
          webhookId: w.id,
          tenant,
          eventType: `run.${run.status}`,
          // No event caused it: the subscription did.
          eventId: w.id,
          sessionId: run.sessionId,
          body: o.format === 'a2a' ? a2aPushBodyOf(run, now, id) : JSON.stringify({ id, type: `run.${run.status}` }),
          createdAt: now,
          nextAttemptAt: now,
          retryUntil: now + this.retryForMs,
        },
      ]);
    });
    this.dispatcher.wake();
    return w;
  }

  /** A run's own subscriptions (see `subscribeRun`). */
  forRun(runId: string): Promise<WebhookRecord[]> {
    return this.store.webhooks.forRun(runId);
  }

  /** The subscription, if the tenant's (another tenant's is not found). */
  async get(tenant: string, id: string): Promise<WebhookRecord> {
    const w = await this.store.webhooks.get(id);
    if (!w || w.tenant !== tenant) throw new NotFoundError('webhook', id);
    return w;
  }

  async update(
    tenant: string,
    id: string,
    patch: { url?: string; events?: readonly WebhookEventType[]; active?: boolean },
  ): Promise<WebhookRecord> {
    await this.get(tenant, id);
    if (patch.url !== undefined) checkDestination(patch.url, this.allowPrivateNetworks);
    const w = await this.store.webhooks.update(id, {
      ...(patch.url !== undefined ? { url: patch.url } : {}),
      ...(patch.events !== undefined ? { events: [...new Set(patch.events)] } : {}),
      ...(patch.active !== undefined ? { active: patch.active } : {}),
      updatedAt: this.clock.now(),
    });
    if (!w) throw new NotFoundError('webhook', id);
    return w;
  }

  /**
   * A new secret (returned here, and only here, to show); the one it replaces still signs
   * deliveries for `overlapMs` (default a day, at most a week; 0: not at all), so that receivers
   * can switch without refusing a delivery. Rotating again during an overlap drops the oldest.
   */
  async rotateSecret(tenant: string, id: string, o: { overlapMs?: number } = {}): Promise<WebhookRecord> {
    const overlapMs = o.overlapMs ?? DEFAULT_SECRET_OVERLAP_MS;
    if (!Number.isInteger(overlapMs) || overlapMs < 0 || overlapMs > MAX_SECRET_OVERLAP_MS) {
      throw new StoreError(
        'validation',
        `the overlap is a whole number of milliseconds from 0 to ${MAX_SECRET_OVERLAP_MS}, not ${overlapMs}`,
      );
    }
    await this.get(tenant, id);
    const now = this.clock.now();
    const w = await this.store.webhooks.rotateSecret(id, {
      secret: newSecret(),
      previousSecretExpiresAt: now + overlapMs,
      updatedAt: now,
    });
    if (!w) throw new NotFoundError('webhook', id);
    return w;
  }

  async delete(tenant: string, id: string): Promise<void> {
    await this.get(tenant, id);
    await this.store.webhooks.delete(id);
  }

  /** A subscription's deliveries, newest first, each with its attempts. */
  async deliveries(
    tenant: string,
    webhookId: string,
    page: { after?: string; limit: number },
  ): Promise<Array<{ delivery: WebhookDelivery; attempts: WebhookAttempt[] }>> {
    await this.get(tenant, webhookId);
    const list = await this.store.webhooks.listDeliveries(webhookId, page);
    const attempts = await this.store.webhooks.listAttempts(list.map((d) => d.id));
    return list.map((delivery) => ({ delivery, attempts: attempts.filter((a) => a.deliveryId === delivery.id) }));
  }

  /** One delivery of the tenant's subscription, with its attempts. */
  async delivery(
    tenant: string,
    webhookId: string,
    deliveryId: string,
  ): Promise<{ delivery: WebhookDelivery; attempts: WebhookAttempt[] }> {
    await this.get(tenant, webhookId);
    const d = await this.store.webhooks.getDelivery(deliveryId);
    if (!d || d.webhookId !== webhookId) throw new NotFoundError('delivery', deliveryId);
    return { delivery: d, attempts: await this.store.webhooks.listAttempts([d.id]) };
  }

  /** A delivery of one of the tenant's subscriptions, found by its id alone, with its attempts. */
  async deliveryById(
    tenant: string,
    deliveryId: string,
  ): Promise<{ delivery: WebhookDelivery; attempts: WebhookAttempt[] }> {
    const d = await this.store.webhooks.getDelivery(deliveryId);
    if (!d || d.tenant !== tenant) throw new NotFoundError('delivery', deliveryId);
    return { delivery: d, attempts: await this.store.webhooks.listAttempts([d.id]) };
  }

  /** Attempts a delivery again now (and for another `retryForMs`), whatever its status; refused (conflict) while an attempt is in flight. */
  async redeliver(tenant: string, webhookId: string, deliveryId: string): Promise<WebhookDelivery> {
    await this.delivery(tenant, webhookId, deliveryId);
    const now = this.clock.now();
    const d = await this.store.webhooks.redeliver(deliveryId, now, now + this.retryForMs);
    if (!d) throw new NotFoundError('delivery', deliveryId);
    this.dispatcher.wake();
    return d;
  }
}
