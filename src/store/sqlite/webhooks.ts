import type Database from 'better-sqlite3';
import { StoreError } from '../port/index.ts';
import {
  CLAIMED_COLUMNS,
  scopeColumns,
  toClaimed,
  toWebhook,
  toWebhookAttempt,
  toWebhookDelivery,
  type ClaimedRow,
  type WebhookAttemptRow,
  type WebhookDeliveryRow,
  type WebhookRow,
} from '../webhook-rows.ts';
import { CLAIM_WINDOW_FACTOR, DISABLED_SUBSCRIPTION_ERROR, type WebhookClaimDestinations } from '../port/index.ts';
import { type FlatOpsOf } from '../port/layout.ts';

type WebhookStoreOps = FlatOpsOf<'webhooks'>;

type WebhookOpName = keyof WebhookStoreOps;

/** How each webhook operation runs (see PLAN in store.ts). */
export const WEBHOOK_PLAN: {
  readonly [K in WebhookOpName]: { outside: 'serial' | 'write' | 'immediate' | 'autocommit'; savepoint?: true };
} = {
  createWebhook: { outside: 'autocommit' },
  getWebhook: { outside: 'serial' },
  listWebhooks: { outside: 'serial' },
  listRunWebhooks: { outside: 'serial' },
  updateWebhook: { outside: 'immediate', savepoint: true },
  rotateWebhookSecret: { outside: 'immediate', savepoint: true },
  deleteWebhook: { outside: 'immediate', savepoint: true },
  webhooksForSession: { outside: 'serial' },
  addWebhookDeliveries: { outside: 'write', savepoint: true },
  getWebhookDelivery: { outside: 'serial' },
  listWebhookDeliveries: { outside: 'serial' },
  listWebhookAttempts: { outside: 'serial' },
  hasDueWebhookDeliveries: { outside: 'serial' },
  // Under the write lock (BEGIN IMMEDIATE): two processes never claim one delivery.
  claimWebhookDeliveries: { outside: 'immediate', savepoint: true },
  recordWebhookAttempt: { outside: 'write', savepoint: true },
  redeliverWebhook: { outside: 'immediate', savepoint: true },
  hasExpiredWebhookDeliveries: { outside: 'serial' },
  pruneWebhookDeliveries: { outside: 'write', savepoint: true },
};

type SyncWebhookOps = {
  [K in WebhookOpName]: (...args: Parameters<WebhookStoreOps[K]>) => Awaited<ReturnType<WebhookStoreOps[K]>>;
};

const limitOf = (n: number) => Math.max(0, Math.min(Math.floor(n), 1000));

/**
 * The due rows a claim takes, oldest due first: up to `limit`, and with `destinations` at most
 * `perDestination` a URL counting those in flight, looking at no more than CLAIM_WINDOW_FACTOR ×
 * `limit` rows of URLs that are not busy (the PostgreSQL claim's window).
 */
function pickDue(
  rows: Iterable<ClaimedRow>,
  limit: number,
  destinations: WebhookClaimDestinations | undefined,
): ClaimedRow[] {
  const picked: ClaimedRow[] = [];
  if (limit === 0) return picked;
  const taken = new Map<string, number>(Object.entries(destinations?.busy ?? {}));
  const cap = destinations?.perDestination ?? Number.POSITIVE_INFINITY;
  let window = destinations ? CLAIM_WINDOW_FACTOR * limit : limit;
  for (const r of rows) {
    const n = taken.get(r.url) ?? 0;
    if (n >= cap && (destinations?.busy[r.url] ?? 0) >= cap) continue;
    if (n < cap) {
      picked.push(r);
      taken.set(r.url, n + 1);
    }
    if (picked.length >= limit || --window <= 0) break;
  }
  return picked;
}

