import type { SessionEvent } from './event-types.ts';
import { parsePosition } from './feed-position.ts';
import type { LiveDelta } from './live-items.ts';

/** Sessions whose recent deltas are kept (those with deltas pending stay longest). */
const MAX_SESSIONS = 10_000;

/** A message's deltas are forgotten this long after its last one, if its durable version never came here. */
const STALE_MS = 120_000;

/** A delta as it was relayed (see LiveDelta), with its feed position read once. */
export type RecentDelta = LiveDelta & { seq: number; n: number };

interface Recent {
  /** The latest durable seq seen (of an event, or that a delta follows). */
  seq: number;
  deltas: RecentDelta[];
  at: number;
}

/**
 * The deltas of the messages streaming now, per session, as the session log numbered them: what a
 * feed that starts (or resumes) in the middle of a message replays after the log's events. A
 * message's deltas go once its durable version (or its abandonment) is published here, those of
 * the messages before it once a delta of another message after a later event arrives (they are
 * durable), all of a session's once its turn or run ends, or after STALE_MS without a delta.
 */
export class RecentDeltas {
  private readonly sessions = new Map<string, Recent>();

  delta(sessionId: string, d: Omit<LiveDelta, 'kind'>): void {
    const { seq, n } = parsePosition(d.id)!;
    const s = this.entry(sessionId);
    const stale = Date.now() - s.at > STALE_MS;
    if (seq > s.seq || stale) {
      s.seq = Math.max(s.seq, seq);
      // The messages streamed before it are durable; this one may go on, numbered after an event
      // another node committed while it streams (see SessionLog.publishDelta).
      s.deltas = stale ? [] : s.deltas.filter((x) => x.delta.messageId === d.delta.messageId);
    }
    s.deltas.push({
      kind: 'delta',
      delta: d.delta,
      id: d.id,
      ...(d.fromAnotherNode ? { fromAnotherNode: true as const } : {}),
      seq,
      n,
    });
    s.at = Date.now();
  }

  events(sessionId: string, events: readonly SessionEvent[]): void {
    const s = this.sessions.get(sessionId);
    if (!s) return;
    for (const e of events) {
      if (e.seq > s.seq) s.seq = e.seq;
      if (s.deltas.length === 0) continue;
      const done =
        e.type === 'assistant/message'
          ? e.data.message.id
          : e.type === 'model/retry'
            ? e.data.abandonedMessageId
            : undefined;
      if (done !== undefined) s.deltas = s.deltas.filter((d) => d.delta.messageId !== done);
      else if (
        e.type === 'turn/end' ||
        (e.type === 'run/status' && ['completed', 'failed', 'cancelled', 'timed_out'].includes(e.data.to))
      )
        s.deltas = [];
    }
  }

  /** The session's recent deltas, in id order. */
  of(sessionId: string): readonly RecentDelta[] {
    const s = this.sessions.get(sessionId);
    if (!s || s.deltas.length === 0) return [];
    if (Date.now() - s.at > STALE_MS) {
      s.deltas = [];
      return [];
    }
    return s.deltas;
  }

  /** The session's entry, most recently used last; beyond MAX_SESSIONS the least recent without deltas goes. */
  private entry(sessionId: string): Recent {
    let s = this.sessions.get(sessionId);
    if (s) this.sessions.delete(sessionId);
    else s = { seq: 0, deltas: [], at: Date.now() };
    this.sessions.set(sessionId, s);
    if (this.sessions.size > MAX_SESSIONS) {
      let victim: string | undefined;
      for (const [id, other] of this.sessions) {
        if (other.deltas.length === 0 || Date.now() - other.at > STALE_MS) {
          victim = id;
          break;
        }
      }
      this.sessions.delete(victim ?? this.sessions.keys().next().value!);
    }
    return s;
  }
}
