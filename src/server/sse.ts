import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { DeltaEvent } from '../core/index.ts';
import type { SessionEvent, SessionLog } from '../session/index.ts';
import { isTerminal, type RunStatus } from '../store/index.ts';
import { eventJson } from './schemas.ts';

/** Sessions whose position the hub keeps (those with deltas pending always stay). */
const MAX_SESSIONS = 10_000;

/**
 * The deltas of the messages being streamed in each session, as the session log numbered them: a
 * delta's SSE id is `seq.n`, the n-th delta after durable event `seq`, the latest the session
 * published before it in the process that made the model call (see LiveItem). A step's durable
 * events (its request header, its message) are published when the step commits (ADR-0008), so
 * after the deltas that stream its message. Ids only grow, in the order a live client receives
 * events and deltas, and a client that reconnects in the middle of a message (to this node or
 * another) gets exactly the events and deltas it has not seen; after a restart the deltas are
 * gone, and the durable message replaces them. On PostgreSQL the deltas of every node arrive here.
 */
export class DeltaHub {
  private readonly sessions = new Map<string, HubSession>();
  private readonly off: () => void;

  constructor(log: SessionLog) {
    // Registered before any stream, so the hub has each delta before a connection sees it.
    this.off = log.subscribeAll((sessionId, item) => {
      const s = this.entry(sessionId);
      if (item.kind === 'delta') {
        const [seq, n] = item.id.split('.').map(Number) as [number, number];
        // Deltas after a later event: the messages streamed before it are durable (or abandoned).
        if (seq > s.seq) {
          s.seq = seq;
          s.deltas = [];
        }
        s.deltas.push({ delta: item.delta, id: item.id, seq, n });
        return;
      }
      const e = item.event;
      if (e.seq > s.seq) s.seq = e.seq;
      // A message whose durable version (or abandonment) is published needs its deltas no more.
      const done = e.type === 'assistant/message' ? e.data.message.id : e.type === 'model/retry' ? e.data.abandonedMessageId : undefined;
      if (done !== undefined) s.deltas = s.deltas.filter((d) => d.delta.messageId !== done);
      else if (e.type === 'turn/end' || (e.type === 'run/status' && isTerminal(e.data.to))) s.deltas = [];
    });
  }

  /**
   * The session's position, most recently used last. Sessions seen without deltas pending are
   * forgotten beyond MAX_SESSIONS; a session never seen numbers its first deltas after seq 0.
   */
  private entry(sessionId: string): HubSession {
    let s = this.sessions.get(sessionId);
    if (s) this.sessions.delete(sessionId);
    else s = { seq: 0, deltas: [] };
    this.sessions.set(sessionId, s);
    if (this.sessions.size > MAX_SESSIONS) {
      for (const [id, other] of this.sessions) {
        if (other.deltas.length === 0) {
          this.sessions.delete(id);
          break;
        }
      }
    }
    return s;
  }

  /** The messages streaming in a session now: their deltas so far, in id order. */
  current(sessionId: string): { deltas: readonly HubDelta[] } | undefined {
    const s = this.sessions.get(sessionId);
    return s && s.deltas.length > 0 ? s : undefined;
  }

  close(): void {
    this.off();
  }
}

interface HubDelta {
  delta: DeltaEvent;
  id: string;
  seq: number;
  n: number;
}

