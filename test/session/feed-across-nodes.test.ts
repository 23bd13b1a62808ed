import { afterEach, describe, expect, it } from 'vitest';
import { defineAgent, follow, openSqliteStore, ScriptedModel, Sessions, type FeedItem, type SqliteStore, type Store, type StoreChange } from '../../src/index.ts';

/**
 * Two nodes on one store, with the notices between them (commits, broadcast deltas) in the test's
 * hands, in the order sent, as a relaying backend (PostgreSQL's LISTEN/NOTIFY) delivers them. What
 * a node reads from the store it reads at once, while what it hears may lag: the commit of a
 * message can be in the log before this node has heard the message's last deltas.
 */
function twoNodes(store: SqliteStore) {
  type Notice = StoreChange;
  const pending: Notice[] = [];
  const listeners = new Set<(c?: StoreChange) => void>();
  let held = false;
  // Deltas still delivered before the notices are held (Infinity: no hold).
  let deltasBeforeHold = Infinity;
  const deliver = () => {
    while (pending.length > 0 && !held) {
      if (deltasBeforeHold === 0) {
        held = true;
        break;
      }
      const n = pending.shift()!;
      if (n.message !== undefined) deltasBeforeHold--;
      for (const l of [...listeners]) l(n);
    }
  };
  const send = (n: Notice) => {
    pending.push(n);
    deliver();
  };
  const withNotices = <T extends object>(ops: T, appended: (sessionId: string, lastSeq: number) => void): T =>
    new Proxy(ops, {
      get(target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown;
        if (key === 'append') {
          return async (sessionId: string, ...rest: unknown[]) => {
            const events = await (v as (...a: unknown[]) => Promise<Array<{ seq: number }>>).call(target, sessionId, ...rest);
            if (events.length > 0) appended(sessionId, events.at(-1)!.seq);
            return events;
          };
        }
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  // The writing node: its commits and deltas are noticed by the other, after they happen.
  const writer = withNotices(store as Store, (sessionId, lastSeq) => send({ sessionId, lastSeq }));
  const writerNode = new Proxy(writer, {
    get(target, key, receiver) {
      if (key === 'broadcast') return (sessionId: string, message: Record<string, unknown>) => send({ sessionId, message: message as never });
      if (key === 'changes') return () => () => {};
      if (key === 'transaction') {
        return async <T>(fn: (tx: unknown) => Promise<T>) => {
          const commits: Array<[string, number]> = [];
          const result = await store.transaction((tx) => fn(withNotices(tx, (s, q) => commits.push([s, q]))));
          for (const [sessionId, lastSeq] of commits) send({ sessionId, lastSeq });
          return result;
        };
      }
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
  // The reading node: hears what is delivered.
  const readerNode = new Proxy(store as Store, {
    get(target, key, receiver) {
      if (key === 'broadcast') return () => {};
      if (key === 'changes') {
        return (l: (c?: StoreChange) => void) => {
          listeners.add(l);
          return () => listeners.delete(l);
        };
      }
      const v = Reflect.get(target, key, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return {
    writer: writerNode,
    reader: readerNode,
    /** The next `n` deltas are heard, and what comes after them waits until `release`. */
    holdAfterDeltas(n: number) {
      deltasBeforeHold = n;
    },
    release() {
      held = false;
      deltasBeforeHold = Infinity;
      deliver();
    },
    get pending() {
      return pending.length;
    },
  };
}

/** Reads a feed in the background until the durable version of a message. */
function readUntilMessage(feed: AsyncGenerator<FeedItem>) {
  const items: FeedItem[] = [];
  const done = (async () => {
    for await (const item of feed) {
      items.push(item);
      if (item.kind === 'event' && item.event.type === 'assistant/message') break;
    }
  })();
  return { items, done };
}

const textOf = (items: readonly FeedItem[]) =>
  items.flatMap((i) => (i.kind === 'delta' && i.delta.type === 'text/delta' ? [i.delta.delta] : [])).join('');

describe('the live feed across nodes', () => {
  let store: SqliteStore;
  afterEach(async () => store.close());

  async function messageStreamedThenCommitted() {
    store = openSqliteStore({ path: ':memory:' });
    const nodes = twoNodes(store);
    const worker = new Sessions({ store: nodes.writer });
    const api = new Sessions({ store: nodes.reader });
    const release = api.log.keepRecentDeltas();
    const s = await worker.create();
    const agent = defineAgent({ name: 'a', model: new ScriptedModel([{ chunks: ['one ', 'two ', 'three ', 'four ', 'five'] }]) });
    // The API node hears the turn start and the first three deltas; the rest (two deltas, the
    // commit of the message) is on its way when a client connects there.
    nodes.holdAfterDeltas(3);
    await (await worker.startTurn(s.id, agent, { input: 'count' })).result;
    expect(nodes.pending).toBeGreaterThan(2);
    expect(api.log.recentDeltas(s.id)).toHaveLength(3);
    return { nodes, api, sessionId: s.id, release };
  }

  it('a reader that joins mid-message gets every delta before the durable message, though the commit is in the log before the last deltas are heard', async () => {
    const { nodes, api, sessionId, release } = await messageStreamedThenCommitted();
    const reader = readUntilMessage(follow(api.log, sessionId));
    await new Promise((r) => setTimeout(r, 50));
    // The log has the message, but this node has not heard all its deltas: the feed waits for them.
    expect(reader.items.some((i) => i.kind === 'event' && i.event.type === 'assistant/message')).toBe(false);
    expect(textOf(reader.items)).toBe('one two three ');
    nodes.release();
    await reader.done;
    expect(textOf(reader.items)).toBe('one two three four five');
    expect(reader.items.at(-1)!.kind).toBe('event');
    release();
  });

  it('waits for deltas on their way only so long: when they never come, the durable message follows within a few seconds', async () => {
    const { api, sessionId, release } = await messageStreamedThenCommitted();
    const started = Date.now();
    const reader = readUntilMessage(follow(api.log, sessionId));
    await reader.done;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(textOf(reader.items)).toBe('one two three ');
    expect(reader.items.at(-1)!.kind).toBe('event');
    release();
  });
});
