import type { JsonObject, StoreChange } from '../port/index.ts';
import { CommitNotices } from './commit-notices.ts';
import { LocalBus } from './local-bus.ts';

/**
 * The live feed of a SQLite store across the processes on its file (ADR-0035): the messages it
 * broadcasts (token deltas) and the notices of its commits go to the other members of the file's
 * local bus, in one ordered stream per member, so a delta broadcast before a commit arrives before
 * the commit's notice; what the others send comes to `tell`. Commit notices are passed on in the
 * order of each session's seqs (see CommitNotices), this store's own included.
 *
 * Lines on the bus: `{"t":"d","s":session,"m":message}` (a broadcast) and
 * `{"t":"c","s":session,"f":first seq,"q":last seq}` (a commit).
 */
export class LiveRelay {
  private readonly bus: LocalBus;
  private readonly notices: CommitNotices;
  private readonly tell: (change: StoreChange) => void;

  /** Joins the bus of the database `file`; `tell` hears the other members' broadcasts and every commit's notice. */
  constructor(file: string, tell: (change: StoreChange) => void) {
    this.tell = tell;
    this.bus = new LocalBus(LocalBus.directoriesFor(file), (m) => this.received(m));
    this.notices = new CommitNotices(
      (sessionId, lastSeq, own) => this.tell(own ? { sessionId, lastSeq, own } : { sessionId, lastSeq }),
      () => this.bus.barrier(),
    );
  }

  /** Messages dropped on the way to a slow member, or too large to send. */
  get dropped(): number {
    return this.bus.dropped;
  }

  /** The other members this relay sends to now. */
  get peers(): number {
    return this.bus.peerCount;
  }

  /** The socket this relay listens on, once it does. */
  get socket(): string | undefined {
    return this.bus.socket;
  }

  /** To the other members, never to this store: best effort (a slow member misses some). */
  broadcast(sessionId: string, message: JsonObject): void {
    this.bus.send({ t: 'd', s: sessionId, m: message }, true);
  }

  /** This store committed seqs `first`..`last` to the session: called at once on commit, before anything else runs. */
  committed(sessionId: string, first: number, last: number): void {
    this.bus.send({ t: 'c', s: sessionId, f: first, q: last }, false);
    this.notices.committed(sessionId, first, last);
  }

  /** Resolves once the notices of every commit made before the call (and the broadcasts before them) arrived. */
  caughtUp(): Promise<void> {
    return this.notices.caughtUp();
  }

  close(): void {
    this.notices.close();
    this.bus.close();
  }

  private received(m: JsonObject): void {
    if (typeof m.s !== 'string') return;
    if (m.t === 'd' && typeof m.m === 'object' && m.m !== null)
      this.tell({ sessionId: m.s, message: m.m as JsonObject });
    else if (m.t === 'c' && Number.isSafeInteger(m.f) && Number.isSafeInteger(m.q))
      this.notices.heard(m.s, m.f as number, m.q as number);
  }
}
