/** Sessions whose noticed seqs are kept (the least recently noticed go first). */
const MAX_SESSIONS = 10_000;

/** What is known of a session's commits: every seq up to `upTo` was noticed; `ahead`, ranges noticed past a gap (and whether this instance committed them). */
interface Noticed {
  /** Unknown until a notice starts from seq 1 or a barrier fills what came before. */
  upTo: number | undefined;
  ahead: Array<[first: number, last: number, own: boolean]>;
}

/**
 * Tells a store instance's listeners of the commits to each session (the members' on the local
 * bus, this instance's own) so that a notice that a session reached seq `q` means what it means on
 * PostgreSQL, whose notices come in commit order: the notices of every commit up to `q` arrived
 * before it, and with them the deltas their members broadcast before those commits.
 *
 * The bus keeps each member's messages in order, not the order of commits across members. So a
 * notice is passed on only once the notices of the session's seqs before it arrived. When they
 * have not (another member's notice is still on its way, or the commits before it were made by a
 * process off the bus, or before this instance listened), a barrier of the bus decides: once every
 * member answered it, every notice of a commit made before it started has arrived, and a gap
 * still left was made off the bus. The notices that came before the barrier started are then
 * passed on, up to their last seq.
 *
 * This instance's own commits are told to its listeners once the microtasks queued meanwhile ran
 * (after the session log published them itself: a follower takes them from there, as on
 * PostgreSQL, whose notices come back after the commit's answer).
 */
export class CommitNotices {
  private readonly deliver: (sessionId: string, lastSeq: number, own: boolean) => void;
  private readonly barrier: () => Promise<void>;
  private readonly sessions = new Map<string, Noticed>();
  /** Sessions with notices past a gap. */
  private readonly gapped = new Set<string>();
  private filling = false;
  private fillAgain = false;
  /** Own commits not told yet, by session: the seq reached, and whether every commit up to it since the last notice was this instance's. */
  private own = new Map<string, { seq: number; own: boolean }>();
  private ownScheduled = false;
  private closed = false;

  /**
   * `deliver` tells the listeners that the session's notices reached `lastSeq`; `own` when every
   * commit since its previous notice was this instance's (whose session log published them).
   */
  constructor(deliver: (sessionId: string, lastSeq: number, own: boolean) => void, barrier: () => Promise<void>) {
    this.deliver = deliver;
    this.barrier = barrier;
  }

  /** Another member committed seqs `first`..`last` to the session. */
  heard(sessionId: string, first: number, last: number): void {
    const noticed = this.note(sessionId, first, last, false);
    if (noticed) this.deliver(sessionId, noticed.upTo, false);
  }

  /** This instance committed seqs `first`..`last` to the session. */
  committed(sessionId: string, first: number, last: number): void {
    const noticed = this.note(sessionId, first, last, true);
    if (!noticed) return;
    // Told after other notices of the session meanwhile: its own commits since the previous one, if any.
    const before = this.own.get(sessionId);
    this.own.set(sessionId, { seq: noticed.upTo, own: noticed.own && (before?.own ?? true) });
    if (this.ownScheduled) return;
    this.ownScheduled = true;
    // After the microtasks now queued: a commit runs in one, and the session log publishes its
    // events in the ones that follow (an append's or a transaction's continuation).
    process.nextTick(() => this.tellOwn());
  }

  /**
   * Resolves once every notice of a commit made before the call has reached the listeners. After
   * a first barrier every such notice has arrived; one that arrived during it past a gap is passed
   * on after a second (which only those need).
   */
  async caughtUp(): Promise<void> {
    this.tellOwn();
    const before = this.gaps();
    await this.barrier();
    this.fill(before);
    const during = this.gaps();
    if (during.size > 0) {
      await this.barrier();
      this.fill(during);
    }
    this.tellOwn();
  }

  close(): void {
    this.closed = true;
    this.sessions.clear();
    this.gapped.clear();
    this.own.clear();
  }

  /**
   * Notes the range; returns the seq up to which the session's notices now have no gap, if that
   * moved, and whether this instance committed every seq it moved over.
   */
  private note(
    sessionId: string,
    first: number,
    last: number,
    own: boolean,
  ): { upTo: number; own: boolean } | undefined {
    if (this.closed) return undefined;
    let s = this.sessions.get(sessionId);
    if (s) this.sessions.delete(sessionId);
    else s = { upTo: first === 1 ? 0 : undefined, ahead: [] };
    this.sessions.set(sessionId, s);
    if (this.sessions.size > MAX_SESSIONS) {
      const oldest = this.sessions.keys().next().value!;
      this.sessions.delete(oldest);
      this.gapped.delete(oldest);
    }
    if (s.upTo !== undefined && first <= s.upTo + 1) {
      if (last <= s.upTo) return undefined;
      s.upTo = last;
      return { upTo: s.upTo, own: this.absorb(sessionId, s) && own };
    }
    s.ahead.push([first, last, own]);
    this.gapped.add(sessionId);
    this.fillSoon();
    return undefined;
  }

  /** Moves `upTo` over the ranges noticed ahead that now follow it without a gap; whether this instance committed all of them. */
  private absorb(sessionId: string, s: Noticed): boolean {
    if (s.ahead.length === 0) return true;
    let own = true;
    s.ahead.sort((a, b) => a[0] - b[0]);
    while (s.ahead.length > 0 && s.upTo !== undefined && s.ahead[0]![0] <= s.upTo + 1) {
      const [, last, ownRange] = s.ahead.shift()!;
      s.upTo = Math.max(s.upTo, last);
      own &&= ownRange;
    }
    if (s.ahead.length === 0) this.gapped.delete(sessionId);
    return own;
  }

  /** The sessions with a gap, and the highest seq noticed past it. */
  private gaps(): Map<string, number> {
    const gaps = new Map<string, number>();
    for (const sessionId of this.gapped) {
      const s = this.sessions.get(sessionId);
      if (s && s.ahead.length > 0) gaps.set(sessionId, Math.max(...s.ahead.map((r) => r[1])));
    }
    return gaps;
  }

  /** Barriers, one at a time, until no gap is left that was there when one started. */
  private fillSoon(): void {
    if (this.filling) {
      this.fillAgain = true;
      return;
    }
    this.filling = true;
    void (async () => {
      try {
        do {
          this.fillAgain = false;
          const before = this.gaps();
          await this.barrier();
          this.fill(before);
        } while (this.fillAgain && !this.closed);
      } finally {
        this.filling = false;
      }
    })();
  }

  /** After a barrier: the gaps that were there before it were made off the bus. */
  private fill(before: Map<string, number>): void {
    for (const [sessionId, seq] of before) {
      const s = this.sessions.get(sessionId);
      if (!s || (s.upTo !== undefined && s.upTo >= seq)) continue;
      s.upTo = seq;
      s.ahead = s.ahead.filter((r) => r[1] > seq);
      this.absorb(sessionId, s);
      if (s.ahead.length === 0) this.gapped.delete(sessionId);
      // Over seqs committed off the bus.
      this.deliver(sessionId, s.upTo, false);
    }
  }

  private tellOwn(): void {
    this.ownScheduled = false;
    if (this.own.size === 0 || this.closed) return;
    const own = this.own;
    this.own = new Map();
    for (const [sessionId, { seq, own: mine }] of own) this.deliver(sessionId, seq, mine);
  }
}
