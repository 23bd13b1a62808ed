/**
 * `follow()`: a session's or a run's SSE stream (`GET /v1/sessions/{id}/stream`,
 * `GET /v1/runs/{id}/stream`) as an async iterator that survives dropped connections.
 *
 * It reads the stream with fetch (so it sends the API key, which an EventSource cannot) and parses
 * it with eventsource-parser. It remembers the id of the last item it yielded (`12` for an event,
 * `12.3` for a delta: feed positions, session/feed-position.ts) and, when the connection drops (a
 * network error, a 5xx, or the body ending before a run's `end`), connects again with that id as
 * `Last-Event-ID` after a short backoff: the server sends exactly what comes after it. An item at
 * or before the last one yielded is never yielded again, whatever the server sends.
 *
 * It ends when the caller's `signal` aborts (or the caller stops iterating), and, for a run, after
 * the `end` item the server sends once the run reached a terminal status. A 4xx answer (no such
 * session, a bad key, an erased session) ends it with the `KeelProblem`. No Node-only imports.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import type { Client } from 'openapi-fetch';
import { comparePositions, parsePosition, type FeedPosition } from '../session/feed-position.ts';
import { isAbort, KeelNetworkError, KeelProblem } from './problems.ts';
import type { components, paths } from './schema.ts';

/** What to follow: a session (every run, never ends by itself) or one run (ends with it). */
export type FollowTarget = { sessionId: string } | { runId: string };

/** A model delta (SSE event `delta`): streamed text, reasoning or tool input, not kept in the log. */
export interface StreamDelta {
  type: 'text/delta' | 'reasoning/delta' | 'tool-input/delta';
  turn: number;
  step: number;
  message_id: string;
  delta: string;
  tool_call_id?: string;
  tool_name?: string;
}

/** One item of the stream. */
export type FollowItem =
  /** A durable event of the session's log; `id` is its seq. */
  | { kind: 'event'; id: string; event: components['schemas']['Event'] }
  /** A delta; `id` is `seq.n`, the n-th delta after event `seq`. */
  | { kind: 'delta'; id: string; delta: StreamDelta }
  /** A run stream's last item: the run ended (its terminal status was the last event). */
  | { kind: 'end'; runId: string; lastSeq: number };

/** A change of the connection: `open` each time the server accepted it, `lost` each time it failed or dropped. */
export type FollowConnection =
  { state: 'open'; attempt: number } | { state: 'lost'; attempt: number; error: unknown; retryInMs: number };

export interface FollowOptions {
  /** Start after this id (`12` or `12.3`), as a reconnect would; default: from the start. */
  after?: string;
  /** Ends the stream (the iterator returns). */
  signal?: AbortSignal;
  /** Called with each item, before it is yielded. */
  onEvent?: (item: FollowItem) => void;
  /** Called when the connection opens, and when it is lost (with the error and the delay before the next try). */
  onConnection?: (c: FollowConnection) => void;
  /** Backoff between tries: `initialDelayMs` (250) doubling up to `maxDelayMs` (5000); `maxAttempts` failures in a row (no limit) end it with the last error. */
  retry?: { initialDelayMs?: number; maxDelayMs?: number; maxAttempts?: number };
  /** Treat a connection that sends nothing (not even a keep-alive comment) for this long as dropped; default: never. */
  idleTimeoutMs?: number;
}

/** The stream: iterate it with `for await`; `lastEventId` is the id of the last item yielded. */
export interface KeelFollow extends AsyncGenerator<FollowItem, void, undefined> {
  readonly lastEventId: string | undefined;
}

/** What `follow` needs of a client (`createKeelClient`'s answer). */
export interface FollowClient {
  readonly baseUrl: string;
  readonly raw: Client<paths>;
}

/** Follows a session's or a run's stream; see the module comment. */
export function follow(client: FollowClient, target: FollowTarget, o: FollowOptions = {}): KeelFollow {
  const state = { lastEventId: o.after === '' ? undefined : o.after };
  if (state.lastEventId !== undefined && !parsePosition(state.lastEventId))
    throw new TypeError(`follow: after must be an event id like 12 or 12.3, not ${JSON.stringify(o.after)}`);
  const items = stream(client, target, o, state);
  return Object.defineProperty(items, 'lastEventId', { get: () => state.lastEventId }) as KeelFollow;
}

/** 4xx answers are final, except those that say "later". */
const retryable = (status: number) => status >= 500 || status === 408 || status === 425 || status === 429;

