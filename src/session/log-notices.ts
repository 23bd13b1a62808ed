/**
 * Cross-node notices: while sessions are followed here (or this process numbers deltas, or keeps
 * recent ones), the store's notices of other processes' commits reach the followers as `changed`,
 * and other nodes' deltas are relayed to them. Keeps the highest seq heard of per session, which
 * tells a feed how far other nodes' deltas have reached this process.
 */
import type { DeltaEvent } from '../core/index.ts';
import type { JsonObject, Store } from '../store/index.ts';
import { parsePosition } from './feed-position.ts';
import { MAX_POSITIONS, type LiveBus } from './live-bus.ts';

/**
 * The longest a check of the followed sessions (after a change the store could not detail) waits
 * for the store to confirm that its notices caught up, when it does not (its connection for
 * notices is down): as long as a feed waits for deltas (NOTICE_WAIT_MS in feed-hold.ts).
 */
const NOTICES_WAIT_MS = 10_000;

export class CrossNodeNotices {
  private readonly store: Store;
  private readonly bus: LiveBus;
  /** Whether this process needs the notices besides its followed sessions (see `followed`). */
  private readonly wanted: () => boolean;
  /** The highest seq the store's notices told of, per session, most recently moved last. */
  private readonly heardSeqs = new Map<string, number>();
  private stopFollowing: (() => void) | undefined;
  private checking = false;
  /** A change without details came while the followed sessions were being checked: check again after. */
  private checkAgain = false;

  constructor(store: Store, bus: LiveBus, wanted: () => boolean) {
    this.store = store;
    this.bus = bus;
    this.wanted = wanted;
  }

  /** Notes that the session's log reached `seq`; false when that was known already. */
  private heard(sessionId: string, seq: number): boolean {
    // A log at 0 has nothing to tell (a catch-up notice read before the session's first commit).
    if (seq <= (this.heardSeqs.get(sessionId) ?? 0)) return false;
    this.heardSeqs.delete(sessionId);
    this.heardSeqs.set(sessionId, seq);
    if (this.heardSeqs.size > MAX_POSITIONS) this.heardSeqs.delete(this.heardSeqs.keys().next().value!);
    return true;
  }

  /** See SessionLog.deltasHeardUpTo. */
  deltasHeardUpTo(sessionId: string): number {
    if (!this.store.notices.broadcast) return Infinity;
    return this.heardSeqs.get(sessionId) ?? 0;
  }

  /** See SessionLog.noticesCaughtUp. */
  caughtUp(): Promise<void> {
    return this.store.notices.broadcast && this.store.notices.caughtUp
      ? this.store.notices.caughtUp()
      : Promise.resolve();
  }

  /**
   * Whether this process needs to hear of other processes' commits: a session is followed here,
   * or the process wants other nodes' deltas (see `wanted`).
   */
  followed(): boolean {
    if (this.wanted()) return true;
    return this.bus.followedSessions().length > 0;
  }

  /**
   * Starts hearing the store's notices (if not yet): commits of other processes reach the
   * followers as `changed`, for each followed session whose log moved past what this process
   * published; other nodes' deltas are relayed.
   */
  follow(): void {
    if (this.stopFollowing || !this.store.notices.changes) return;
    this.stopFollowing = this.store.notices.changes((change) => {
      if (change?.message) return this.received(change.sessionId, change.message);
      if (change) return this.changedTo(change.sessionId, change.lastSeq, change.own);
      if (this.checking) {
        this.checkAgain = true;
        return;
      }
      this.checking = true;
      void this.checkFollowed().finally(() => (this.checking = false));
    });
  }

  /** Stops hearing the notices when nothing here needs them any more. */
  unfollowUnlessNeeded(): void {
    if (!this.followed()) this.unfollow();
  }

  private unfollow(): void {
    this.stopFollowing?.();
    this.stopFollowing = undefined;
    // What is heard from now on may have gaps until followed again.
    this.heardSeqs.clear();
  }

  /** A message another node broadcast about a session: its deltas reach this node's followers. */
  private received(sessionId: string, message: JsonObject): void {
    if (
      message.kind !== 'delta' ||
      typeof message.id !== 'string' ||
      parsePosition(message.id) === undefined ||
      typeof message.delta !== 'object' ||
      message.delta === null
    )
      return;
    this.bus.relay(sessionId, {
      kind: 'delta',
      id: message.id,
      delta: message.delta as DeltaEvent,
      fromAnotherNode: true,
    });
  }

  private async checkFollowed(): Promise<void> {
    do {
      this.checkAgain = false;
      await this.tellFollowers();
    } while (this.checkAgain && this.stopFollowing);
  }

  /**
   * A session's log moved to `lastSeq` (the store said so): its followers read what they miss, and
   * the deltas this process makes for it from now on are numbered after it.
   */
  private changedTo(sessionId: string, lastSeq: number, own?: true): void {
    // A notice of a commit this process published already (its own, told back by the store that
    // cannot tell whose it is) is its own: its events reached the followers here at once.
    if (!own && this.bus.seqOf(sessionId) >= lastSeq && lastSeq > 0) own = true;
    this.bus.reached(sessionId, lastSeq, true);
    if (!this.heard(sessionId, lastSeq) || !this.bus.isFollowed(sessionId)) return;
    this.bus.changed(
      own ? { kind: 'changed', sessionId, upTo: lastSeq, own } : { kind: 'changed', sessionId, upTo: lastSeq },
    );
  }

  /**
   * Something changed, the store cannot tell what (a commit of a process that does not notify its
   * commits, or a reconnection): the followed sessions are read. On a store that relays other
   * nodes' deltas, what a read finds may have been committed after deltas still on their way to
   * this process, so the notices of what was committed before the read come first (see
   * `caughtUp`), for at most NOTICES_WAIT_MS.
   */
  private async tellFollowers(): Promise<void> {
    const followed = this.bus.followedSessions();
    if (!this.followed()) return this.unfollow();
    const read: Array<[string, number]> = [];
    for (const sessionId of followed) {
      const s = await this.store.sessions.get(sessionId).catch(() => undefined);
      if (s) read.push([sessionId, s.lastSeq]);
    }
    if (this.store.notices.broadcast && read.some(([sessionId, seq]) => seq > (this.heardSeqs.get(sessionId) ?? 0))) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.caughtUp(),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, NOTICES_WAIT_MS))),
      ]);
      clearTimeout(timer);
    }
    for (const [sessionId, seq] of read) this.changedTo(sessionId, seq);
  }
}
