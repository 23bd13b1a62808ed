import { largePayloadPolicy, type DeltaEvent, type LargePayloadPolicy, type PayloadModelView } from '../core/index.ts';
import {
  NotFoundError,
  type BlobStore,
  type NewBlob,
  sessionInArchive,
  StoreError,
  type AppendOptions,
  type EventDraft,
  type JsonObject,
  type ReadEventsOptions,
  type Store,
  type StoreOps,
  type StoredEvent,
} from '../store/index.ts';
import { defaultRegistry, type EventRegistry, type SessionEvent } from './event-types.ts';
import { AppendHooks, inCommitScope, onCommit, startHookReads, type AppendHook } from './log-commit.ts';
import { LogCodec, sessionEvent, type Encoded, type NewEvent } from './log-codec.ts';
import { CrossNodeNotices } from './log-notices.ts';
import { LiveBus } from './live-bus.ts';
import type { LiveItem, LiveListener } from './live-items.ts';
import { FollowedProjections } from './followed-projections.ts';
import { ProjectionCache, type KeptState } from './projection-cache.ts';
import type { Projection } from './projections/index.ts';
import type { RecentDelta } from './recent-deltas.ts';

export type { AppendHook } from './log-commit.ts';
export type { NewEvent } from './log-codec.ts';
export type { LiveChange, LiveDelta, LiveItem, LiveListener } from './live-items.ts';

/**
 * The session's append-only event log: validation, blob extraction and seq allocation on the way
 * in; upcasting and blob inflation on the way out (log-codec.ts); and a live feed of what was
 * appended (live-bus.ts), published on commit (log-commit.ts), with other nodes' commits and
 * deltas (log-notices.ts). It also keeps the latest projection states read (projection-cache.ts).
 */
export class SessionLog {
  readonly store: Store;
  readonly registry: EventRegistry;
  private readonly codec: LogCodec;
  private readonly bus = new LiveBus();
  private readonly notices: CrossNodeNotices;
  private readonly hooks = new AppendHooks();
  /** The latest projection states this process read (see readProjection). */
  readonly projections: ProjectionCache;
  /** Projections kept up to date with this process's commits (see FollowedProjections). */
  private readonly followed: FollowedProjections;
  /** Whether this process numbers deltas of model calls made here, for other nodes too (it then hears their commits). */
  private numbers = false;

  /**
   * `keptStates` and `keptSize` bound the projection states kept in memory: how many, and how
   * big together (in the projections' own measure: messages, for the model context).
   * `largePayloads`: the threshold above which content is stored apart, the event bound and the
   * model's view (ADR-0040); its `store`, where large payloads go instead of the database.
   */
  constructor(
    store: Store,
    registry: EventRegistry = defaultRegistry(),
    options: {
      keptStates?: number;
      keptSize?: number;
      largePayloads?: Partial<LargePayloadPolicy> & { store?: BlobStore };
    } = {},
  ) {
    this.store = store;
    this.registry = registry;
    const { store: largeStore, ...policy } = options.largePayloads ?? {};
    this.codec = new LogCodec(registry, largePayloadPolicy(policy), largeStore);
    // 512: a model context and a followed transcript for each of 256 sessions (see FollowedProjections).
    this.projections = new ProjectionCache(options.keptStates ?? 512, options.keptSize ?? 200_000);
    this.followed = new FollowedProjections(this.projections);
    this.notices = new CrossNodeNotices(
      store,
      this.bus,
      () => !!this.store.notices.broadcast && (this.numbers || this.bus.followsAll || this.bus.keepsRecent),
    );
  }

  /** The projection states kept in memory, by key, most recently used last. */
  get kept(): ReadonlyMap<string, KeptState> {
    return this.projections.states;
  }

  /**
   * Keeps a path projection's state of every session up to date with what this process commits,
   * from the session's creation on (see FollowedProjections): reading it after a run this process
   * executed folds nothing.
   */
  follow<S>(p: Projection<S>): void {
    this.followed.follow(p);
  }

  /** Committed events: folded into the followed projections, then told to live subscribers. */
  private published(sessionId: string, events: readonly SessionEvent[]): void {
    this.followed.committed(sessionId, events);
    this.bus.publish(sessionId, events);
  }