async function* stream(
  client: FollowClient,
  target: FollowTarget,
  o: FollowOptions,
  state: { lastEventId: string | undefined },
): AsyncGenerator<FollowItem, void, undefined> {
  const initialDelay = o.retry?.initialDelayMs ?? 250;
  const maxDelay = o.retry?.maxDelayMs ?? 5000;
  const maxAttempts = o.retry?.maxAttempts ?? Infinity;
  let last: FeedPosition | undefined = parsePosition(state.lastEventId);
  let failures = 0;
  while (!o.signal?.aborted) {
    const connection = new AbortController();
    const stop = () => connection.abort(o.signal?.reason);
    o.signal?.addEventListener('abort', stop, { once: true });
    let error: unknown;
    try {
      const headers = state.lastEventId !== undefined ? { 'last-event-id': state.lastEventId } : {};
      const init = { parseAs: 'stream', signal: connection.signal, headers: { accept: 'text/event-stream' } } as const;
      const res =
        'runId' in target
          ? await client.raw.GET('/v1/runs/{id}/stream', {
              params: { path: { id: target.runId }, header: headers },
              ...init,
            })
          : await client.raw.GET('/v1/sessions/{id}/stream', {
              params: { path: { id: target.sessionId }, header: headers },
              ...init,
            });
      if (!res.response.ok) {
        const problem = new KeelProblem(res.response.status, res.error, res.response.statusText);
        if (!retryable(res.response.status)) throw problem;
        error = problem;
      } else if (!res.data) {
        error = new Error(`the stream answered ${res.response.status} without a body`);
      } else {
        o.onConnection?.({ state: 'open', attempt: failures + 1 });
        for await (const message of messages(res.data, connection, o.idleTimeoutMs)) {
          const item = itemOf(message);
          if (!item) continue;
          if (item.kind !== 'end') {
            const at = parsePosition(item.id);
            if (at && last && comparePositions(at, last) <= 0) continue; // seen already
            if (at) last = at;
            state.lastEventId = item.id;
          }
          failures = 0;
          o.onEvent?.(item);
          yield item;
          if (item.kind === 'end') return;
        }
        // The body ended (the server went away), or the idle watch cut it.
        error = connection.signal.aborted ? connection.signal.reason : new Error('the stream ended');
      }
    } catch (e) {
      if (o.signal?.aborted) return;
      if (e instanceof KeelProblem) throw e;
      error = isAbort(e) || e instanceof KeelNetworkError ? e : new KeelNetworkError(client.baseUrl, e);
    } finally {
      o.signal?.removeEventListener('abort', stop);
      connection.abort(); // the body, if the caller stopped iterating mid-stream
    }
    if (o.signal?.aborted) return;
    failures++;
    if (failures >= maxAttempts) throw error;
    const exp = Math.min(maxDelay, initialDelay * 2 ** (failures - 1));
    const retryInMs = Math.round(exp * (0.5 + Math.random() / 2));
    o.onConnection?.({ state: 'lost', attempt: failures, error, retryInMs });
    await sleep(retryInMs, o.signal);
  }
}

/** The SSE messages of a body; a gap longer than `idleMs` without a byte aborts the connection. */
async function* messages(
  body: ReadableStream<Uint8Array>,
  connection: AbortController,
  idleMs: number | undefined,
): AsyncGenerator<EventSourceMessage> {
  const reader = body.getReader();
  const cancel = () => void reader.cancel(connection.signal.reason).catch(() => {});
  connection.signal.addEventListener('abort', cancel, { once: true });
  let idle: ReturnType<typeof setTimeout> | undefined;
  const watch = () => {
    if (idleMs === undefined) return;
    clearTimeout(idle);
    idle = setTimeout(() => connection.abort(new Error(`no data for ${idleMs} ms`)), idleMs);
  };
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (m) => queue.push(m) });
  const decoder = new TextDecoder();
  try {
    watch();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      watch();
      parser.feed(decoder.decode(value, { stream: true }));
      while (queue.length > 0) yield queue.shift()!;
    }
  } finally {
    clearTimeout(idle);
    connection.signal.removeEventListener('abort', cancel);
    cancel();
  }
}

/** An SSE message as an item; undefined for what this client does not know (kept for newer servers). */
function itemOf(m: EventSourceMessage): FollowItem | undefined {
  let data: unknown;
  try {
    data = JSON.parse(m.data);
  } catch {
    return undefined;
  }
  const event = m.event ?? 'message';
  if (event === 'message') {
    const e = data as components['schemas']['Event'];
    return { kind: 'event', id: m.id ?? String(e.seq), event: e };
  }
  if (event === 'delta' && m.id !== undefined) return { kind: 'delta', id: m.id, delta: data as StreamDelta };
  if (event === 'end') {
    const end = data as { run_id: string; last_seq: number };
    return { kind: 'end', runId: end.run_id, lastSeq: end.last_seq };
  }
  return undefined;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
