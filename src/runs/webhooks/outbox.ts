import { newId } from '../../core/index.ts';
import type { AppendHook, SessionEvent } from '../../session/index.ts';
import type { NewWebhookDelivery, RunStatus, StoreOps, WebhookEventType } from '../../store/index.ts';
import { RUN_STATUSES } from '../lifecycle/run-status.ts';
import type { Clock } from '../../core/clock.ts';
import { a2aPushBody } from './a2a-push.ts';

/** Every run status a subscription can hear of (`run.<status>`): all of them. */
const RUN_STATUSES_HEARD: ReadonlySet<string> = new Set(RUN_STATUSES);

// Every run status has its event type and every run.* type is a status: a compile error otherwise.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const everyRunStatusIsAnEventType: Same<`run.${RunStatus}`, Extract<WebhookEventType, `run.${string}`>> = true;
void everyRunStatusIsAnEventType;

/** The webhook event type of a session event, if it is one a subscription can ask for. */
export function webhookTypeOf(e: { type: string; data: unknown }): WebhookEventType | undefined {
  if (e.type === 'run/status') {
    const to = (e.data as { to?: unknown } | undefined)?.to;
    return typeof to === 'string' && RUN_STATUSES_HEARD.has(to) ? (`run.${to}` as WebhookEventType) : undefined;
  }
  if (e.type === 'schedule/fired') return 'schedule.fired';
  return undefined;
}

/** What a delivery's body says of its event (`data`). */
export function webhookData(type: WebhookEventType, e: SessionEvent, tenant: string): Record<string, unknown> {
  const d = e.data as Record<string, unknown>;
  if (type === 'schedule.fired') {
    return {
      tenant,
      schedule: {
        id: d.scheduleId ?? null,
        tick: typeof d.tick === 'number' ? new Date(d.tick).toISOString() : (d.tick ?? null),
      },
      run_id: d.runId ?? null,
      session_id: e.sessionId,
    };
  }
  return {
    tenant,
    run: {
      id: e.runId ?? null,
      session_id: e.sessionId,
      status: d.to,
      previous_status: d.from ?? null,
      attempt: d.attempt ?? null,
      ...(d.reason !== undefined ? { reason: d.reason } : {}),
      ...(d.error !== undefined ? { error: d.error } : {}),
    },
  };
}

export interface OutboxOptions {
  clock: Clock;
  /** How long a delivery is retried (default one day). */
  retryForMs: number;
  /** Told after the transaction that wrote deliveries committed (the dispatcher of this process wakes up). */
  written?: () => void;
}

type Subscriptions = Awaited<ReturnType<StoreOps['webhooks']['forSession']>>;

/** The active subscriptions that may hear some of these events: the session's tenant's, and their runs'. */
function subscriptionsFor(
  tx: StoreOps,
  sessionId: string,
  events: readonly { type: string; data: unknown; runId?: string }[],
): Promise<Subscriptions> {
  const runIds = new Set<string>();
  for (const e of events) if (e.runId !== undefined && webhookTypeOf(e) !== undefined) runIds.add(e.runId);
  return tx.webhooks.forSession(sessionId, [...runIds]);
}

/**
 * The outbox (ADR-0017): for each appended event a subscription can hear of, one delivery per
 * active subscription of the session's tenant that asks for its type (and, for a run's own
 * subscription, is that run's), written in the transaction that appends the event. Ordinary step
 * commits are never looked at by the store: the hook wants only `run/status` changes and
 * `schedule/fired`, and then costs one indexed query (the tenant's active subscriptions and those
 * of the events' runs). A subscription's format says the body: Keel's, or an A2A push notification
 * (a2a-push.ts; none when the task's state does not change).
 */
export function webhookOutbox(o: OutboxOptions): AppendHook<Subscriptions> {
  return {
    wants: (e) => webhookTypeOf(e) !== undefined,
    // The subscriptions are read before the events are stored: sent with the append, one round trip.
    read: (tx, sessionId, events) => subscriptionsFor(tx, sessionId, events),
    async handler(tx: StoreOps, sessionId, events, afterCommit, read) {
      const heard = events.flatMap((e) => {
        const type = webhookTypeOf(e);
        return type ? [{ e, type }] : [];
      });
      if (heard.length === 0) return;
      const subscriptions = await (read ?? subscriptionsFor(tx, sessionId, events));
      if (subscriptions.length === 0) return;
      const now = o.clock.now();
      const deliveries: NewWebhookDelivery[] = [];
      for (const { e, type } of heard) {
        for (const w of subscriptions) {
          if (!w.events.includes(type)) continue;
          if (w.runId !== undefined && w.runId !== e.runId) continue;
          const id = newId();
          const body =
            w.format === 'a2a'
              ? a2aPushBody(e)
              : JSON.stringify({
                  id,
                  type,
                  created_at: new Date(e.time).toISOString(),
                  data: webhookData(type, e, w.tenant),
                });
          if (body === undefined) continue;
          deliveries.push({
            id,
            webhookId: w.id,
            tenant: w.tenant,
            eventType: type,
            eventId: e.id,
            sessionId: e.sessionId,
            body,
            createdAt: now,
            nextAttemptAt: now,
            retryUntil: now + o.retryForMs,
          });
        }
      }
      if (deliveries.length === 0) return;
      await tx.webhooks.addDeliveries(deliveries);
      if (o.written) afterCommit(o.written);
    },
  };
}