  /** Adds a hook called inside the transaction of the appends it wants (see AppendHook); returns its removal. */
  onAppend(hook: AppendHook): () => void {
    return this.hooks.add(hook);
  }

  /** Large payloads: the threshold, the event bound and what the model sees (ADR-0040). */
  get payloads(): LargePayloadPolicy {
    return this.codec.payloads;
  }

  /** Where large payloads are read from (the database through `ops`, or the store configured instead). */
  blobs(ops: StoreOps = this.store): BlobStore {
    return this.codec.blobsFor(ops);
  }

  /** Turns a new event into a storage draft (see LogCodec.encode). */
  encode(e: NewEvent, trusted = false): Encoded {
    return this.codec.encode(e, trusted);
  }

  /**
   * Appends atomically (blobs and events in one transaction) and tells live subscribers. `runId`:
   * the run of the events that name none (a loop's events are appended as they are).
   */
  async append(
    sessionId: string,
    events: readonly NewEvent[],
    options: AppendOptions & { tx?: StoreOps; trusted?: boolean; runId?: string } = {},
  ): Promise<SessionEvent[]> {
    const drafts: EventDraft[] = [];
    const blobs: NewBlob[] = [];
    const large: NewBlob[] = [];
    const datas: unknown[] = [];
    for (const e of events) {
      const enc = this.codec.encode(e, options.trusted, options.runId);
      drafts.push(enc.draft);
      for (const b of enc.blobs) blobs.push(b);
      for (const b of enc.largeBlobs) large.push(b);
      if (e.blobs) for (const b of e.blobs) blobs.push(b);
      datas.push(enc.data);
    }
    const { tx, trusted: _trusted, runId: _runId, ...appendOptions } = options;
    const hooks = this.hooks.wanting(events);
    // A hook writes in the append's transaction: an append that wants one is made in one.
    if (hooks && !tx) return this.transaction((t) => this.append(sessionId, events, { ...options, tx: t }));
    // Another store's large payloads are there before the events that refer to them (content-addressed:
    // an append that then fails leaves them unreferenced, never a reference to nothing); in a
    // transaction, before it commits: they are put while its append is made.
    const putLarge = large.length > 0 ? () => this.codec.largeStore!.put(large) : undefined;
    // The blobs go with the append: one operation (outside a transaction, one write).
    const withBlobs = blobs.length > 0 ? { ...appendOptions, blobs } : appendOptions;
    let stored: Promise<StoredEvent[]>;
    let reads: Array<Promise<unknown> | undefined> = [];
    if (tx) {
      // What the hooks read is sent with the append (one round trip on a connection that
      // pipelines). Both are asked of the store in this call, before anything its caller asks
      // next: a caller may go on without waiting for the append (AppendOptions.abortsTransaction).
      if (hooks)
        reads = startHookReads(
          tx,
          sessionId,
          events.map((e) =>
            e.runId === undefined && options.runId !== undefined ? { ...e, runId: options.runId } : e,
          ),
          hooks,
        );
      stored = tx.events.append(sessionId, drafts, withBlobs);
      if (putLarge) {
        stored.catch(() => {});
        await putLarge();
      }
    } else {
      if (putLarge) await putLarge();
      stored = this.store.events.append(sessionId, drafts, withBlobs);
    }
    // The data as appended (validated, or built by typed code when trusted), before blob extraction, is what a reader gets back: no need to read it.
    const decoded = (await stored).map((s, i) => sessionEvent(s, s.v, datas[i]));
    // Published when they are committed: now, or when the transaction they are part of commits.
    if (!tx) this.published(sessionId, decoded);
    else await onCommit(tx, sessionId, decoded, hooks, reads);
    return decoded;
  }