interface HubSession {
  /** The latest durable seq seen (of an event, or that a delta follows), and the deltas since. */
  seq: number;
  /** Deltas of the messages with no durable version yet. */
  deltas: HubDelta[];
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

// Every connection following a session sends the same event objects: serialize each once.
const jsonCache = new WeakMap<object, string>();
function serialized<T extends object>(item: T, shape: (x: T) => unknown): string {
  let text = jsonCache.get(item);
  if (text === undefined) jsonCache.set(item, (text = JSON.stringify(shape(item))));
  return text;
}

type Item = { kind: 'event'; event: SessionEvent } | { kind: 'delta'; delta: DeltaEvent; id: string } | { kind: 'changed' };

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
    // Drops a client that fell `queueLimit` items behind: at once, even while a write to it is
    // stuck (a client that does not read blocks writes; waiting for them would hold the
    // connection, and its buffers, for as long as the client likes). It resumes from the log.
    const drop = () => {
      overflow = true;
      queue.length = 0;
      stream.abort();
      // On Node (@hono/node-server), end the connection itself: what the socket still buffers goes.
      (c.env as { outgoing?: { destroy?: () => void } } | undefined)?.outgoing?.destroy?.();
    };
    const push = (item: Item) => {
      if (overflow) return;
      if (queue.length >= o.queueLimit) drop();
      else queue.push(item);
      wake?.();
    };
    const off = o.log.subscribe(o.sessionId, (item) => {
      if (item.kind === 'changed') push({ kind: 'changed' });
      else if (item.kind === 'event') {
        if (!o.run || item.event.runId === o.run.id) push({ kind: 'event', event: item.event });
      } else push({ kind: 'delta', delta: item.delta, id: item.id });
    });
    stream.onAbort(() => {
      closed = true;
      wake?.();
    });
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
      if (writing === 0 && !closed) void write(() => stream.write(': keep-alive\n\n')).catch(() => {});
    }, o.heartbeatMs);
    let lastSeq = cursor?.seq ?? 0;
    // The last delta position sent (ids compare as (seq, n)).
    let last = cursor ? { seq: cursor.seq, n: cursor.n } : { seq: 0, n: 0 };
    const after = (seq: number, n: number) => seq > last.seq || (seq === last.seq && n > last.n);
    let ended = false;
    // How far the log was read for a delta's sake (see the live loop).
    let readUpTo = 0;

    // Messages whose durable version was sent: their deltas are superseded.
    const finished = new Set<string>();
    const sendEvent = async (event: SessionEvent) => {
      if (event.seq <= lastSeq) return;
      lastSeq = event.seq;
      // Ids only grow: a delta numbered before this event is never sent after it.
      if (after(event.seq, 0)) last = { seq: event.seq, n: 0 };
      if (event.type === 'assistant/message') finished.add(event.data.message.id);
      else if (event.type === 'model/retry') finished.add(event.data.abandonedMessageId);
      else if (event.type === 'turn/end') finished.clear();
      await write(() => stream.writeSSE({ id: String(event.seq), data: serialized(event, eventJson) }));
      if (o.run && event.type === 'run/status' && isTerminal(event.data.to)) ended = true;
    };
    const sendDelta = async (delta: DeltaEvent, id: string) => {
      const [seq, n] = id.split('.').map(Number) as [number, number];
      // Seen before (also before a reconnect), or its message is already complete.
      if (finished.has(delta.messageId) || !after(seq, n)) return;
      last = { seq, n };
      await write(() => stream.writeSSE({ id, event: 'delta', data: serialized(delta, deltaJson) }));
    };
    // The deltas of the messages streaming now that come before durable event `beforeSeq`, once
    // the event they follow was sent: replay interleaves them with the log's events in id order,
    // as a live client got them.
    const sendCurrent = async (beforeSeq: number) => {
      const cur = o.hub.current(o.sessionId);
      if (!cur) return;
      for (const d of cur.deltas) {
        if (d.seq >= beforeSeq || d.seq > lastSeq || closed) break;
        if (after(d.seq, d.n)) await sendDelta(d.delta, d.id);
      }
    };

    try {
      // 1. What the log has after the cursor, with the deltas of the message streaming now.
      for (;;) {
        const page = await o.log.read(o.sessionId, { afterSeq: lastSeq, limit: 500, ...(o.run ? { runId: o.run.id } : {}) });
        for (const e of page) {
          await sendCurrent(e.seq);
          await sendEvent(e);
        }
        if (page.length < 500 || closed) break;
      }
      // 2. The rest of the message being streamed right now, once what it follows was sent.
      await sendCurrent(Infinity);
      if (o.run && !ended && isTerminal(await o.run.status())) {
        // Ended before we subscribed and after our read: read the rest once more.
        for (const e of await o.log.read(o.sessionId, { afterSeq: lastSeq, runId: o.run.id })) await sendEvent(e);
        ended = true;
      }
      // 3. Live.
      while (!closed && !ended && !overflow) {
        const item = queue.shift();
        if (!item) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        if (item.kind === 'changed') {
          // Another process committed: what it wrote is in the log.
          for (const e of await o.log.read(o.sessionId, { afterSeq: lastSeq, ...(o.run ? { runId: o.run.id } : {}) })) await sendEvent(e);
        } else if (item.kind === 'event') {
          // Events this process committed without publishing them (a worker's claim of the run),
          // published out of order, or written by another process: read them from the log first.
          if (item.event.seq > lastSeq + 1) {
            const gap = await o.log.read(o.sessionId, { afterSeq: lastSeq, untilSeq: item.event.seq - 1, ...(o.run ? { runId: o.run.id } : {}) });
            for (const e of gap) await sendEvent(e);
          }
          await sendEvent(item.event);
        } else {
          // A delta follows its event: one committed by another node may not have been read yet.
          const seq = Number(item.id.split('.')[0]);
          if (seq > readUpTo && seq > lastSeq) {
            for (const e of await o.log.read(o.sessionId, { afterSeq: lastSeq, untilSeq: seq, ...(o.run ? { runId: o.run.id } : {}) })) await sendEvent(e);
            readUpTo = seq;
          }
          await sendDelta(item.delta, item.id);
        }
      }
      if (ended && !closed) await write(() => stream.writeSSE({ event: 'end', data: JSON.stringify({ run_id: o.run?.id, last_seq: lastSeq }) }));
    } finally {
      clearInterval(heartbeat);
      off();
      o.onClose?.();
    }
  });
}
