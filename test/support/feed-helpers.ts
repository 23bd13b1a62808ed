/**
 * Reading live feeds (`follow`) in tests: in the background, into a list of items, with the checks
 * the feed's guarantees call for.
 */
import { expect } from 'vitest';
import {
  follow,
  type FeedItem,
  type FollowOptions,
  type SessionLog,
  type Store,
  type StoreChange,
  type StoreOps,
} from '../../src/index.ts';
import { STORE_LAYOUT, type FlatName } from '../../src/store/port/layout.ts';

/** Follows a session in the background until `stop()`. */
export function followInBackground(log: SessionLog, sessionId: string, options: Omit<FollowOptions, 'signal'> = {}) {
  const items: FeedItem[] = [];
  const ac = new AbortController();
  const reading = (async () => {
    for await (const item of follow(log, sessionId, { ...options, signal: ac.signal })) items.push(item);
  })();
  return {
    items,
    /** Waits until the feed yielded the event `seq`. */
    async untilSeq(seq: number): Promise<void> {
      await waitFor(() => items.some((i) => i.kind === 'event' && i.event.seq === seq));
    },
    async stop(): Promise<void> {
      ac.abort();
      await reading;
    },
  };
}

export async function waitFor(check: () => boolean, pollMs = 5): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, pollMs));
}

/** The text the items' text deltas spell. */
export const textOf = (items: readonly FeedItem[]): string =>
  items.flatMap((i) => (i.kind === 'delta' && i.delta.type === 'text/delta' ? [i.delta.delta] : [])).join('');

/** Ids only grow: `12` < `12.1` < `12.2` < `13`. */
export function expectIdsToGrow(items: readonly FeedItem[]): void {
  const ids = items.map(
    (i) => (i.kind === 'event' ? [i.event.seq, 0] : i.id.split('.').map(Number)) as [number, number],
  );
  for (let k = 1; k < ids.length; k++) {
    const [[s0, n0], [s1, n1]] = [ids[k - 1]!, ids[k]!];
    expect(s1 > s0 || (s1 === s0 && n1 > n0), `id ${s1}.${n1} after ${s0}.${n0}`).toBe(true);
  }
}

/** What a node puts in place of the shared store's: operations by their flat names (STORE_LAYOUT), notices, transactions. */
export type NodeOverrides = Partial<Record<FlatName, unknown>> & {
  broadcast?: (sessionId: string, message: Record<string, unknown>) => void;
  noticesCaughtUp?: () => Promise<void>;
  transaction?: () => never;
};

/**
 * A node on a store shared with other nodes, as the cross-node feed tests model them: the shared
 * store's operations, with `overrides` in their place (a node's own append, reads, broadcast,
 * barrier), and `notices.changes` subscribing to the node's own `listeners`, which the test calls
 * to deliver the notices the node hears.
 */
export function nodeOn(
  raw: Store,
  overrides: NodeOverrides,
): { store: Store; listeners: Set<(c?: StoreChange) => void> } {
  const listeners = new Set<(c?: StoreChange) => void>();
  const changes = (l: (c?: StoreChange) => void) => {
    listeners.add(l);
    return () => listeners.delete(l);
  };
  const flat = overrides as Record<string, unknown>;
  const spaces: Record<string, Record<string, unknown>> = {};
  for (const [ns, ops] of Object.entries(STORE_LAYOUT)) {
    const own = (raw as unknown as Record<string, Record<string, unknown>>)[ns]!;
    spaces[ns] = Object.fromEntries(Object.entries(ops).map(([op, name]) => [op, name in flat ? flat[name] : own[op]]));
  }
  const store: Store = {
    ...(spaces as unknown as StoreOps),
    kind: raw.kind,
    notices: {
      changes,
      ...((overrides.broadcast ?? raw.notices.broadcast)
        ? { broadcast: overrides.broadcast ?? raw.notices.broadcast }
        : {}),
      ...((overrides.noticesCaughtUp ?? raw.notices.caughtUp)
        ? { caughtUp: overrides.noticesCaughtUp ?? raw.notices.caughtUp }
        : {}),
    },
    ...(raw.observeCommits ? { observeCommits: (l: (seconds: number) => void) => raw.observeCommits!(l) } : {}),
    transaction: overrides.transaction ?? ((fn) => raw.transaction(fn)),
    close: () => raw.close(),
  };
  return { store, listeners };
}
