import { StoreError } from '../port.ts';
import {
  toWebhook,
  toWebhookAttempt,
  toWebhookDelivery,
  type WebhookAttemptRow,
  type WebhookDeliveryRow,
  type WebhookRow,
  type WebhookStoreOps,
} from '../webhooks.ts';
import type { OpContext } from './operations.ts';
import { sqlState, UNIQUE_VIOLATION } from './sql.ts';
import { hasNul } from '../plain-text.ts';

/** Schema v7: webhook subscriptions, the outbox of deliveries, their attempts (ADR-0017). */
export const WEBHOOKS_MIGRATION_SQL = `
  CREATE TABLE webhooks (
    id text PRIMARY KEY,
    tenant text NOT NULL,
    url text NOT NULL,
    events text NOT NULL,
    secret text NOT NULL,
    active boolean NOT NULL DEFAULT true,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
  );
  CREATE INDEX webhooks_tenant ON webhooks (tenant) WHERE active;

  CREATE TABLE webhook_deliveries (
    id text PRIMARY KEY,
    webhook_id text NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    tenant text NOT NULL,
    event_type text NOT NULL,
    event_id text NOT NULL,
    body text NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    attempts integer NOT NULL DEFAULT 0,
    claim integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    next_attempt_at bigint,
    retry_until bigint NOT NULL,
    delivered_at bigint,
    last_error text,
    last_status_code integer,
    leased_until bigint
  );
  CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
  CREATE INDEX webhook_deliveries_of ON webhook_deliveries (webhook_id, id);

  CREATE TABLE webhook_attempts (
    delivery_id text NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    n integer NOT NULL,
    started_at bigint NOT NULL,
    duration_ms integer NOT NULL,
    status_code integer,
    error text,
    PRIMARY KEY (delivery_id, n)
  );
`;

type PgWebhookOps = { [K in keyof WebhookStoreOps]: (ctx: OpContext, ...args: Parameters<WebhookStoreOps[K]>) => ReturnType<WebhookStoreOps[K]> };

const limitOf = (n: number) => Math.max(0, Math.min(Math.floor(n), 1000));

