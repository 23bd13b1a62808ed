import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { DeltaEvent } from '../core/index.ts';
import {
  eventPosition,
  FeedOverflowError,
  follow,
  formatPosition,
  type FeedPosition,
  type SessionEvent,
  type SessionLog,
} from '../session/index.ts';
import { isTerminal } from '../runs/lifecycle/run-status.ts';
import { isStoreUnavailable, type RunStatus } from '../store/index.ts';
import { eventJson } from './schemas.ts';

export interface StreamOptions {
  log: SessionLog;
  sessionId: string;
  /** Only this run's events (and the session's deltas while it runs); ends when the run ends. */
  run?: { id: string; status: () => Promise<RunStatus> };
  heartbeatMs: number;
  /** Items a slow client may have outstanding before the server drops it (it resumes from the log). */
  queueLimit: number;
  onOpen?: () => void;
  onClose?: () => void;
  /** The client fell `queueLimit` items behind and was dropped. */
  onDrop?: () => void;
}

// Every connection following a session sends the same event objects: serialize each once.
const jsonCache = new WeakMap<object, string>();
function serialized<T extends object>(item: T, shape: (x: T) => unknown): string {
  let text = jsonCache.get(item);
  if (text === undefined) jsonCache.set(item, (text = JSON.stringify(shape(item))));
  return text;
}

const deltaJson = (d: DeltaEvent) => ({
  type: d.type,
  turn: d.turn,
  step: d.step,
  message_id: d.messageId,
  delta: d.delta,
  ...(d.type === 'tool-input/delta' ? { tool_call_id: d.toolCallId, tool_name: d.toolName } : {}),
});

/**
 * A resumable SSE stream of a session (or of one run): the session's feed (`follow`, the one live
 * feed) written as SSE. Durable events carry their seq as id, deltas `seq.n` (their feed positions, see
 * feed-position.ts). A run stream sends
 * `end` and closes when the run is terminal. A client disconnect only ends this connection; a
 * client that falls `queueLimit` items behind is dropped at once and resumes from the log.
 */
export function sseStream(c: Context, cursor: FeedPosition | undefined, o: StreamOptions): Response {
  return streamSSE(c, async (stream) => {
    const closed = new AbortController();
    // Drops a client that fell `queueLimit` items behind: at once, even while a write to it is
    // stuck (a client that does not read blocks writes; waiting for them would hold the
    // connection, and its buffers, for as long as the client likes).
    const drop = () => {
      o.onDrop?.();
      stream.abort();
      // On Node (@hono/node-server), end the connection itself: what the socket still buffers goes.
      (c.env as { outgoing?: { destroy?: () => void } } | undefined)?.outgoing?.destroy?.();
    };
    stream.onAbort(() => closed.abort());
    o.onOpen?.();
    // Writes in flight: a heartbeat is only useful on an idle stream, and must not pile up behind a stuck write.
    let writing = 0;
    const write = async (f: () => Promise<unknown>) => {
      writing++;
      try {
        await f();
      } finally {
        writing--;
      }
    };
    const heartbeat = setInterval(() => {
      if (writing === 0 && !closed.signal.aborted) void write(() => stream.write(': keep-alive\n\n')).catch(() => {});
    }, o.heartbeatMs);
    const runId = o.run?.id;
    const ends = (e: SessionEvent) =>
      runId !== undefined && e.runId === runId && e.type === 'run/status' && isTerminal(e.data.to);
    let ended = false;
    let lastSeq = cursor?.seq ?? 0;
    try {
      const feed = follow(o.log, o.sessionId, {
        ...(cursor ? { after: cursor } : {}),
        ...(runId !== undefined ? { runId, endAt: ends, isDone: async () => isTerminal(await o.run!.status()) } : {}),
        queueLimit: o.queueLimit,
        onOverflow: drop,
        signal: closed.signal,
      });
      for await (const item of feed) {
        if (closed.signal.aborted) break;
        if (item.kind === 'event') {
          lastSeq = item.event.seq;
          if (ends(item.event)) ended = true;
          await write(() =>
            stream.writeSSE({
              id: formatPosition(eventPosition(item.event.seq)),
              data: serialized(item.event, eventJson),
            }),
          );
        } else
          await write(() => stream.writeSSE({ id: item.id, event: 'delta', data: serialized(item.delta, deltaJson) }));
      }
      // A run stream's feed ends with the run (its terminal status was sent, or the run had ended).
      if (runId !== undefined && !closed.signal.aborted) {
        ended ||= isTerminal(await o.run!.status());
        if (ended)
          await write(() =>
            stream.writeSSE({ event: 'end', data: JSON.stringify({ run_id: runId, last_seq: lastSeq }) }),
          );
      }
    } catch (e) {
      // An overflowing client was dropped already; it resumes from the log. So does the client of
      // a stream whose read found the database unreachable (ADR-0045): it reconnects with
      // Last-Event-ID, refused with 503 until the database is back.
      if (!(e instanceof FeedOverflowError) && !isStoreUnavailable(e)) throw e;
    } finally {
      clearInterval(heartbeat);
      closed.abort();
      o.onClose?.();
    }
  });
}
