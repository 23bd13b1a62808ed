/**
 * The projection states this process keeps in memory (the latest it read), most recently used
 * last, bounded in number and in size: what lets a run's start fold only the events since the
 * last read (see readProjection in reader.ts).
 */

/** A projection's state as of a seq and leaf, kept in memory by the process that read it. */
export interface KeptState<S = unknown> {
  asOfSeq: number;
  leafId: string | null;
  state: S;
  /** The seq of the latest snapshot stored. */
  storedSeq: number;
  /** The state's size in the projection's measure (see Projection.size), for the memory bound. */
  size: number;
}

/** The key of a session's projection state (its session id first: see `forget`). */
export const projectionKey = (sessionId: string, name: string, version: number): string =>
  `${sessionId}\u0000${name}\u0000${version}`;

export class ProjectionCache {
  /** The states kept, by key, most recently used last. */
  readonly states = new Map<string, KeptState>();
  private readonly limit: number;
  private readonly sizeLimit: number;
  private size = 0;

  /** `limit` and `sizeLimit`: how many states, and how big together (in the projections' own measure). */
  constructor(limit: number, sizeLimit: number) {
    this.limit = limit;
    this.sizeLimit = sizeLimit;
  }

  get(key: string): KeptState | undefined {
    return this.states.get(key);
  }

  /** Keeps a projection state, forgetting the least recently used beyond the limits. */
  keep(key: string, state: KeptState): void {
    const before = this.states.get(key);
    if (before) {
      this.states.delete(key);
      this.size -= before.size;
    }
    this.states.set(key, state);
    this.size += state.size;
    while (this.states.size > this.limit || (this.size > this.sizeLimit && this.states.size > 1)) {
      const [oldest, s] = this.states.entries().next().value!;
      this.states.delete(oldest);
      this.size -= s.size;
    }
  }

  /** Drops one state. */
  drop(key: string): void {
    const s = this.states.get(key);
    if (!s) return;
    this.states.delete(key);
    this.size -= s.size;
  }

  /** Drops the states of a session. */
  forget(sessionId: string): void {
    for (const [key, state] of [...this.states]) {
      if (!key.startsWith(`${sessionId}\u0000`)) continue;
      this.states.delete(key);
      this.size -= state.size;
    }
  }
}
