/**
 * `keel/client`: a typed client of Keel's HTTP API, for browsers and Node (ADR-0038, decision 6).
 *
 * Its types are generated from the OpenAPI document the server serves (`schema.ts`, by
 * `npm run client:types`); requests go through openapi-fetch. Every method returns the answer's
 * typed body, or throws a `KeelProblem` (an RFC 9457 problem: `type`, `status`, `title`, `detail`
 * and the problem's fields) or a `KeelNetworkError`. `follow()` streams a session or a run and
 * resumes by its last event id after a dropped connection.
 *
 * No Node-only imports here or in anything this imports (test/client/portable.test.ts checks it).
 *
 *   const keel = createKeelClient({ baseUrl: 'http://127.0.0.1:8787', apiKey });
 *   const session = await keel.sessions.create({ title: 'hello' });
 *   const { run } = await keel.sessions.send(session.id, 'How warm is it in Tokyo?');
 *   for await (const item of keel.runs.follow(run.id)) if (item.kind === 'delta') print(item.delta.delta);
 */
import createClient, { type Client } from 'openapi-fetch';
import { follow, type FollowOptions, type KeelFollow } from './follow.ts';
import { isAbort, KeelNetworkError, KeelProblem } from './problems.ts';
import type { components, paths } from './schema.ts';

export {
  follow,
  type FollowConnection,
  type FollowItem,
  type FollowOptions,
  type FollowTarget,
  type KeelFollow,
  type StreamDelta,
} from './follow.ts';
export {
  KeelNetworkError,
  KeelProblem,
  PROBLEM_BASE,
  PROBLEM_TYPES,
  type FieldsOf,
  type KeelProblemOf,
  type Problem,
  type ProblemFields,
  type ProblemType,
} from './problems.ts';
export type { components, operations, paths } from './schema.ts';

