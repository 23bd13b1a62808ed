import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { DEFAULT_SECRET_OVERLAP_MS, isWebhookUrl, MAX_SECRET_OVERLAP_MS } from '../../runs/index.ts';
import {
  WEBHOOK_EVENT_TYPES,
  type WebhookAttempt,
  type WebhookDelivery,
  type WebhookRecord,
} from '../../store/index.ts';
import type { AppContext, AppEnv } from '../context.ts';
import { body, IdParam, json, pathParam, problem } from '../openapi.ts';
import { Cursor, cursorOf, plainText } from '../schemas.ts';

const problems = {
  400: problem('Invalid request (problem type `validation`)'),
  401: problem('Missing or invalid API key'),
  404: problem('No such webhook (or not yours)'),
} as const;
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const Url = plainText(2048)
  .refine(isWebhookUrl, 'an absolute http:// or https:// URL')
  .describe('Where deliveries are POSTed (http or https)');
const Events = z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).describe('The event types to deliver');
const DeliveryParams = IdParam.extend({ delivery_id: pathParam('delivery_id') });

export const WebhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
    active: z.boolean(),
    previous_secret_expires_at: z
      .string()
      .nullable()
      .describe('While a rotation’s overlap lasts: until when the replaced secret also signs deliveries'),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Webhook');

const CreatedWebhookSchema = WebhookSchema.extend({
  secret: z.string().describe('The signing secret: shown here once, keep it to verify Keel-Signature'),
}).openapi('CreatedWebhook');

const AttemptSchema = z
  .object({
    n: z.number().int(),
    started_at: z.string(),
    duration_ms: z.number().int(),
    status_code: z.number().int().nullable().describe("The receiver's HTTP status; null when no response came"),
    error: z.string().nullable().describe('Why the attempt failed (HTTP 500, ECONNREFUSED, timeout…); null for a 2xx'),
  })
  .openapi('WebhookAttempt');

export const DeliverySchema = z
  .object({
    id: z.string().describe('The delivery id (the Keel-Delivery header and the body’s id): receivers dedupe by it'),
    webhook_id: z.string(),
    event_type: z.enum(WEBHOOK_EVENT_TYPES),
    event_id: z.string().describe('The session event that caused it'),
    session_id: z.string().nullable().describe('That event’s session (erasing the session removes its deliveries)'),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.array(AttemptSchema),
    created_at: z.string(),
    next_attempt_at: z.string().nullable(),
    retry_until: z.string(),
    delivered_at: z.string().nullable(),
    last_error: z.string().nullable(),
    last_status_code: z.number().int().nullable(),
    payload: z.record(z.string(), z.unknown()).describe('The JSON body sent'),
  })
  .openapi('WebhookDelivery');

const CreateBody = z.strictObject({
  url: Url,
  events: Events,
  secret: plainText(256, 16).optional().describe('The signing secret (default: one is generated, `whsec_…`)'),
  active: z.boolean().optional().describe('Default true'),
});

const PatchBody = z.strictObject({ url: Url.optional(), events: Events.optional(), active: z.boolean().optional() });

const RotateBody = z.strictObject({
  overlap_seconds: z
    .number()
    .int()
    .min(0)
    .max(MAX_SECRET_OVERLAP_MS / 1000)
    .optional()
    .describe(
      `How long the replaced secret still signs deliveries (default ${DEFAULT_SECRET_OVERLAP_MS / 1000} s, a day; at most a week; 0: not at all)`,
    ),
});

const webhookJson = (w: WebhookRecord) => ({
  id: w.id,
  url: w.url,
  events: w.events,
  active: w.active,
  previous_secret_expires_at: iso(w.previousSecretExpiresAt),
  created_at: iso(w.createdAt)!,
  updated_at: iso(w.updatedAt)!,
});

const attemptJson = (a: WebhookAttempt) => ({
  n: a.n,
  started_at: iso(a.startedAt)!,
  duration_ms: a.durationMs,
  status_code: a.statusCode,
  error: a.error,
});

const deliveryJson = (d: WebhookDelivery, attempts: WebhookAttempt[]) => ({
  id: d.id,
  webhook_id: d.webhookId,
  event_type: d.eventType,
  event_id: d.eventId,
  session_id: d.sessionId,
  status: d.status,
  attempts: attempts.map(attemptJson),
  created_at: iso(d.createdAt)!,
  next_attempt_at: iso(d.nextAttemptAt),
  retry_until: iso(d.retryUntil)!,
  delivered_at: iso(d.deliveredAt),
  last_error: d.lastError,
  last_status_code: d.lastStatusCode,
  payload: JSON.parse(d.body) as Record<string, unknown>,
});