export const pgWebhookOperations: PgWebhookOps = {
  createWebhook: async ({ guarded }, w) => {
    try {
      await guarded((q) =>
        q.run('INSERT INTO webhooks (id, tenant, url, events, secret, active, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)', [
          w.id,
          w.tenant,
          w.url,
          JSON.stringify(w.events),
          w.secret,
          w.active,
          w.createdAt,
          w.updatedAt,
        ]),
      );
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION) throw new StoreError('conflict', `webhook ${w.id} already exists`, { cause: e });
      throw e;
    }
  },

  // An id with NUL cannot be stored (plain-text.ts): not found, as on SQLite.
  getWebhook: async ({ sql }, id) => {
    if (hasNul(id)) return undefined;
    const r = await sql.one<WebhookRow>('SELECT * FROM webhooks WHERE id = $1', [id]);
    return r ? toWebhook(r) : undefined;
  },

  listWebhooks: async ({ sql }, tenant, page) =>
    (await sql.rows<WebhookRow>('SELECT * FROM webhooks WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3', [tenant, page.after ?? '', limitOf(page.limit)])).map(toWebhook),

  updateWebhook: async ({ sql }, id, patch) => {
    const r = await sql.one<WebhookRow>(
      `UPDATE webhooks SET url = COALESCE($2, url), events = COALESCE($3, events), active = COALESCE($4, active), updated_at = $5 WHERE id = $1 RETURNING *`,
      [id, patch.url ?? null, patch.events ? JSON.stringify(patch.events) : null, patch.active ?? null, patch.updatedAt],
    );
    return r ? toWebhook(r) : undefined;
  },

  deleteWebhook: async ({ sql }, id) => (await sql.run('DELETE FROM webhooks WHERE id = $1', [id])) === 1,

  webhooksForSession: async ({ sql }, sessionId) =>
    (await sql.rows<WebhookRow>('SELECT w.* FROM sessions s JOIN webhooks w ON w.tenant = s.tenant AND w.active WHERE s.id = $1', [sessionId])).map(toWebhook),

  addWebhookDeliveries: async ({ sql }, deliveries) => {
    if (deliveries.length === 0) return;
    const cols: unknown[][] = Array.from({ length: 9 }, () => []);
    for (const d of deliveries) {
      const values = [d.id, d.webhookId, d.tenant, d.eventType, d.eventId, d.body, d.createdAt, d.nextAttemptAt, d.retryUntil];
      for (let i = 0; i < values.length; i++) cols[i]!.push(values[i]);
    }
    await sql.run(
      `INSERT INTO webhook_deliveries (id, webhook_id, tenant, event_type, event_id, body, created_at, next_attempt_at, retry_until)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::bigint[])`,
      cols,
    );
  },

  getWebhookDelivery: async ({ sql }, id) => {
    if (hasNul(id)) return undefined;
    const r = await sql.one<WebhookDeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = $1', [id]);
    return r ? toWebhookDelivery(r) : undefined;
  },

  listWebhookDeliveries: async ({ sql }, webhookId, page) =>
    (
      await sql.rows<WebhookDeliveryRow>('SELECT * FROM webhook_deliveries WHERE webhook_id = $1 AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3', [
        webhookId,
        page.after ?? null,
        limitOf(page.limit),
      ])
    ).map(toWebhookDelivery),

  listWebhookAttempts: async ({ sql }, ids) =>
    ids.length === 0 ? [] : (await sql.rows<WebhookAttemptRow>('SELECT * FROM webhook_attempts WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id, n', [ids])).map(toWebhookAttempt),

  hasDueWebhookDeliveries: async ({ sql }, now) => (await sql.one("SELECT 1 AS one FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1 LIMIT 1", [now])) !== undefined,

  /** One statement: due deliveries locked and skipped by concurrent claims (FOR UPDATE SKIP LOCKED), leased for one attempt. */
  claimWebhookDeliveries: async ({ sql }, now, leaseMs, limit) => {
    const rows = await sql.rows<WebhookDeliveryRow & { url: string; secret: string }>(
      `UPDATE webhook_deliveries d SET claim = d.claim + 1, next_attempt_at = $2, leased_until = $2
       FROM (SELECT d2.id FROM webhook_deliveries d2 JOIN webhooks w2 ON w2.id = d2.webhook_id
             WHERE d2.status = 'pending' AND d2.next_attempt_at <= $1 AND w2.active
             ORDER BY d2.next_attempt_at LIMIT $3 FOR UPDATE OF d2 SKIP LOCKED) picked, webhooks w
       WHERE d.id = picked.id AND w.id = d.webhook_id
       RETURNING d.*, w.url AS url, w.secret AS secret`,
      [now, now + leaseMs, limitOf(limit)],
    );
    return rows
      .map((r) => ({ ...toWebhookDelivery(r), claim: Number(r.claim), url: r.url, secret: r.secret }))
      .sort((a, b) => a.nextAttemptAt! - b.nextAttemptAt! || a.createdAt - b.createdAt);
  },

  recordWebhookAttempt: ({ atomic }, o) =>
    atomic(async (q) => {
      const a = o.attempt;
      const changed = await q.run(
        `UPDATE webhook_deliveries SET status = $3, attempts = attempts + 1, next_attempt_at = $4, leased_until = NULL,
           delivered_at = CASE WHEN $3 = 'delivered' THEN $5 ELSE delivered_at END, last_error = $6, last_status_code = $7
         WHERE id = $1 AND claim = $2 AND status = 'pending' AND leased_until IS NOT NULL`,
        [o.deliveryId, o.claim, o.status, o.status === 'pending' ? o.nextAttemptAt : null, a.startedAt + a.durationMs, a.error, a.statusCode],
      );
      if (changed !== 1) return false;
      await q.run('INSERT INTO webhook_attempts (delivery_id, n, started_at, duration_ms, status_code, error) VALUES ($1, $2, $3, $4, $5, $6)', [
        o.deliveryId,
        a.n,
        a.startedAt,
        a.durationMs,
        a.statusCode,
        a.error,
      ]);
      return true;
    }),

  redeliverWebhook: ({ atomic }, id, now, retryUntil) =>
    atomic(async (q) => {
      const r = await q.one<WebhookDeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [id]);
      if (!r) return undefined;
      if (r.status === 'pending' && r.leased_until !== null && Number(r.leased_until) > now) throw new StoreError('conflict', `delivery ${id} is being attempted now`);
      const u = await q.one<WebhookDeliveryRow>(
        "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, retry_until = $3, claim = claim + 1, leased_until = NULL WHERE id = $1 RETURNING *",
        [id, now, retryUntil],
      );
      return toWebhookDelivery(u!);
    }),
};
