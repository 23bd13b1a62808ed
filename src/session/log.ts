import { EventEmitter } from 'node:events';
import { newId, type ContentBlob, type DeltaEvent } from '../core/index.ts';
import {
  NotFoundError,
  StoreError,
  type AppendOptions,
  type JsonObject,
  type EventDraft,
  type ReadEventsOptions,
  type Store,
  type StoreOps,
  type StoredEvent,
} from '../store/index.ts';
import { blobRefsOf, extractBlobs, inflateBlobs } from './blobs.ts';
import {
  defaultRegistry,
  type EventRegistry,
  type SessionEvent,
  type SessionEventDataMap,
  type SessionEventType,
} from './event-types.ts';
import type { KeptState } from './reader.ts';
import { RecentDeltas, type RecentDelta } from './recent-deltas.ts';

/** An event to append; the log assigns id (unless given), seq, parent and time. */
export type NewEvent = {
  [K in SessionEventType]: {
    type: K;
    data: SessionEventDataMap[K];
    id?: string;
    time?: number;
    runId?: string;
    turn?: number;
    step?: number;
    /** For entries: attach under this entry instead of the current leaf (null: a new root). */
    parentId?: string | null;
    /** Content the data refers to by hash: stored (once, content-addressed) in the same transaction. */
    blobs?: readonly ContentBlob[];
  };
}[SessionEventType];

const ALL = Symbol('all sessions');

/** Sessions whose delta numbering position the log keeps (the least recently used go first). */
const MAX_POSITIONS = 10_000;

/**
 * The longest a check of the followed sessions (after a change the store could not detail) waits
 * for the store to confirm that its notices caught up, when it does not (its connection for
 * notices is down): as long as a feed waits for deltas (NOTICE_WAIT_MS in feed.ts).
 */
const NOTICES_WAIT_MS = 10_000;

/**
 * What a follower of a session hears: an event this process committed, a delta, or `changed`:
 * another process committed to the session; read the log after what you have.
 */
/** Where a log transaction collects the events to publish when it commits (see `transaction`). */
const ON_COMMIT: unique symbol = Symbol('keel.onCommit');
/** Where a log transaction collects what to run once it committed (see AppendHook). */
const AFTER_COMMIT: unique symbol = Symbol('keel.afterCommit');

/**
 * Called inside the store transaction of an append, before it commits (the webhooks outbox writes
 * its deliveries there: ADR-0017). `wants` is asked first, in memory, of the events about to be
 * appended: only when it says yes is `handler` called (and an append made outside a transaction is
 * made in one). `afterCommit` runs a function once the transaction committed (never on rollback).
 */
export interface AppendHook {
  wants(e: { type: string; data: unknown }): boolean;
  handler(
    tx: StoreOps,
    sessionId: string,
    events: readonly SessionEvent[],
    afterCommit: (fn: () => void) => void,
  ): Promise<void> | void;
}

/**
 * A delta's `id` is `seq.n`: the n-th delta after durable event `seq`, the latest of the session
 * that the process making the model call committed or heard of (another node's commit, by the
 * store's notice) before it; numbered there, once, so every node that relays it gives it the same id.
 */
export type LiveItem =
  | { kind: 'event'; event: SessionEvent }
  /** `fromAnotherNode`: the model call runs on another node, and its deltas come through the store. */
  | { kind: 'delta'; delta: DeltaEvent; id: string; fromAnotherNode?: true };
/**
 * `changed`: another process committed to the session, up to seq `upTo`. A reader reads the log up
 * to there, not further: what was committed after may follow deltas still on their way. `own`:
 * the store's notice of commits that were all this process's, published already (a reader has them).
 */
export type LiveListener = (e: LiveItem | { kind: 'changed'; sessionId: string; upTo: number; own?: true }) => void;

/**
 * The session's append-only event log: validation, blob extraction and seq allocation on the way
 * in; upcasting and blob inflation on the way out; and a live feed of what was appended.
 */