/** `/v1/webhooks`: the caller's tenant's subscriptions, their deliveries and attempts, redelivery (docs/webhooks.md). */
export function webhookRoutes(app: OpenAPIHono<AppEnv>, ctx: AppContext): void {
  const hooks = ctx.rt.webhooks;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/webhooks',
      tags: ['webhooks'],
      summary: 'Subscribe a URL to events of your tenant; the response shows the signing secret, once',
      request: body(CreateBody),
      responses: { 201: json(CreatedWebhookSchema, 'The new subscription, with its secret'), ...problems },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const w = await hooks.create(c.get('tenant'), {
        url: b.url,
        events: b.events,
        ...(b.secret !== undefined ? { secret: b.secret } : {}),
        ...(b.active !== undefined ? { active: b.active } : {}),
      });
      return c.json({ ...webhookJson(w), secret: w.secret }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/webhooks',
      tags: ['webhooks'],
      summary: 'List your subscriptions (oldest first)',
      request: { query: Cursor },
      responses: {
        200: json(
          z.object({ data: z.array(WebhookSchema), next_cursor: z.string().nullable() }),
          'A page of subscriptions',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const after = cursorOf(q);
      const page = await hooks.list(c.get('tenant'), { limit: q.limit + 1, ...(after ? { after } : {}) });
      const data = page.slice(0, q.limit);
      return c.json({ data: data.map(webhookJson), next_cursor: page.length > q.limit ? data.at(-1)!.id : null }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/webhooks/{id}',
      tags: ['webhooks'],
      summary: 'A subscription',
      request: { params: IdParam },
      responses: { 200: json(WebhookSchema, 'The subscription'), ...problems },
    }),
    async (c) => c.json(webhookJson(await hooks.get(c.get('tenant'), c.req.valid('param').id)), 200),
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/v1/webhooks/{id}',
      tags: ['webhooks'],
      summary:
        'Change a subscription’s URL, events, or whether it is active (a disabled one gets no new deliveries, and its pending ones end failed)',
      request: { params: IdParam, ...body(PatchBody) },
      responses: { 200: json(WebhookSchema, 'The subscription as changed'), ...problems },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const w = await hooks.update(c.get('tenant'), c.req.valid('param').id, {
        ...(b.url !== undefined ? { url: b.url } : {}),
        ...(b.events !== undefined ? { events: b.events } : {}),
        ...(b.active !== undefined ? { active: b.active } : {}),
      });
      return c.json(webhookJson(w), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/v1/webhooks/{id}',
      tags: ['webhooks'],
      summary: 'Delete a subscription, with its deliveries and their attempts',
      request: { params: IdParam },
      responses: { 204: { description: 'Deleted' }, ...problems },
    }),
    async (c) => {
      await hooks.delete(c.get('tenant'), c.req.valid('param').id);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/webhooks/{id}/rotate-secret',
      tags: ['webhooks'],
      summary:
        'A new signing secret, shown once; the replaced one still signs deliveries (a second v1= in Keel-Signature) until the overlap ends',
      request: { params: IdParam, ...body(RotateBody, false) },
      responses: { 200: json(CreatedWebhookSchema, 'The subscription with its new secret'), ...problems },
    }),
    async (c) => {
      const b = (c.req.valid('json') as z.infer<typeof RotateBody> | undefined) ?? {};
      const w = await hooks.rotateSecret(
        c.get('tenant'),
        c.req.valid('param').id,
        b.overlap_seconds !== undefined ? { overlapMs: b.overlap_seconds * 1000 } : {},
      );
      return c.json({ ...webhookJson(w), secret: w.secret }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/webhooks/{id}/deliveries',
      tags: ['webhooks'],
      summary: 'A subscription’s deliveries, newest first, each with its attempts',
      request: { params: IdParam, query: Cursor },
      responses: {
        200: json(
          z.object({ data: z.array(DeliverySchema), next_cursor: z.string().nullable() }),
          'A page of deliveries',
        ),
        ...problems,
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const after = cursorOf(q);
      const page = await hooks.deliveries(c.get('tenant'), c.req.valid('param').id, {
        limit: q.limit + 1,
        ...(after ? { after } : {}),
      });
      const data = page.slice(0, q.limit);
      return c.json(
        {
          data: data.map((d) => deliveryJson(d.delivery, d.attempts)),
          next_cursor: page.length > q.limit ? data.at(-1)!.delivery.id : null,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/webhook-deliveries/{id}',
      tags: ['webhooks'],
      summary: 'A delivery of one of your subscriptions, by its id alone (the Keel-Delivery header), with its attempts',
      request: { params: IdParam },
      responses: { 200: json(DeliverySchema, 'The delivery'), ...problems },
    }),
    async (c) => {
      const d = await hooks.deliveryById(c.get('tenant'), c.req.valid('param').id);
      return c.json(deliveryJson(d.delivery, d.attempts), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver',
      tags: ['webhooks'],
      summary:
        'Attempt a delivery again now (retried again for a day if it fails), whatever its status; the same delivery id',
      request: { params: DeliveryParams },
      responses: {
        202: json(DeliverySchema, 'The delivery, pending again'),
        409: problem('An attempt of it is in flight, or the subscription is disabled (problem type `conflict`)'),
        ...problems,
      },
    }),
    async (c) => {
      const { id, delivery_id } = c.req.valid('param');
      const tenant = c.get('tenant');
      await hooks.redeliver(tenant, id, delivery_id);
      const d = await hooks.delivery(tenant, id, delivery_id);
      return c.json(deliveryJson(d.delivery, d.attempts), 202);
    },
  );
}
