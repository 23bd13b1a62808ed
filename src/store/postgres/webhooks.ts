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
import { CLAIM_WINDOW_FACTOR, DISABLED_SUBSCRIPTION_ERROR } from '../port/index.ts';
import { type FlatOpsOf } from '../port/layout.ts';

type WebhookStoreOps = FlatOpsOf<'webhooks'>;
import type { OpContext } from './context.ts';
import { sqlState, UNIQUE_VIOLATION } from './sql.ts';
import { hasNul } from '../plain-text.ts';

const FAIL_DISABLED = `status = 'failed', next_attempt_at = NULL, leased_until = NULL, last_error = '${DISABLED_SUBSCRIPTION_ERROR}'`;

type PgWebhookOps = {
  [K in keyof WebhookStoreOps]: (
    ctx: OpContext,
    ...args: Parameters<WebhookStoreOps[K]>
  ) => ReturnType<WebhookStoreOps[K]>;
};

const limitOf = (n: number) => Math.max(0, Math.min(Math.floor(n), 1000));

export const pgWebhookOperations: PgWebhookOps = {
  createWebhook: async ({ guarded }, w) => {
    try {
      await guarded((q) =>
        q.run(
          'INSERT INTO webhooks (id, tenant, url, events, secret, previous_secret, previous_secret_expires_at, active, created_at, updated_at, run_id, format, headers, ref) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)',
          [
            w.id,
            w.tenant,
            w.url,
            JSON.stringify(w.events),
            w.secret,
            w.previousSecret,
            w.previousSecretExpiresAt,
            w.active,
            w.createdAt,
            w.updatedAt,
            ...scopeColumns(w),
          ],
        ),
      );
    } catch (e) {
      if (sqlState(e) === UNIQUE_VIOLATION)
        throw new StoreError('conflict', `webhook ${w.id} already exists`, { cause: e });
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
    (
      await sql.rows<WebhookRow>(
        'SELECT * FROM webhooks WHERE tenant = $1 AND run_id IS NULL AND id > $2 ORDER BY id LIMIT $3',
        [tenant, page.after ?? '', limitOf(page.limit)],
      )
    ).map(toWebhook),

  listRunWebhooks: async ({ sql }, runId) =>
    hasNul(runId)
      ? []
      : (await sql.rows<WebhookRow>('SELECT * FROM webhooks WHERE run_id = $1 ORDER BY created_at, id', [runId])).map(
          toWebhook,
        ),

  updateWebhook: ({ atomic }, id, patch) =>
    atomic(async (q) => {
      const r = await q.one<WebhookRow>(
        `UPDATE webhooks SET url = COALESCE($2, url), events = COALESCE($3, events), active = COALESCE($4, active), updated_at = $5 WHERE id = $1 RETURNING *`,
        [
          id,
          patch.url ?? null,
          patch.events ? JSON.stringify(patch.events) : null,
          patch.active ?? null,
          patch.updatedAt,
        ],
      );
      if (r && !r.active)
        await q.run(
          `UPDATE webhook_deliveries SET ${FAIL_DISABLED}, ended_at = $2 WHERE webhook_id = $1 AND status = 'pending'`,
          [id, patch.updatedAt],
        );
      return r ? toWebhook(r) : undefined;
    }),

  rotateWebhookSecret: async ({ sql }, id, r) => {
    const overlaps = r.previousSecretExpiresAt > r.updatedAt;
    const row = await sql.one<WebhookRow>(
      `UPDATE webhooks SET previous_secret = CASE WHEN $3 THEN secret ELSE NULL END, previous_secret_expires_at = $4, secret = $2, updated_at = $5 WHERE id = $1 RETURNING *`,
      [id, r.secret, overlaps, overlaps ? r.previousSecretExpiresAt : null, r.updatedAt],
    );
    return row ? toWebhook(row) : undefined;
  },

  deleteWebhook: async ({ sql }, id) => (await sql.run('DELETE FROM webhooks WHERE id = $1', [id])) === 1,

  // The tenant's subscriptions, and those of the given runs of the session (by the run_id index).
  webhooksForSession: async ({ sql }, sessionId, runIds = []) =>
    (
      await sql.rows<WebhookRow>(
        `SELECT w.* FROM sessions s JOIN webhooks w ON w.tenant = s.tenant AND w.active AND w.run_id IS NULL WHERE s.id = $1
         UNION ALL
         SELECT w.* FROM webhooks w JOIN runs r ON r.id = w.run_id AND r.session_id = $1
         WHERE w.run_id = ANY($2::text[]) AND w.active`,
        [sessionId, runIds],
      )
    ).map(toWebhook),

  addWebhookDeliveries: async ({ sql }, deliveries) => {
    if (deliveries.length === 0) return;
    const cols: unknown[][] = Array.from({ length: 10 }, () => []);
    for (const d of deliveries) {
      const values = [
        d.id,
        d.webhookId,
        d.tenant,
        d.eventType,
        d.eventId,
        d.sessionId,
        d.body,
        d.createdAt,
        d.nextAttemptAt,
        d.retryUntil,
      ];
      for (let i = 0; i < values.length; i++) cols[i]!.push(values[i]);
    }
    await sql.run(
      `INSERT INTO webhook_deliveries (id, webhook_id, tenant, event_type, event_id, session_id, body, created_at, next_attempt_at, retry_until)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::bigint[])`,
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
      await sql.rows<WebhookDeliveryRow>(
        'SELECT * FROM webhook_deliveries WHERE webhook_id = $1 AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3',
        [webhookId, page.after ?? null, limitOf(page.limit)],
      )
    ).map(toWebhookDelivery),

  listWebhookAttempts: async ({ sql }, ids) =>
    ids.length === 0
      ? []
      : (
          await sql.rows<WebhookAttemptRow>(
            'SELECT * FROM webhook_attempts WHERE delivery_id = ANY($1::text[]) ORDER BY delivery_id, n',
            [ids],
          )
        ).map(toWebhookAttempt),

  hasDueWebhookDeliveries: async ({ sql }, now, o) =>
    (o?.except?.length
      ? await sql.one(
          `SELECT 1 AS one FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
           WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND NOT (w.url = ANY($2::text[])) LIMIT 1`,
          [now, o.except],
        )
      : await sql.one(
          "SELECT 1 AS one FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1 LIMIT 1",
          [now],
        )) !== undefined,

  /**
   * One statement (after ending those of disabled subscriptions): due deliveries locked and skipped
   * by concurrent claims (FOR UPDATE SKIP LOCKED), leased for one attempt. With destinations: a
   * window of CLAIM_WINDOW_FACTOR × limit due deliveries of URLs that are not busy, of which at most
   * perDestination a URL counting those in flight.
   */
  claimWebhookDeliveries: async ({ sql }, now, leaseMs, limit, destinations) => {
    await sql.run(
      `UPDATE webhook_deliveries d SET ${FAIL_DISABLED}, ended_at = $1
       WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id AND NOT w.active)`,
      [now],
    );
    const n = limitOf(limit);
    const busy = Object.entries(destinations?.busy ?? {});
    const cap = destinations?.perDestination ?? n;
    const full = busy.filter(([, k]) => k >= cap).map(([url]) => url);
    const rows = await sql.rows<ClaimedRow>(
      `WITH cand AS (
         SELECT d2.id, d2.next_attempt_at, w2.url FROM webhook_deliveries d2 JOIN webhooks w2 ON w2.id = d2.webhook_id
         WHERE d2.status = 'pending' AND d2.next_attempt_at <= $1 AND w2.active AND NOT (w2.url = ANY($4::text[]))
         ORDER BY d2.next_attempt_at LIMIT $5 FOR UPDATE OF d2 SKIP LOCKED
       ), ranked AS (
         SELECT cand.id, cand.next_attempt_at, row_number() OVER (PARTITION BY cand.url ORDER BY cand.next_attempt_at, cand.id) + coalesce(b.n, 0) AS pos
         FROM cand LEFT JOIN unnest($6::text[], $7::int[]) AS b(url, n) ON b.url = cand.url
       ), picked AS (
         SELECT id FROM ranked WHERE pos <= $8 ORDER BY next_attempt_at LIMIT $3
       )
       UPDATE webhook_deliveries d SET claim = d.claim + 1, next_attempt_at = $2, leased_until = $2
       FROM picked, webhooks w
       WHERE d.id = picked.id AND w.id = d.webhook_id
       RETURNING d.*, ${CLAIMED_COLUMNS}`,
      [
        now,
        now + leaseMs,
        n,
        full,
        destinations ? CLAIM_WINDOW_FACTOR * n : n,
        busy.map(([url]) => url),
        busy.map(([, k]) => k),
        cap,
      ],
    );
    return rows.map(toClaimed).sort((a, b) => a.nextAttemptAt! - b.nextAttemptAt! || a.createdAt - b.createdAt);
  },

  recordWebhookAttempt: ({ atomic }, o) =>
    atomic(async (q) => {
      const a = o.attempt;
      const changed = await q.run(
        `UPDATE webhook_deliveries SET status = $3, attempts = attempts + 1, next_attempt_at = $4, leased_until = NULL,
           delivered_at = CASE WHEN $3 = 'delivered' THEN $5 ELSE delivered_at END, ended_at = CASE WHEN $3 = 'pending' THEN NULL ELSE $5 END,
           last_error = $6, last_status_code = $7
         WHERE id = $1 AND claim = $2 AND status = 'pending' AND leased_until IS NOT NULL`,
        [
          o.deliveryId,
          o.claim,
          o.status,
          o.status === 'pending' ? o.nextAttemptAt : null,
          a.startedAt + a.durationMs,
          a.error,
          a.statusCode,
        ],
      );
      if (changed !== 1) return false;
      await q.run(
        'INSERT INTO webhook_attempts (delivery_id, n, started_at, duration_ms, status_code, error) VALUES ($1, $2, $3, $4, $5, $6)',
        [o.deliveryId, a.n, a.startedAt, a.durationMs, a.statusCode, a.error],
      );
      return true;
    }),

  hasExpiredWebhookDeliveries: async ({ sql }, o) =>
    (await sql.one(
      `SELECT 1 AS one WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'delivered' AND ended_at IS NOT NULL AND ended_at < $1)
          OR EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'failed' AND ended_at IS NOT NULL AND ended_at < $2)`,
      [o.deliveredBefore, o.failedBefore],
    )) !== undefined,

  /** From the (status, ended_at) index, the longest ended first (rows another prune holds are skipped). */
  pruneWebhookDeliveries: ({ atomic }, o) =>
    atomic(async (q) => {
      const limit = limitOf(o.limit);
      const pick = (status: string) =>
        `SELECT id FROM webhook_deliveries WHERE status = '${status}' AND ended_at IS NOT NULL AND ended_at < $1 ORDER BY ended_at LIMIT $2 FOR UPDATE SKIP LOCKED`;
      const delivered = await q.rows<{ id: string }>(pick('delivered'), [o.deliveredBefore, limit]);
      const failed = await q.rows<{ id: string }>(pick('failed'), [o.failedBefore, limit - delivered.length]);
      const ids = [...delivered, ...failed].map((r) => r.id);
      if (ids.length === 0) return 0;
      await q.run('DELETE FROM webhook_attempts WHERE delivery_id = ANY($1::text[])', [ids]);
      return q.run('DELETE FROM webhook_deliveries WHERE id = ANY($1::text[])', [ids]);
    }),

  redeliverWebhook: ({ atomic }, id, now, retryUntil) =>
    atomic(async (q) => {
      const r = await q.one<WebhookDeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [id]);
      if (!r) return undefined;
      if (r.status === 'pending' && r.leased_until !== null && Number(r.leased_until) > now)
        throw new StoreError('conflict', `delivery ${id} is being attempted now`);
      const w = await q.one<{ active: boolean }>('SELECT active FROM webhooks WHERE id = $1', [r.webhook_id]);
      if (w && !w.active)
        throw new StoreError('conflict', `the subscription of delivery ${id} is disabled: enable it first`);
      const u = await q.one<WebhookDeliveryRow>(
        "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, retry_until = $3, claim = claim + 1, leased_until = NULL, ended_at = NULL WHERE id = $1 RETURNING *",
        [id, now, retryUntil],
      );
      return toWebhookDelivery(u!);
    }),
};
