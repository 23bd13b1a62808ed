import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { DeltaEvent } from '../core/index.ts';
import type { SessionEvent, SessionLog } from '../session/index.ts';
import { isTerminal, type RunStatus } from '../store/index.ts';
import { eventJson } from './schemas.ts';

/**
 * The deltas of the message being streamed in each session, numbered: a delta's SSE id is
 * `seq.n`, the n-th delta after durable event `seq` (the request header of its model call). A
 * client that reconnects in the middle of a message gets exactly the deltas it has not seen; after
 * a server restart they are gone, and the durable message replaces them.
 */
export class DeltaHub {
  private readonly sessions = new Map<string, { anchor: number; deltas: DeltaEvent[] }>();
  private readonly off: () => void;

  constructor(log: SessionLog) {
    // Registered before any stream, so the hub numbers each delta before a connection sees it.
    this.off = log.subscribeAll((sessionId, item) => {
      if (item.kind === 'delta') {
        let s = this.sessions.get(sessionId);
        if (!s) this.sessions.set(sessionId, (s = { anchor: 0, deltas: [] }));
        s.deltas.push(item.delta);
        return;
      }
      const t = item.event.type;
      if (t === 'request/header') this.sessions.set(sessionId, { anchor: item.event.seq, deltas: [] });
      else if (t === 'assistant/message' || t === 'model/retry' || t === 'turn/end') this.sessions.delete(sessionId);
    });
  }

  /** The message streaming in a session now: the seq its deltas follow, and its deltas so far. */
  current(sessionId: string): { anchor: number; deltas: readonly DeltaEvent[] } | undefined {
    return this.sessions.get(sessionId);
  }

  /** The id of the session's latest delta. */
  lastId(sessionId: string): string | undefined {
    const s = this.sessions.get(sessionId);
    return s ? `${s.anchor}.${s.deltas.length}` : undefined;
  }

  close(): void {
    this.off();
  }
}

export interface StreamOptions {
  log: SessionLog;
  hub: DeltaHub;
  sessionId: string;
  /** Only this run's events (and the session's deltas while it runs); ends when the run ends. */
  run?: { id: string; status: () => Promise<RunStatus> };
  heartbeatMs: number;
  /** Items a slow client may have outstanding before the server drops it (it resumes from the log). */
  queueLimit: number;
  onOpen?: () => void;
  onClose?: () => void;
}

/** Parses a resume position: `12` (durable seq) or `12.3` (3 deltas after seq 12). */
export function parseCursor(value: string | undefined | null): { seq: number; n: number } | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const m = /^(\d+)(?:\.(\d+))?$/.exec(value.trim());
  if (!m) return undefined;
  return { seq: Number(m[1]), n: m[2] === undefined ? 0 : Number(m[2]) };
}

type Item = { kind: 'event'; event: SessionEvent } | { kind: 'delta'; delta: DeltaEvent; id: string };

const deltaJson = (d: DeltaEvent) => ({
  type: d.type,
  turn: d.turn,
  step: d.step,
  message_id: d.messageId,
  delta: d.delta,
  ...(d.type === 'tool-input/delta' ? { tool_call_id: d.toolCallId, tool_name: d.toolName } : {}),
});

/**
 * A resumable SSE stream of a session (or of one run). Durable events carry their seq as id,
 * deltas `seq.n`. It first replays from the log what the client has not seen, then follows live
 * events; a run stream sends `end` and closes when the run is terminal. A client disconnect only
 * ends this connection.
 */
export function sseStream(c: Context, cursor: { seq: number; n: number } | undefined, o: StreamOptions): Response {
  return streamSSE(c, async (stream) => {
    const queue: Item[] = [];
    let wake: (() => void) | undefined;
    let overflow = false;
    let closed = false;
    const push = (item: Item) => {
      if (queue.length >= o.queueLimit) overflow = true;
      else queue.push(item);
      wake?.();
    };
    const off = o.log.subscribe(o.sessionId, (item) => {
      if (item.kind === 'event') {
        if (!o.run || item.event.runId === o.run.id) push({ kind: 'event', event: item.event });
      } else {
        // The hub numbered it already (its listener runs first).
        push({ kind: 'delta', delta: item.delta, id: o.hub.lastId(o.sessionId)! });
      }
    });
    stream.onAbort(() => {
      closed = true;
      wake?.();
    });
    o.onOpen?.();
    const heartbeat = setInterval(() => void stream.write(': keep-alive\n\n').catch(() => {}), o.heartbeatMs);
    let lastSeq = cursor?.seq ?? 0;
    let lastDelta = cursor ? { anchor: cursor.seq, n: cursor.n } : { anchor: 0, n: 0 };
    let ended = false;

    // Messages whose durable version was sent: their deltas are superseded.
    const finished = new Set<string>();
    const sendEvent = async (event: SessionEvent) => {
      if (event.seq <= lastSeq) return;
      lastSeq = event.seq;
      if (event.type === 'assistant/message') finished.add(event.data.message.id);
      else if (event.type === 'model/retry') finished.add(event.data.abandonedMessageId);
      else if (event.type === 'turn/end') finished.clear();
      await stream.writeSSE({ id: String(event.seq), data: JSON.stringify(eventJson(event)) });
      if (o.run && event.type === 'run/status' && isTerminal(event.data.to)) ended = true;
    };
    const sendDelta = async (delta: DeltaEvent, id: string) => {
      const [a, n] = id.split('.').map(Number) as [number, number];
      // Seen before (also before a reconnect), or its message is already complete.
      if (finished.has(delta.messageId) || a < lastDelta.anchor || (a === lastDelta.anchor && n <= lastDelta.n)) return;
      lastDelta = { anchor: a, n };
      await stream.writeSSE({ id, event: 'delta', data: JSON.stringify(deltaJson(delta)) });
    };

    try {
      // 1. What the log has after the cursor.
      for (;;) {
        const page = await o.log.read(o.sessionId, { afterSeq: lastSeq, limit: 500, ...(o.run ? { runId: o.run.id } : {}) });
        for (const e of page) await sendEvent(e);
        if (page.length < 500 || closed) break;
      }
      // 2. The message being streamed right now, once what it follows was sent.
      const cur = o.hub.current(o.sessionId);
      if (cur && cur.anchor <= lastSeq) {
        for (let i = 0; i < cur.deltas.length; i++) await sendDelta(cur.deltas[i]!, `${cur.anchor}.${i + 1}`);
      }
      if (o.run && !ended && isTerminal(await o.run.status())) {
        // Ended before we subscribed and after our read: read the rest once more.
        for (const e of await o.log.read(o.sessionId, { afterSeq: lastSeq, runId: o.run.id })) await sendEvent(e);
        ended = true;
      }
      // 3. Live.
      while (!closed && !ended) {
        if (overflow) {
          await stream.write(': too slow, reconnect with Last-Event-ID to resume\n\n').catch(() => {});
          break;
        }
        const item = queue.shift();
        if (!item) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        if (item.kind === 'event') await sendEvent(item.event);
        else await sendDelta(item.delta, item.id);
      }
      if (ended && !closed) await stream.writeSSE({ event: 'end', data: JSON.stringify({ run_id: o.run?.id, last_seq: lastSeq }) });
    } finally {
      clearInterval(heartbeat);
      off();
      o.onClose?.();
    }
  });
}