export class SessionLog {
  readonly store: Store;
  readonly registry: EventRegistry;
  private readonly live = new EventEmitter();
  /** The latest projection states this process read, most recently used last (see readProjection). */
  readonly kept = new Map<string, KeptState>();
  private readonly keptLimit: number;
  private readonly keptSizeLimit: number;
  private keptSize = 0;
  private readonly appendHooks: AppendHook[] = [];

  /** Adds a hook called inside the transaction of the appends it wants (see AppendHook); returns its removal. */
  onAppend(hook: AppendHook): () => void {
    this.appendHooks.push(hook);
    return () => {
      const i = this.appendHooks.indexOf(hook);
      if (i >= 0) this.appendHooks.splice(i, 1);
    };
  }

  private hooksWanting(events: readonly { type: string; data: unknown }[]): AppendHook[] | undefined {
    if (this.appendHooks.length === 0) return undefined;
    const wanting = this.appendHooks.filter((h) => events.some((e) => h.wants(e)));
    return wanting.length > 0 ? wanting : undefined;
  }

  /**
   * `keptStates` and `keptSize` bound the projection states kept in memory: how many, and how
   * big together (in the projections' own measure: messages, for the model context).
   */
  constructor(
    store: Store,
    registry: EventRegistry = defaultRegistry(),
    options: { keptStates?: number; keptSize?: number } = {},
  ) {
    this.store = store;
    this.registry = registry;
    this.keptLimit = options.keptStates ?? 256;
    this.keptSizeLimit = options.keptSize ?? 200_000;
    this.live.setMaxListeners(0);
  }

  /** Keeps a projection state in memory, forgetting the least recently used beyond the limits. */
  keep(key: string, state: KeptState): void {
    const before = this.kept.get(key);
    if (before) {
      this.kept.delete(key);
      this.keptSize -= before.size;
    }
    this.kept.set(key, state);
    this.keptSize += state.size;
    while (this.kept.size > this.keptLimit || (this.keptSize > this.keptSizeLimit && this.kept.size > 1)) {
      const [oldest, s] = this.kept.entries().next().value!;
      this.kept.delete(oldest);
      this.keptSize -= s.size;
    }
  }

  /**
   * Turns a new event into a storage draft (validated, large fields moved to blobs). `trusted`
   * events were built by Keel's own typed code (the loop's events): their schema check is skipped
   * on the hot path; everything that comes from outside (API, import, hooks) is validated.
   */
  encode(
    e: NewEvent,
    trusted = false,
  ): { draft: EventDraft; blobs: Array<{ hash: string; data: string }>; data: unknown } {
    const { def, data } = trusted ? this.registry.trusted(e.type, e.data) : this.registry.validate(e.type, e.data);
    const { data: stored, blobs } = extractBlobs(data as Record<string, unknown>, def.blobFields);
    // Assigned in key order, without spreads of conditional objects (several events per step).
    // An id made here cannot be in the log: the store need not look it up (one lookup an entry).
    // Every draft has the same keys: an append's loop sees one shape.
    const minted = e.id === undefined;
    const draft: EventDraft = {
      id: minted ? newId() : e.id!,
      type: e.type,
      v: def.v,
      time: e.time ?? Date.now(),
      entry: def.entry,
      minted,
      data: stored,
    };
    if (e.runId !== undefined) draft.runId = e.runId;
    if (e.turn !== undefined) draft.turn = e.turn;
    if (e.step !== undefined) draft.step = e.step;
    if (def.entry && e.parentId !== undefined) draft.parentId = e.parentId;
    if (def.leafOf) draft.leaf = (def.leafOf as (d: unknown) => string | null)(data);
    return { draft, blobs, data };
  }

