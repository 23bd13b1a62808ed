/**
 * The session log's live side in this process: the listeners of each session (and of all), the
 * numbering of the deltas of model calls made here (a delta's id is its feed position, see
 * feed-position.ts), the runs executed here, and the recent deltas a feed starting mid-message
 * replays. SessionLog publishes committed events to it (log-commit.ts says when); the store's
 * notices of other nodes reach it through log-notices.ts.
 */
import { EventEmitter } from 'node:events';
import type { DeltaEvent } from '../core/index.ts';
import type { LiveChange, LiveDelta, LiveItem, LiveListener } from './live-items.ts';
import type { SessionEvent } from './event-types.ts';
import { formatPosition } from './feed-position.ts';
import { RecentDeltas, type RecentDelta } from './recent-deltas.ts';

const ALL = Symbol('all sessions');

/** Sessions whose delta numbering position the log keeps (the least recently used go first). */
export const MAX_POSITIONS = 10_000;

export class LiveBus {
  private readonly live = new EventEmitter();
  /** Where each session's deltas are numbered from, most recently used last. */
  private readonly positions = new Map<string, { seq: number; n: number }>();
  /** Runs this process executes (its worker claimed them: their model calls are made here), with the count of their executions. */
  private readonly runsHere = new Map<string, number>();
  private recent: RecentDeltas | undefined;
  private recentKeepers = 0;

  constructor() {
    this.live.setMaxListeners(0);
  }

  private position(sessionId: string): { seq: number; n: number } {
    let p = this.positions.get(sessionId);
    if (p) this.positions.delete(sessionId);
    else p = { seq: 0, n: 0 };
    this.positions.set(sessionId, p);
    if (this.positions.size > MAX_POSITIONS) this.positions.delete(this.positions.keys().next().value!);
    return p;
  }

  /** The latest seq of the session this process published or heard of (0 when it knows none). */
  seqOf(sessionId: string): number {
    return this.positions.get(sessionId)?.seq ?? 0;
  }

  /** The session's log reached `seq` (a commit here, or one the store told of): the next deltas are numbered after it. */
  reached(sessionId: string, seq: number, known = false): void {
    const p = known ? this.positions.get(sessionId) : this.position(sessionId);
    if (p && seq > p.seq) {
      p.seq = seq;
      p.n = 0;
    }
  }

  /** See SessionLog.executes. */
  executes(runId: string): () => void {
    this.runsHere.set(runId, (this.runsHere.get(runId) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = this.runsHere.get(runId)! - 1;
      if (n === 0) this.runsHere.delete(runId);
      else this.runsHere.set(runId, n);
    };
  }

  /** See SessionLog.numbersAfter. */
  numbersAfter(sessionId: string, runId: string, seq: number): boolean {
    return this.runsHere.has(runId) && (this.positions.get(sessionId)?.seq ?? 0) >= seq;
  }

  /** Starts keeping the recent deltas (until as many releases), see SessionLog.keepRecentDeltas. */
  keepRecent(): void {
    this.recent ??= new RecentDeltas();
    this.recentKeepers++;
  }

  releaseRecent(): void {
    if (--this.recentKeepers === 0) this.recent = undefined;
  }

  get keepsRecent(): boolean {
    return this.recentKeepers > 0;
  }

  recentDeltas(sessionId: string): readonly RecentDelta[] {
    return this.recent?.of(sessionId) ?? [];
  }

  /** Tells live followers of committed events (only once they are committed: see log-commit.ts). */
  publish(sessionId: string, events: readonly SessionEvent[]): void {
    this.recent?.events(sessionId, events);
    const last = events.at(-1)?.seq;
    // The next deltas are numbered after these events.
    if (last !== undefined) this.reached(sessionId, last);
    const one = this.live.listenerCount(sessionId) > 0;
    const all = this.live.listenerCount(ALL) > 0;
    if (!one && !all) return;
    for (const event of events) {
      if (all) this.live.emit(ALL, sessionId, { kind: 'event', event });
      if (one) this.live.emit(sessionId, { kind: 'event', event });
    }
  }

  /** Numbers a delta of a model call made here, after the latest event this process published or heard of for the session, and relays it. */
  numberDelta(sessionId: string, delta: DeltaEvent): LiveDelta {
    const p = this.position(sessionId);
    p.n++;
    const item: LiveDelta = { kind: 'delta', delta, id: formatPosition(p) };
    this.relay(sessionId, item);
    return item;
  }

  /** Tells this process's followers of a delta (one made here, or relayed from another node). */
  relay(sessionId: string, item: LiveDelta): void {
    this.recent?.delta(sessionId, item);
    if (this.live.listenerCount(ALL) > 0) this.live.emit(ALL, sessionId, item);
    if (this.live.listenerCount(sessionId) > 0) this.live.emit(sessionId, item);
  }

  /** Tells a session's followers that another process committed to it. */
  changed(change: LiveChange): void {
    if (this.live.listenerCount(change.sessionId) > 0) this.live.emit(change.sessionId, change);
  }

  on(sessionId: string, listener: LiveListener): () => void {
    this.live.on(sessionId, listener);
    return () => this.live.off(sessionId, listener);
  }

  onAll(listener: (sessionId: string, item: LiveItem) => void): () => void {
    this.live.on(ALL, listener);
    return () => this.live.off(ALL, listener);
  }

  /** Whether a session has followers here. */
  isFollowed(sessionId: string): boolean {
    return this.live.listenerCount(sessionId) > 0;
  }

  get followsAll(): boolean {
    return this.live.listenerCount(ALL) > 0;
  }

  /** The sessions followed here. */
  followedSessions(): string[] {
    return this.live.eventNames().filter((n): n is string => typeof n === 'string' && this.live.listenerCount(n) > 0);
  }
}