export function createWebhookOperations(db: Database.Database): SyncWebhookOps {
  const st = {
    insert: db.prepare(
      'INSERT INTO webhooks (id, tenant, url, events, secret, previous_secret, previous_secret_expires_at, active, created_at, updated_at, run_id, format, headers, ref) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    get: db.prepare<[string], WebhookRow>('SELECT * FROM webhooks WHERE id = ?'),
    list: db.prepare<[string, string, number], WebhookRow>(
      'SELECT * FROM webhooks WHERE tenant = ? AND run_id IS NULL AND id > ? ORDER BY id LIMIT ?',
    ),
    forRun: db.prepare<[string], WebhookRow>('SELECT * FROM webhooks WHERE run_id = ? ORDER BY created_at, id'),
    update: db.prepare('UPDATE webhooks SET url = ?, events = ?, active = ?, updated_at = ? WHERE id = ?'),
    delete: db.prepare('DELETE FROM webhooks WHERE id = ?'),
    rotate: db.prepare<[string, string | null, number | null, number, string]>(
      'UPDATE webhooks SET secret = ?, previous_secret = ?, previous_secret_expires_at = ?, updated_at = ? WHERE id = ?',
    ),
    // The tenant's subscriptions, and those of the given runs of the session (by the run_id index).
    forSession: db.prepare<[string, string, string], WebhookRow>(
      `SELECT w.* FROM sessions s JOIN webhooks w ON w.tenant = s.tenant AND w.active = 1 AND w.run_id IS NULL WHERE s.id = ?
       UNION ALL
       SELECT w.* FROM webhooks w JOIN runs r ON r.id = w.run_id AND r.session_id = ?
       WHERE w.run_id IN (SELECT value FROM json_each(?)) AND w.active = 1`,
    ),
    addDelivery: db.prepare(
      `INSERT INTO webhook_deliveries (id, webhook_id, tenant, event_type, event_id, session_id, body, created_at, next_attempt_at, retry_until)
       VALUES (@id, @webhookId, @tenant, @eventType, @eventId, @sessionId, @body, @createdAt, @nextAttemptAt, @retryUntil)`,
    ),
    getDelivery: db.prepare<[string], WebhookDeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = ?'),
    listDeliveries: db.prepare<[string, string | null, string | null, number], WebhookDeliveryRow>(
      'SELECT * FROM webhook_deliveries WHERE webhook_id = ? AND (? IS NULL OR id < ?) ORDER BY id DESC LIMIT ?',
    ),
    attemptsOf: db.prepare<[string], WebhookAttemptRow>(
      'SELECT * FROM webhook_attempts WHERE delivery_id = ? ORDER BY n',
    ),
    due: db.prepare<[number], { one: number }>(
      "SELECT 1 AS one FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1",
    ),
    dueExcept: db.prepare<[number, string], { one: number }>(
      `SELECT 1 AS one FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
       WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND w.url NOT IN (SELECT value FROM json_each(?)) LIMIT 1`,
    ),
    // Due deliveries of active subscriptions, oldest due first (the claim reads as many as it needs).
    dueRows: db.prepare<[number], ClaimedRow>(
      `SELECT d.*, ${CLAIMED_COLUMNS}
       FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
       WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND w.active = 1 ORDER BY d.next_attempt_at`,
    ),
    take: db.prepare(
      'UPDATE webhook_deliveries SET claim = claim + 1, next_attempt_at = ?, leased_until = ? WHERE id = ?',
    ),
    // A disabled subscription's pending deliveries: failed (none stays due).
    failDisabled: db.prepare<[number, string]>(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, leased_until = NULL, ended_at = ?, last_error = '${DISABLED_SUBSCRIPTION_ERROR}'
       WHERE webhook_id = ? AND status = 'pending'`,
    ),
    failDueOfDisabled: db.prepare<[{ now: number }]>(
      `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, leased_until = NULL, ended_at = @now, last_error = '${DISABLED_SUBSCRIPTION_ERROR}'
       WHERE status = 'pending' AND next_attempt_at <= @now AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = webhook_id AND w.active = 0)`,
    ),
    settle: db.prepare(
      `UPDATE webhook_deliveries SET status = @status, attempts = attempts + 1, next_attempt_at = @nextAttemptAt, leased_until = NULL,
         delivered_at = CASE WHEN @status = 'delivered' THEN @at ELSE delivered_at END, ended_at = CASE WHEN @status = 'pending' THEN NULL ELSE @at END,
         last_error = @error, last_status_code = @statusCode
       WHERE id = @id AND claim = @claim AND status = 'pending' AND leased_until IS NOT NULL`,
    ),
    addAttempt: db.prepare(
      'INSERT INTO webhook_attempts (delivery_id, n, started_at, duration_ms, status_code, error) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    // Retention: from the (status, ended_at) index, the longest ended first.
    expired: db.prepare<[string, number], { id: string }>(
      'SELECT id FROM webhook_deliveries WHERE status = ? AND ended_at IS NOT NULL AND ended_at < ? ORDER BY ended_at LIMIT 1',
    ),
    expiredIds: db.prepare<[string, number, number], { id: string }>(
      'SELECT id FROM webhook_deliveries WHERE status = ? AND ended_at IS NOT NULL AND ended_at < ? ORDER BY ended_at LIMIT ?',
    ),
    deleteAttempts: db.prepare<[string]>('DELETE FROM webhook_attempts WHERE delivery_id = ?'),
    deleteDelivery: db.prepare<[string]>('DELETE FROM webhook_deliveries WHERE id = ?'),
    redeliver: db.prepare(
      "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?, retry_until = ?, claim = claim + 1, leased_until = NULL, ended_at = NULL WHERE id = ?",
    ),
  };
  const ops: SyncWebhookOps = {
    createWebhook: (w) => {
      try {
        st.insert.run(
          w.id,
          w.tenant,
          w.url,
          JSON.stringify(w.events),
          w.secret,
          w.previousSecret,
          w.previousSecretExpiresAt,
          w.active ? 1 : 0,
          w.createdAt,
          w.updatedAt,
          ...scopeColumns(w),
        );
      } catch (e) {
        if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
          throw new StoreError('conflict', `webhook ${w.id} already exists`, { cause: e });
        throw e;
      }
    },
    getWebhook: (id) => {
      const r = st.get.get(id);
      return r ? toWebhook(r) : undefined;
    },
    listWebhooks: (tenant, page) => st.list.all(tenant, page.after ?? '', limitOf(page.limit)).map(toWebhook),
    listRunWebhooks: (runId) => st.forRun.all(runId).map(toWebhook),
    updateWebhook: (id, patch) => {
      const before = ops.getWebhook(id);
      if (!before) return undefined;
      const w = { ...before, ...patch };
      st.update.run(w.url, JSON.stringify(w.events), w.active ? 1 : 0, w.updatedAt, id);
      if (!w.active) st.failDisabled.run(w.updatedAt, id);
      return w;
    },
    rotateWebhookSecret: (id, r) => {
      const before = ops.getWebhook(id);
      if (!before) return undefined;
      const overlaps = r.previousSecretExpiresAt > r.updatedAt;
      const w = {
        ...before,
        secret: r.secret,
        previousSecret: overlaps ? before.secret : null,
        previousSecretExpiresAt: overlaps ? r.previousSecretExpiresAt : null,
        updatedAt: r.updatedAt,
      };
      st.rotate.run(w.secret, w.previousSecret, w.previousSecretExpiresAt, w.updatedAt, id);
      return w;
    },
    deleteWebhook: (id) => st.delete.run(id).changes === 1,
    webhooksForSession: (sessionId, runIds = []) =>
      st.forSession.all(sessionId, sessionId, JSON.stringify(runIds)).map(toWebhook),
    addWebhookDeliveries: (deliveries) => {
      for (const d of deliveries) st.addDelivery.run(d);
    },
    getWebhookDelivery: (id) => {
      const r = st.getDelivery.get(id);
      return r ? toWebhookDelivery(r) : undefined;
    },
    listWebhookDeliveries: (webhookId, page) =>
      st.listDeliveries
        .all(webhookId, page.after ?? null, page.after ?? null, limitOf(page.limit))
        .map(toWebhookDelivery),
    listWebhookAttempts: (ids) => ids.flatMap((id) => st.attemptsOf.all(id).map(toWebhookAttempt)),
    hasDueWebhookDeliveries: (now, o) =>
      (o?.except?.length ? st.dueExcept.get(now, JSON.stringify(o.except)) : st.due.get(now)) !== undefined,
    claimWebhookDeliveries: (now, leaseMs, limit, destinations) => {
      st.failDueOfDisabled.run({ now });
      const picked = pickDue(st.dueRows.iterate(now), limitOf(limit), destinations);
      // Written once the read is done (a connection does not write while it iterates).
      return picked.map((r) => {
        st.take.run(now + leaseMs, now + leaseMs, r.id);
        return toClaimed({ ...r, claim: r.claim + 1, next_attempt_at: now + leaseMs });
      });
    },
    recordWebhookAttempt: (o) => {
      const a = o.attempt;
      const changed = st.settle.run({
        id: o.deliveryId,
        claim: o.claim,
        status: o.status,
        nextAttemptAt: o.status === 'pending' ? o.nextAttemptAt : null,
        at: a.startedAt + a.durationMs,
        error: a.error,
        statusCode: a.statusCode,
      }).changes;
      if (changed !== 1) return false;
      st.addAttempt.run(o.deliveryId, a.n, a.startedAt, a.durationMs, a.statusCode, a.error);
      return true;
    },
    hasExpiredWebhookDeliveries: (o) =>
      st.expired.get('delivered', o.deliveredBefore) !== undefined ||
      st.expired.get('failed', o.failedBefore) !== undefined,
    pruneWebhookDeliveries: (o) => {
      const limit = limitOf(o.limit);
      const ids = st.expiredIds.all('delivered', o.deliveredBefore, limit);
      ids.push(...st.expiredIds.all('failed', o.failedBefore, limit - ids.length));
      for (const { id } of ids) {
        st.deleteAttempts.run(id);
        st.deleteDelivery.run(id);
      }
      return ids.length;
    },
    redeliverWebhook: (id, now, retryUntil) => {
      const r = st.getDelivery.get(id);
      if (!r) return undefined;
      if (r.status === 'pending' && r.leased_until !== null && r.leased_until > now)
        throw new StoreError('conflict', `delivery ${id} is being attempted now`);
      if (st.get.get(r.webhook_id)?.active === 0)
        throw new StoreError('conflict', `the subscription of delivery ${id} is disabled: enable it first`);
      st.redeliver.run(now, retryUntil, id);
      return toWebhookDelivery(st.getDelivery.get(id)!);
    },
  };
  return ops;
}