  /** Appends atomically (blobs and events in one transaction) and tells live subscribers. */
  async append(
    sessionId: string,
    events: readonly NewEvent[],
    options: AppendOptions & { tx?: StoreOps; trusted?: boolean } = {},
  ): Promise<SessionEvent[]> {
    const drafts: EventDraft[] = [];
    const blobs: Array<{ hash: string; data: string }> = [];
    const datas: unknown[] = [];
    for (const e of events) {
      const enc = this.encode(e, options.trusted);
      drafts.push(enc.draft);
      for (const b of enc.blobs) blobs.push(b);
      if (e.blobs) for (const b of e.blobs) blobs.push(b);
      datas.push(enc.data);
    }
    const { tx, trusted: _trusted, ...appendOptions } = options;
    const hooks = this.hooksWanting(events);
    // A hook writes in the append's transaction: an append that wants one is made in one.
    if (hooks && !tx) return this.transaction((t) => this.append(sessionId, events, { ...options, tx: t }));
    const write = async (ops: StoreOps) => {
      if (blobs.length > 0) await ops.events.putBlobs(blobs);
      return ops.events.append(sessionId, drafts, appendOptions);
    };
    const stored = tx
      ? await write(tx)
      : blobs.length > 0
        ? await this.store.transaction(write)
        : await this.store.events.append(sessionId, drafts, appendOptions);
    // The data as appended (validated, or built by typed code when trusted), before blob extraction, is what a reader gets back: no need to read it.
    const decoded = stored.map((s, i) => this.envelope(s, s.v, datas[i]));
    // Published when they are committed: now, or when the transaction they are part of commits.
    if (!tx) this.publish(sessionId, decoded);
    else {
      const committed = (tx as Partial<Record<typeof ON_COMMIT, Array<[string, SessionEvent[]]>>>)[ON_COMMIT];
      if (!committed)
        throw new Error(
          'SessionLog.append: a transaction of the log is needed (log.transaction), so that its events are published when it commits',
        );
      committed.push([sessionId, decoded]);
      if (hooks) {
        const after = (tx as Partial<Record<typeof AFTER_COMMIT, Array<() => void>>>)[AFTER_COMMIT]!;
        for (const h of hooks) await h.handler(tx, sessionId, decoded, (fn) => after.push(fn));
      }
    }
    return decoded;
  }

  /**
   * Runs `fn` as one store transaction; the events it appends through the log are published to
   * live followers when it commits (and never when it rolls back). The one way to append inside a
   * transaction: nobody publishes by hand.
   */
  async transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> {
    const committed: Array<[string, SessionEvent[]]> = [];
    const after: Array<() => void> = [];
    const result = await this.store.transaction((tx) => {
      // The same operations, carrying where this transaction's appended events go.
      const scoped = Object.create(tx) as StoreOps &
        Record<typeof ON_COMMIT, Array<[string, SessionEvent[]]>> &
        Record<typeof AFTER_COMMIT, Array<() => void>>;
      scoped[ON_COMMIT] = committed;
      scoped[AFTER_COMMIT] = after;
      return fn(scoped);
    });
    for (const [sessionId, events] of committed) this.publish(sessionId, events);
    for (const fn of after) fn();
    return result;
  }

  /** Whether this process numbers deltas of model calls made here, for other nodes too (it then hears their commits). */
  private numbers = false;

  /**
   * This process makes model calls whose deltas other nodes relay (a worker on PostgreSQL, or on a SQLite file): it
   * listens to the other nodes' commits from now on, so that the deltas of a message that streams
   * while another node commits to its session (a message enqueued behind the run, say) are
   * numbered after that commit. A runtime calls it when it starts a worker: listening takes a
   * moment, and a commit made before it would not be heard.
   */
  numberDeltas(): void {
    if (!this.store.notices.broadcast || this.numbers) return;
    this.numbers = true;
    this.followOthers();
  }

  /** Where each session's deltas are numbered from (see LiveItem), most recently used last. */
  private readonly positions = new Map<string, { seq: number; n: number }>();

  private position(sessionId: string): { seq: number; n: number } {
    let p = this.positions.get(sessionId);
    if (p) this.positions.delete(sessionId);
    else p = { seq: 0, n: 0 };
    this.positions.set(sessionId, p);
    if (this.positions.size > MAX_POSITIONS) this.positions.delete(this.positions.keys().next().value!);
    return p;
  }