  /**
   * Runs `fn` as one store transaction; the events it appends through the log are published to
   * live followers when it commits (and never when it rolls back). The one way to append inside a
   * transaction: nobody publishes by hand.
   */
  transaction<T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> {
    return inCommitScope(this.store, fn, (sessionId, events) => this.published(sessionId, events));
  }

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
    this.notices.follow();
  }

  /**
   * This process executes the run (a worker here claimed it) until the returned function is
   * called: its deltas are numbered here (see `numbersAfter`).
   */
  executes(runId: string): () => void {
    return this.bus.executes(runId);
  }

  /**
   * Whether the run's deltas are numbered after the session's durable event `seq` from now on:
   * the run executes in this process, which committed that event or heard of it. No delta of the
   * run numbered before that event can come any more (a feed need not wait for one: see `follow`).
   */
  numbersAfter(sessionId: string, runId: string, seq: number): boolean {
    return this.bus.numbersAfter(sessionId, runId, seq);
  }

  /**
   * Keeps the deltas of the messages streaming now (every node's, on a store that relays them), so
   * that a feed starting mid-message replays them (see `follow`); until the returned function is
   * called. The server keeps them for as long as it runs.
   */
  keepRecentDeltas(): () => void {
    this.bus.keepRecent();
    if (this.store.notices.broadcast) this.notices.follow();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.bus.releaseRecent();
      this.notices.unfollowUnlessNeeded();
    };
  }

  /** The deltas of the session's messages streaming now, in id order (none unless kept, see keepRecentDeltas). */
  recentDeltas(sessionId: string): readonly RecentDelta[] {
    return this.bus.recentDeltas(sessionId);
  }

  /**
   * A delta of a model call made here: numbered after the latest event this process published for
   * the session, told to this process's followers and, through the store, to other nodes'.
   */
  publishDelta(sessionId: string, delta: DeltaEvent): void {
    this.numberDeltas();
    const item = this.bus.numberDelta(sessionId, delta);
    this.store.notices.broadcast?.(sessionId, { kind: 'delta', id: item.id, delta: delta as unknown as JsonObject });
  }

  /** Live events and deltas of one session, as this process appends them. */
  subscribe(sessionId: string, listener: LiveListener): () => void {
    const off = this.bus.on(sessionId, listener);
    this.notices.follow();
    return () => {
      off();
      // Nobody follows a session here any more: stop asking the store about other processes.
      this.notices.unfollowUnlessNeeded();
    };
  }

  /**
   * Live events and deltas of every session (all-session listeners are called first): the events
   * this process commits, and the deltas of every node (other nodes' events reach the followers
   * of their session as `changed`).
   */
  subscribeAll(listener: (sessionId: string, item: LiveItem) => void): () => void {
    const off = this.bus.onAll(listener);
    if (this.store.notices.broadcast) this.notices.follow();
    return () => {
      off();
      this.notices.unfollowUnlessNeeded();
    };
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
    return this.notices.deltasHeardUpTo(sessionId);
  }

  /**
   * Resolves once this process has heard every notice of what any node committed or broadcast
   * before the call (see `Store.noticesCaughtUp`): at once on a store that relays no other node's
   * deltas. A feed asks it before it gives up waiting for deltas on their way.
   */
  noticesCaughtUp(): Promise<void> {
    return this.notices.caughtUp();
  }

  /**
   * Decodes stored events (see LogCodec.decode). `payloads`: how large tool results are read (whole
   * by default; the model context reads them through the policy's view).
   */
  decode(
    stored: readonly StoredEvent[],
    ops: StoreOps = this.store,
    options: { validate?: boolean; payloads?: PayloadModelView } = {},
  ): Promise<SessionEvent[]> {
    return this.codec.decode(stored, ops, options);
  }

  async read(
    sessionId: string,
    options: ReadEventsOptions & { validate?: boolean; payloads?: PayloadModelView } = {},
    ops: StoreOps = this.store,
  ): Promise<SessionEvent[]> {
    const { validate, payloads, ...read } = options;
    return this.decode(await ops.events.read(sessionId, read), ops, {
      ...(validate !== undefined ? { validate } : {}),
      ...(payloads !== undefined ? { payloads } : {}),
    });
  }

  /** A session that can be read: refused once it was erased (`session_erased`), or while its log is in an archive store (`session_in_archive`). */
  async session(sessionId: string, ops: StoreOps = this.store) {
    const s = await ops.sessions.get(sessionId);
    if (!s) throw new NotFoundError('session', sessionId);
    if (s.erasedAt !== null) throw new StoreError('session_erased', `session ${sessionId} was erased`);
    if (s.inArchiveAt !== null) throw sessionInArchive(sessionId);
    return s;
  }

  /** Drops what this process keeps in memory of a session (its projection states). */
  forget(sessionId: string): void {
    this.projections.forget(sessionId);
  }
}
