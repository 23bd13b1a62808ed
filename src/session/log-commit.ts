/**
 * Publication on commit: the events a log transaction appends are published to live followers
 * when it commits (never when it rolls back), and the append hooks (the webhooks outbox, ADR-0017)
 * write in the appending transaction and run what they need once it committed.
 */
import type { Store, StoreOps } from '../store/index.ts';
import type { SessionEvent } from './event-types.ts';

/** Where a log transaction collects the events to publish when it commits (see `inCommitScope`). */
const ON_COMMIT: unique symbol = Symbol('keel.onCommit');
/** Where a log transaction collects what to run once it committed (see AppendHook). */
const AFTER_COMMIT: unique symbol = Symbol('keel.afterCommit');

type Scoped = StoreOps &
  Record<typeof ON_COMMIT, Array<[string, SessionEvent[]]>> &
  Record<typeof AFTER_COMMIT, Array<() => void>>;

/**
 * Called inside the store transaction of an append, before it commits (the webhooks outbox writes
 * its deliveries there: ADR-0017). `wants` is asked first, in memory, of the events about to be
 * appended: only when it says yes is `handler` called (and an append made outside a transaction is
 * made in one). `afterCommit` runs a function once the transaction committed (never on rollback).
 *
 * `read`, if the hook has one, is what it reads for these events before knowing their seqs (the
 * webhooks outbox: the subscriptions that hear them). It is started before the append is sent, so
 * that on a connection that pipelines both travel in one round trip; its result is handed to
 * `handler` (which is not called when the append fails: the read's own failure then goes unheard).
 */
export interface AppendHook<R = unknown> {
  wants(e: { type: string; data: unknown }): boolean;
  read?(tx: StoreOps, sessionId: string, events: readonly HookedEvent[]): Promise<R>;
  handler(
    tx: StoreOps,
    sessionId: string,
    events: readonly SessionEvent[],
    afterCommit: (fn: () => void) => void,
    read: Promise<R> | undefined,
  ): Promise<void> | void;
}

/** An event about to be appended, as a hook's `read` sees it: its run is the one it will be stored with. */
export interface HookedEvent {
  type: string;
  data: unknown;
  runId?: string;
}

/** The hooks' reads for an append about to be sent (see AppendHook.read), none failing unheard. */
export function startHookReads(
  tx: StoreOps,
  sessionId: string,
  events: readonly HookedEvent[],
  hooks: readonly AppendHook[],
): Array<Promise<unknown> | undefined> {
  return hooks.map((h) => {
    const read = h.read?.(tx, sessionId, events);
    read?.catch(() => {});
    return read;
  });
}

/** The append hooks of a log. */
export class AppendHooks {
  private readonly hooks: AppendHook[] = [];

  /** Adds a hook; returns its removal. */
  add(hook: AppendHook): () => void {
    this.hooks.push(hook);
    return () => {
      const i = this.hooks.indexOf(hook);
      if (i >= 0) this.hooks.splice(i, 1);
    };
  }

  /** The hooks that want some of these events (undefined for none). */
  wanting(events: readonly { type: string; data: unknown }[]): AppendHook[] | undefined {
    if (this.hooks.length === 0) return undefined;
    const wanting = this.hooks.filter((h) => events.some((e) => h.wants(e)));
    return wanting.length > 0 ? wanting : undefined;
  }
}

/**
 * Runs `fn` as one store transaction whose appended events (see `onCommit`) go to `publish` when it
 * commits, followed by what the hooks asked to run after it.
 */
export async function inCommitScope<T>(
  store: Store,
  fn: (tx: StoreOps) => Promise<T>,
  publish: (sessionId: string, events: readonly SessionEvent[]) => void,
): Promise<T> {
  const committed: Array<[string, SessionEvent[]]> = [];
  const after: Array<() => void> = [];
  const result = await store.transaction((tx) => {
    // The same operations, carrying where this transaction's appended events go.
    const scoped = Object.create(tx) as Scoped;
    scoped[ON_COMMIT] = committed;
    scoped[AFTER_COMMIT] = after;
    return fn(scoped);
  });
  for (const [sessionId, events] of committed) publish(sessionId, events);
  for (const fn of after) fn();
  return result;
}

/**
 * Events appended in a log transaction: published when it commits; the hooks that want them write
 * now, in the transaction.
 */
export async function onCommit(
  tx: StoreOps,
  sessionId: string,
  events: SessionEvent[],
  hooks: readonly AppendHook[] | undefined,
  reads: ReadonlyArray<Promise<unknown> | undefined> = [],
): Promise<void> {
  const committed = (tx as Partial<Scoped>)[ON_COMMIT];
  if (!committed)
    throw new Error(
      'SessionLog.append: a transaction of the log is needed (log.transaction), so that its events are published when it commits',
    );
  committed.push([sessionId, events]);
  if (hooks) {
    const after = (tx as Scoped)[AFTER_COMMIT];
    for (const [i, h] of hooks.entries()) await h.handler(tx, sessionId, events, (fn) => after.push(fn), reads[i]);
  }
}