  /** Runs this process executes (its worker claimed them: their model calls are made here), with the count of their executions. */
  private readonly runsHere = new Map<string, number>();

  /**
   * This process executes the run (a worker here claimed it) until the returned function is
   * called: its deltas are numbered here (see `numbersAfter`).
   */
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

  /**
   * Whether the run's deltas are numbered after the session's durable event `seq` from now on:
   * the run executes in this process, which committed that event or heard of it. No delta of the
   * run numbered before that event can come any more (a feed need not wait for one: see `follow`).
   */
  numbersAfter(sessionId: string, runId: string, seq: number): boolean {
    return this.runsHere.has(runId) && (this.positions.get(sessionId)?.seq ?? 0) >= seq;
  }

  private recent: RecentDeltas | undefined;
  private recentKeepers = 0;

  /**
   * Keeps the deltas of the messages streaming now (every node's, on a store that relays them), so
   * that a feed starting mid-message replays them (see `follow`); until the returned function is
   * called. The server keeps them for as long as it runs.
   */
  keepRecentDeltas(): () => void {
    this.recent ??= new RecentDeltas();
    this.recentKeepers++;
    if (this.store.notices.broadcast) this.followOthers();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.recentKeepers === 0) this.recent = undefined;
      if (!this.followed()) this.unfollowOthers();
    };
  }

  /** The deltas of the session's messages streaming now, in id order (none unless kept, see keepRecentDeltas). */
  recentDeltas(sessionId: string): readonly RecentDelta[] {
    return this.recent?.of(sessionId) ?? [];
  }

  /** Tells live followers of committed events: called on commit, by `append` and `transaction` only. */
  private publish(sessionId: string, events: readonly SessionEvent[]): void {
    this.recent?.events(sessionId, events);
    const last = events.at(-1)?.seq;
    if (last !== undefined) {
      // The next deltas are numbered after these events.
      const p = this.position(sessionId);
      if (last > p.seq) {
        p.seq = last;
        p.n = 0;
      }
    }
    const one = this.live.listenerCount(sessionId) > 0;
    const all = this.live.listenerCount(ALL) > 0;
    if (!one && !all) return;
    for (const event of events) {
      if (all) this.live.emit(ALL, sessionId, { kind: 'event', event });
      if (one) this.live.emit(sessionId, { kind: 'event', event });
    }
  }

  /**
   * A delta of a model call made here: numbered after the latest event this process published for
   * the session, told to this process's followers and, through the store, to other nodes'.
   */
  publishDelta(sessionId: string, delta: DeltaEvent): void {
    this.numberDeltas();
    const p = this.position(sessionId);
    p.n++;
    const item: LiveItem = { kind: 'delta', delta, id: `${p.seq}.${p.n}` };
    this.relay(sessionId, item);
    this.store.notices.broadcast?.(sessionId, { kind: 'delta', id: item.id, delta: delta as unknown as JsonObject });
  }

  private relay(sessionId: string, item: LiveItem & { kind: 'delta' }): void {
    this.recent?.delta(sessionId, item);
    if (this.live.listenerCount(ALL) > 0) this.live.emit(ALL, sessionId, item);
    if (this.live.listenerCount(sessionId) > 0) this.live.emit(sessionId, item);
  }

  /** A message another node broadcast about a session: its deltas reach this node's followers. */
  private received(sessionId: string, message: JsonObject): void {
    if (
      message.kind !== 'delta' ||
      typeof message.id !== 'string' ||
      typeof message.delta !== 'object' ||
      message.delta === null
    )
      return;
    this.relay(sessionId, { kind: 'delta', id: message.id, delta: message.delta as DeltaEvent, fromAnotherNode: true });
  }

  /** Live events and deltas of one session, as this process appends them. */
  subscribe(sessionId: string, listener: LiveListener): () => void {
    this.live.on(sessionId, listener);
    this.followOthers();
    return () => {
      this.live.off(sessionId, listener);
      // Nobody follows a session here any more: stop asking the store about other processes.
      if (!this.followed()) this.unfollowOthers();
    };
  }

  /** The highest seq the store's notices told of, per session, most recently moved last. */
  private readonly heardSeqs = new Map<string, number>();

  /** Notes that the session's log reached `seq`; false when that was known already. */
  private heard(sessionId: string, seq: number): boolean {
    // A log at 0 has nothing to tell (a catch-up notice read before the session's first commit).
    if (seq <= (this.heardSeqs.get(sessionId) ?? 0)) return false;
    this.heardSeqs.delete(sessionId);
    this.heardSeqs.set(sessionId, seq);
    if (this.heardSeqs.size > MAX_POSITIONS) this.heardSeqs.delete(this.heardSeqs.keys().next().value!);
    return true;
  }

  /**
   * Up to which durable event of the session the deltas of other nodes have reached this process:
   * the deltas streamed before a commit are relayed before its notice (see `Store.broadcast`), so
   * this is the latest seq the store's notices told of (this process's own commits included: what
   * it knows of them says nothing of other nodes' deltas). Infinity on a store that relays no
   * other node's deltas. A feed does not read past it while another node's message streams
   * (see `follow`).
   */
  deltasHeardUpTo(sessionId: string): number {
    if (!this.store.notices.broadcast) return Infinity;
    return this.heardSeqs.get(sessionId) ?? 0;
  }

  /**
   * Resolves once this process has heard every notice of what any node committed or broadcast
   * before the call (see `Store.noticesCaughtUp`): at once on a store that relays no other node's
   * deltas. A feed asks it before it gives up waiting for deltas on their way.
   */
  noticesCaughtUp(): Promise<void> {
    return this.store.notices.broadcast && this.store.notices.caughtUp
      ? this.store.notices.caughtUp()
      : Promise.resolve();
  }
  private stopFollowing: (() => void) | undefined;
  private checking = false;
  /** A change without details came while the followed sessions were being checked: check again after. */
  private checkAgain = false;

  /**
   * While sessions are followed here, commits of other processes (the store tells when there are
   * some) reach their followers as `changed`, for each followed session whose log moved past what
   * this process published.
   */
  private followOthers(): void {
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

  private async checkFollowed(): Promise<void> {
    do {
      this.checkAgain = false;
      await this.tellFollowers();
    } while (this.checkAgain && this.stopFollowing);
  }

  private unfollowOthers(): void {
    this.stopFollowing?.();
    this.stopFollowing = undefined;
    // What is heard from now on may have gaps until followed again.
    this.heardSeqs.clear();
  }

  /**
   * A session's log moved to `lastSeq` (the store said so): its followers read what they miss, and
   * the deltas this process makes for it from now on are numbered after it.
   */
  private changedTo(sessionId: string, lastSeq: number, own?: true): void {
    const p = this.positions.get(sessionId);
    if (p && lastSeq > p.seq) {
      p.seq = lastSeq;
      p.n = 0;
    }
    if (!this.heard(sessionId, lastSeq) || this.live.listenerCount(sessionId) === 0) return;
    this.live.emit(
      sessionId,
      own ? { kind: 'changed', sessionId, upTo: lastSeq, own } : { kind: 'changed', sessionId, upTo: lastSeq },
    );
  }

  /**
   * Something changed, the store cannot tell what (a commit of a process that does not notify its
   * commits, or a reconnection): the followed sessions are read. On a store that relays other
   * nodes' deltas, what a read finds may have been committed after deltas still on their way to
   * this process, so the notices of what was committed before the read come first (see
   * `noticesCaughtUp`), for at most NOTICES_WAIT_MS.
   */
  private async tellFollowers(): Promise<void> {
    const followed = this.live
      .eventNames()
      .filter((n): n is string => typeof n === 'string' && this.live.listenerCount(n) > 0);
    if (!this.followed()) return this.unfollowOthers();
    const read: Array<[string, number]> = [];
    for (const sessionId of followed) {
      const s = await this.store.sessions.get(sessionId).catch(() => undefined);
      if (s) read.push([sessionId, s.lastSeq]);
    }
    if (this.store.notices.broadcast && read.some(([sessionId, seq]) => seq > (this.heardSeqs.get(sessionId) ?? 0))) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.noticesCaughtUp(),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, NOTICES_WAIT_MS))),
      ]);
      clearTimeout(timer);
    }
    for (const [sessionId, seq] of read) this.changedTo(sessionId, seq);
  }

  /**
   * Live events and deltas of every session (all-session listeners are called first): the events
   * this process commits, and the deltas of every node (other nodes' events reach the followers
   * of their session as `changed`).
   */
  subscribeAll(listener: (sessionId: string, item: LiveItem) => void): () => void {
    this.live.on(ALL, listener);
    if (this.store.notices.broadcast) this.followOthers();
    return () => {
      this.live.off(ALL, listener);
      if (!this.followed()) this.unfollowOthers();
    };
  }

  /**
   * Whether this process needs to hear of other processes' commits: a session is followed here,
   * or all of them are and the store relays other nodes' deltas.
   */
  private followed(): boolean {
    if (this.store.notices.broadcast && (this.numbers || this.live.listenerCount(ALL) > 0 || this.recentKeepers > 0))
      return true;
    return this.live.eventNames().some((n) => typeof n === 'string' && this.live.listenerCount(n) > 0);
  }

  /** A stored event as readers get it, with `v` and `data` given (assigned in key order, no spreads: several events per step). */
  private envelope(s: StoredEvent, v: number, data: unknown): SessionEvent {
    const e = { id: s.id, sessionId: s.sessionId, seq: s.seq, type: s.type, v, time: s.time } as SessionEvent & {
      runId?: string;
      turn?: number;
      step?: number;
      parentId?: string;
    };
    if (s.runId !== undefined) e.runId = s.runId;
    if (s.turn !== undefined) e.turn = s.turn;
    if (s.step !== undefined) e.step = s.step;
    e.entry = s.entry;
    if (s.parentId !== undefined) e.parentId = s.parentId;
    (e as { data: unknown }).data = data;
    return e;
  }

  /**
   * Decodes stored events: blobs inflated, upcast to current versions (and then validated);
   * ignorable unknowns skipped. Data at the current version was validated when it was written;
   * `validate` checks it again (the replay check does).
   */
  async decode(
    stored: readonly StoredEvent[],
    ops: StoreOps = this.store,
    options: { validate?: boolean } = {},
  ): Promise<SessionEvent[]> {
    const hashes = new Set<string>();
    for (const s of stored) for (const h of blobRefsOf(s.data)) hashes.add(h);
    const blobs = hashes.size > 0 ? await ops.events.getBlobs([...hashes]) : new Map<string, string>();
    const out: SessionEvent[] = [];
    for (const s of stored) {
      const up = this.registry.upcast(
        { type: s.type, v: s.v, seq: s.seq, ignorable: s.ignorable, data: inflateBlobs(s.data, blobs) },
        { validate: options.validate ?? false },
      );
      if (up) out.push(this.envelope(s, up.v, up.data));
    }
    return out;
  }

  async read(
    sessionId: string,
    options: ReadEventsOptions & { validate?: boolean } = {},
    ops: StoreOps = this.store,
  ): Promise<SessionEvent[]> {
    const { validate, ...read } = options;
    return this.decode(await ops.events.read(sessionId, read), ops, validate !== undefined ? { validate } : {});
  }

  /** A session that can be read: refused (`session_erased`) once it was erased. */
  async session(sessionId: string, ops: StoreOps = this.store) {
    const s = await ops.sessions.get(sessionId);
    if (!s) throw new NotFoundError('session', sessionId);
    if (s.erasedAt !== null) throw new StoreError('session_erased', `session ${sessionId} was erased`);
    return s;
  }

  /** Drops what this process keeps in memory of a session (its projection states). */
  forget(sessionId: string): void {
    for (const [key, state] of [...this.kept]) {
      if (!key.startsWith(`${sessionId}\u0000`)) continue;
      this.kept.delete(key);
      this.keptSize -= state.size;
    }
  }
}