type Schemas = components['schemas'];
export type Session = Schemas['Session'];
export type Run = Schemas['Run'];
export type RunStatus = Run['status'];
/** A durable event of a session's log (`data` depends on `type`: docs/events.md). */
export type KeelEvent = Schemas['Event'];
export type Content = Schemas['Content'];
export type Tombstone = Schemas['Tombstone'];
export type RunComparison = Schemas['RunComparison'];
export type RerunRequest = Schemas['RerunRequest'];
export type RerunBatch = Schemas['RerunBatch'];
export type Dataset = Schemas['Dataset'];
export type DatasetItem = Schemas['DatasetItem'];
export type Experiment = Schemas['Experiment'];
export type ExperimentResults = Schemas['ExperimentResults'];
export type ExperimentItem = Schemas['ExperimentItem'];
export type Webhook = Schemas['Webhook'];
export type CreatedWebhook = Schemas['CreatedWebhook'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
/** A session with its latest run, run count, tokens and cost (`sessions.summaries`). */
export type SessionSummary = Schemas['SessionSummary'];
/** A run waiting for a person, with its session (`inbox.list`). */
export type InboxItem = Schemas['InboxItem'];
/** Tokens and cost of the tenant's runs, grouped, with its quotas against their use (`usage.get`). */
export type UsageReport = Schemas['UsageReport'];
/** One scope's quotas (a tenant's, an API key's) against their use now. */
export type QuotaReport = NonNullable<Schemas['QuotaReport']>;

/** A page of a list: `next_cursor` goes in `cursor` for the next one (null on the last page). */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

type Method = 'get' | 'post' | 'patch' | 'delete';
/** The JSON body of an operation. */
export type BodyOf<P extends keyof paths, M extends Method> = paths[P][M] extends {
  requestBody?: { content: { 'application/json': infer B } };
}
  ? B
  : never;
/** The query parameters of an operation. */
export type QueryOf<P extends keyof paths, M extends Method> = paths[P][M] extends {
  parameters: { query?: infer Q };
}
  ? NonNullable<Q>
  : never;
/** The 2xx JSON answer of an operation. */
export type AnswerOf<P extends keyof paths, M extends Method> = paths[P][M] extends {
  responses: infer R;
}
  ? {
      [S in keyof R]: S extends 200 | 201 | 202
        ? R[S] extends { content: { 'application/json': infer A } }
          ? A
          : never
        : never;
    }[keyof R]
  : never;

export type SendMessage = BodyOf<'/v1/sessions/{id}/messages', 'post'>;
export type SendResult = AnswerOf<'/v1/sessions/{id}/messages', 'post'>;

export interface KeelClientOptions {
  /** The server, e.g. `http://127.0.0.1:8787` (a path prefix is kept). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>` (`keel keys create`). */
  apiKey?: string;
  /** Another fetch (tests, proxies); default `globalThis.fetch`. */
  fetch?: (request: Request) => Promise<Response>;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

/** Per call: an abort signal, and for the POSTs that change something, an `Idempotency-Key`. */
export interface CallOptions {
  signal?: AbortSignal;
  /** The server answers a retry with the same key as it answered the first (for 24 hours). */
  idempotencyKey?: string;
  headers?: Record<string, string>;
}

export type KeelClient = ReturnType<typeof createKeelClient>;

/** A client of a Keel server. */
export function createKeelClient(o: KeelClientOptions) {
  const baseUrl = o.baseUrl.replace(/\/+$/, '');
  const send = o.fetch ?? ((request: Request) => globalThis.fetch(request));
  // A GET, or a request with an idempotency key, is sent again once when the connection fails
  // before an answer: a kept-alive connection the server closed (it restarted) fails so.
  const fetchOnce = async (request: Request): Promise<Response> => {
    const again = request.method === 'GET' || request.headers.has('idempotency-key') ? request.clone() : undefined;
    try {
      return await send(request);
    } catch (e) {
      if (!again || isAbort(e) || request.signal.aborted) throw e;
      return send(again);
    }
  };
  const raw: Client<paths> = createClient<paths>({
    baseUrl,
    fetch: fetchOnce,
    headers: { ...o.headers, ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}) },
  });

  /** The answer's body, or the problem it is. */
  async function call<R extends { data?: unknown; error?: unknown; response: Response }>(
    request: () => Promise<R>,
  ): Promise<Exclude<R['data'], undefined>> {
    let r: R;
    try {
      r = await request();
    } catch (e) {
      if (isAbort(e) || e instanceof KeelProblem) throw e;
      throw new KeelNetworkError(baseUrl, e);
    }
    if (!r.response.ok) throw new KeelProblem(r.response.status, r.error, r.response.statusText);
    return r.data as Exclude<R['data'], undefined>;
  }

  const init = (c: CallOptions = {}) => ({
    ...(c.signal ? { signal: c.signal } : {}),
    headers: { ...c.headers, ...(c.idempotencyKey ? { 'idempotency-key': c.idempotencyKey } : {}) },
  });
  const id = (id: string) => ({ path: { id } });

  const client = {
    baseUrl,
    /** The openapi-fetch client underneath: every route of the API, typed (`raw.GET('/v1/usage', …)`). */
    raw,

    sessions: {
      create: (body: BodyOf<'/v1/sessions', 'post'> = {}, c?: CallOptions) =>
        call(() => raw.POST('/v1/sessions', { body, ...init(c) })),
      get: (sessionId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions/{id}', { params: id(sessionId), ...init(c) })),
      list: (query: QueryOf<'/v1/sessions', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions', { params: { query }, ...init(c) })),
      /** A message (text, parts, or the whole body with `if_busy`, `agent`…): it starts a run, or joins one. */
      send: (sessionId: string, message: Content | SendMessage, c?: CallOptions) =>
        call(() =>
          raw.POST('/v1/sessions/{id}/messages', {
            params: id(sessionId),
            body: typeof message === 'string' || Array.isArray(message) ? { content: message } : message,
            ...init(c),
          }),
        ),
      /** The session's durable events, after `cursor` (a seq). */
      events: (sessionId: string, query: QueryOf<'/v1/sessions/{id}/events', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions/{id}/events', { params: { ...id(sessionId), query }, ...init(c) })),
      /** What people saw. */
      transcript: (sessionId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions/{id}/transcript', { params: id(sessionId), ...init(c) })),
      /** What the model sees next. */
      context: (sessionId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions/{id}/context', { params: id(sessionId), ...init(c) })),
      /** The session's runs, oldest first. */
      runs: (sessionId: string, query: QueryOf<'/v1/sessions/{id}/runs', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions/{id}/runs', { params: { ...id(sessionId), query }, ...init(c) })),
      /** Sessions with their latest run, run count, tokens and cost; `q` searches title, id and metadata. */
      summaries: (query: QueryOf<'/v1/session-summaries', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/session-summaries', { params: { query }, ...init(c) })),
      fork: (sessionId: string, body: BodyOf<'/v1/sessions/{id}/fork', 'post'>, c?: CallOptions) =>
        call(() => raw.POST('/v1/sessions/{id}/fork', { params: id(sessionId), body, ...init(c) })),
      /** Switches the current branch: moves the leaf to an entry (null: before the first). */
      setLeaf: (sessionId: string, entryId: string | null, c?: CallOptions) =>
        call(() =>
          raw.POST('/v1/sessions/{id}/leaf', { params: id(sessionId), body: { entry_id: entryId }, ...init(c) }),
        ),
      /** Compacts the session's context now. */
      compact: (sessionId: string, body: BodyOf<'/v1/sessions/{id}/compact', 'post'> = {}, c?: CallOptions) =>
        call(() => raw.POST('/v1/sessions/{id}/compact', { params: id(sessionId), body, ...init(c) })),
      /** The session as versioned JSONL (`sessions/import` takes it back). */
      export: (sessionId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions/{id}/export', { params: id(sessionId), parseAs: 'text', ...init(c) })),
      /** Whether the log alone explains every model request the session recorded (`keel replay --verify`). */
      replayCheck: (sessionId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/sessions/{id}/replay-check', { params: id(sessionId), ...init(c) })),
      /** Archives the session (its log stays readable). */
      archive: (sessionId: string, c?: CallOptions) =>
        call(() => raw.DELETE('/v1/sessions/{id}', { params: id(sessionId), ...init(c) })),
      /** Erases the session for good; a tombstone remains. */
      erase: (sessionId: string, c?: CallOptions) =>
        call(() => raw.POST('/v1/sessions/{id}/erase', { params: id(sessionId), ...init(c) })),
      /** Streams the session (every run), resuming by itself: see `follow`. */
      follow: (sessionId: string, f?: FollowOptions): KeelFollow => follow(client, { sessionId }, f),
    },

    runs: {
      get: (runId: string, c?: CallOptions) => call(() => raw.GET('/v1/runs/{id}', { params: id(runId), ...init(c) })),
      /** The tenant's runs, oldest first: by `rerun_of`, `agent`, `status`, creation time. */
      list: (query: QueryOf<'/v1/runs', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/runs', { params: { query }, ...init(c) })),
      steps: (runId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/runs/{id}/steps', { params: id(runId), ...init(c) })),
      cancel: (runId: string, c?: CallOptions) =>
        call(() => raw.POST('/v1/runs/{id}/cancel', { params: id(runId), ...init(c) })),
      pause: (runId: string, c?: CallOptions) =>
        call(() => raw.POST('/v1/runs/{id}/pause', { params: id(runId), ...init(c) })),
      resume: (runId: string, c?: CallOptions) =>
        call(() => raw.POST('/v1/runs/{id}/resume', { params: id(runId), ...init(c) })),
      /** A message into the running run's next step. */
      steer: (runId: string, content: Content, c?: CallOptions) =>
        call(() => raw.POST('/v1/runs/{id}/steer', { params: id(runId), body: { content }, ...init(c) })),
      /** Decides an approval the run waits for (`decision` and, to approve with edited arguments, `arguments`). */
      decide: (
        runId: string,
        approvalId: string,
        body: BodyOf<'/v1/runs/{id}/approvals/{approval_id}', 'post'>,
        c?: CallOptions,
      ) =>
        call(() =>
          raw.POST('/v1/runs/{id}/approvals/{approval_id}', {
            params: { path: { id: runId, approval_id: approvalId } },
            body,
            ...init(c),
          }),
        ),
      approve: (runId: string, approvalId: string, o: { arguments?: unknown } & CallOptions = {}) =>
        client.runs.decide(
          runId,
          approvalId,
          { decision: 'approve', ...(o.arguments !== undefined ? { arguments: o.arguments } : {}) },
          o,
        ),
      deny: (runId: string, approvalId: string, o: { reason?: string } & CallOptions = {}) =>
        client.runs.decide(
          runId,
          approvalId,
          { decision: 'deny', ...(o.reason !== undefined ? { reason: o.reason } : {}) },
          o,
        ),
      /** Answers the question the run waits for (`toolCallId` picks one when it asked several). */
      input: (runId: string, answers: unknown, o: { toolCallId?: string } & CallOptions = {}) =>
        call(() =>
          raw.POST('/v1/runs/{id}/input', {
            params: id(runId),
            body: { answers, ...(o.toolCallId !== undefined ? { tool_call_id: o.toolCallId } : {}) },
            ...init(o),
          }),
        ),
      /** Delivers a signal by name (`waitForSignal`); the payload is any JSON. */
      signal: (runId: string, name: string, payload: unknown = null, c?: CallOptions) =>
        call(() =>
          raw.POST('/v1/runs/{id}/signals/{name}', {
            params: { path: { id: runId, name } },
            body: payload,
            ...init(c),
          }),
        ),
      /**
       * Delivers the outputs of the run's client tool calls (tools sent as `client_tools`): each
       * ends its call's wait once; the run goes on when every pending call has one.
       */
      toolResults: (runId: string, results: BodyOf<'/v1/runs/{id}/tool-results', 'post'>['results'], c?: CallOptions) =>
        call(() => raw.POST('/v1/runs/{id}/tool-results', { params: id(runId), body: { results }, ...init(c) })),
      /** Reruns the run (from a step, on another agent version…) in a new forked session: the new run. */
      rerun: (runId: string, body: RerunRequest = {}, c?: CallOptions) =>
        call(() => raw.POST('/v1/runs/{id}/rerun', { params: id(runId), body, ...init(c) })),
      /** Two runs side by side, step by step. */
      compare: (a: string, b: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/runs/{a}/compare/{b}', { params: { path: { a, b } }, ...init(c) })),
      /** Streams the run until it ends, resuming by itself: see `follow`. */
      follow: (runId: string, f?: FollowOptions): KeelFollow => follow(client, { runId }, f),
    },

    blobs: {
      /**
       * Content the log refers to by hash (a large tool result, an attachment: `{ $blob, size,
       * mediaType }` in an event): its bytes, media type and whole size; `range` (inclusive, as
       * HTTP's) for a part of it.
       */
      get: async (
        hash: string,
        o: { range?: { start: number; end?: number } } & CallOptions = {},
      ): Promise<{ bytes: Uint8Array; mediaType: string; size: number; range?: { start: number; end: number } }> => {
        const base = init(o);
        const headers = o.range
          ? { ...base.headers, range: `bytes=${o.range.start}-${o.range.end ?? ''}` }
          : base.headers;
        let response: Response | undefined;
        const data = await call(async () => {
          const r = await raw.GET('/v1/blobs/{hash}', {
            params: { path: { hash } },
            parseAs: 'arrayBuffer',
            ...base,
            headers,
          });
          response = r.response;
          return r;
        });
        const bytes = new Uint8Array(data as ArrayBuffer);
        const mediaType = response!.headers.get('content-type') ?? 'application/octet-stream';
        const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(response!.headers.get('content-range') ?? '');
        return m
          ? { bytes, mediaType, size: Number(m[3]), range: { start: Number(m[1]), end: Number(m[2]) } }
          : { bytes, mediaType, size: bytes.length };
      },
    },

    inbox: {
      /** The tenant's runs that wait for a person (an approval or an answer), oldest first. */
      list: (query: QueryOf<'/v1/inbox', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/inbox', { params: { query }, ...init(c) })),
    },

    usage: {
      /** Tokens and cost of the caller's tenant's runs, grouped; its quotas against their use now (JSON). */
      get: (query: Omit<QueryOf<'/v1/usage', 'get'>, 'format'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/usage', { params: { query }, ...init(c) })) as Promise<UsageReport>,
    },

    reruns: {
      /** Reruns every run a filter matches, as one batch. */
      create: (body: BodyOf<'/v1/reruns', 'post'>, c?: CallOptions) =>
        call(() => raw.POST('/v1/reruns', { body, ...init(c) })),
      get: (batchId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/reruns/{id}', { params: id(batchId), ...init(c) })),
      items: (batchId: string, query: QueryOf<'/v1/reruns/{id}/items', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/reruns/{id}/items', { params: { ...id(batchId), query }, ...init(c) })),
    },

    datasets: {
      create: (body: BodyOf<'/v1/datasets', 'post'>, c?: CallOptions) =>
        call(() => raw.POST('/v1/datasets', { body, ...init(c) })),
      list: (query: QueryOf<'/v1/datasets', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/datasets', { params: { query }, ...init(c) })),
      get: (datasetId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/datasets/{id}', { params: id(datasetId), ...init(c) })),
      items: (datasetId: string, query: QueryOf<'/v1/datasets/{id}/items', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/datasets/{id}/items', { params: { ...id(datasetId), query }, ...init(c) })),
      delete: async (datasetId: string, c?: CallOptions): Promise<void> => {
        await call(() => raw.DELETE('/v1/datasets/{id}', { params: id(datasetId), ...init(c) }));
      },
    },

    experiments: {
      create: (body: BodyOf<'/v1/experiments', 'post'>, c?: CallOptions) =>
        call(() => raw.POST('/v1/experiments', { body, ...init(c) })),
      list: (query: QueryOf<'/v1/experiments', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/experiments', { params: { query }, ...init(c) })),
      get: (experimentId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/experiments/{id}', { params: id(experimentId), ...init(c) })),
      results: (experimentId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/experiments/{id}/results', { params: id(experimentId), ...init(c) })),
      items: (experimentId: string, query: QueryOf<'/v1/experiments/{id}/items', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/experiments/{id}/items', { params: { ...id(experimentId), query }, ...init(c) })),
      /** A late score (0 to 1 by name), merged into the item's scores. */
      score: (experimentId: string, itemId: string, scores: Record<string, number>, c?: CallOptions) =>
        call(() =>
          raw.POST('/v1/experiments/{id}/items/{item_id}/scores', {
            params: { path: { id: experimentId, item_id: itemId } },
            body: { scores },
            ...init(c),
          }),
        ),
      cancel: (experimentId: string, c?: CallOptions) =>
        call(() => raw.POST('/v1/experiments/{id}/cancel', { params: id(experimentId), ...init(c) })),
    },

    webhooks: {
      /** Subscribes a URL; the answer shows the signing secret, once. */
      create: (body: BodyOf<'/v1/webhooks', 'post'>, c?: CallOptions) =>
        call(() => raw.POST('/v1/webhooks', { body, ...init(c) })),
      list: (query: QueryOf<'/v1/webhooks', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/webhooks', { params: { query }, ...init(c) })),
      get: (webhookId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/webhooks/{id}', { params: id(webhookId), ...init(c) })),
      update: (webhookId: string, body: BodyOf<'/v1/webhooks/{id}', 'patch'>, c?: CallOptions) =>
        call(() => raw.PATCH('/v1/webhooks/{id}', { params: id(webhookId), body, ...init(c) })),
      delete: async (webhookId: string, c?: CallOptions): Promise<void> => {
        await call(() => raw.DELETE('/v1/webhooks/{id}', { params: id(webhookId), ...init(c) }));
      },
      /** A new signing secret, shown once; the replaced one still signs for `overlap_seconds`. */
      rotateSecret: (
        webhookId: string,
        body: BodyOf<'/v1/webhooks/{id}/rotate-secret', 'post'> = {},
        c?: CallOptions,
      ) => call(() => raw.POST('/v1/webhooks/{id}/rotate-secret', { params: id(webhookId), body, ...init(c) })),
      deliveries: (webhookId: string, query: QueryOf<'/v1/webhooks/{id}/deliveries', 'get'> = {}, c?: CallOptions) =>
        call(() => raw.GET('/v1/webhooks/{id}/deliveries', { params: { ...id(webhookId), query }, ...init(c) })),
      /** One delivery by its id alone (the `Keel-Delivery` header). */
      delivery: (deliveryId: string, c?: CallOptions) =>
        call(() => raw.GET('/v1/webhook-deliveries/{id}', { params: id(deliveryId), ...init(c) })),
      redeliver: (webhookId: string, deliveryId: string, c?: CallOptions) =>
        call(() =>
          raw.POST('/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver', {
            params: { path: { id: webhookId, delivery_id: deliveryId } },
            ...init(c),
          }),
        ),
    },
  };
  return client;
}
