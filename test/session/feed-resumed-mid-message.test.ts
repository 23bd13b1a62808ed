/**
 * A feed resumed mid-message on a node that goes on hearing while the feed reads the log (found by
 * test/session/feed-fuzz.test.ts; the cluster test's CI failure had the shape of B). The deltas the
 * node heard before the feed subscribed are only in its recent deltas, those it hears after are in
 * the feed's queue. The feed used to read the recent deltas only after its log read(s); by then a
 * delta of the next message had dropped the earlier message's (durable meanwhile) from them, and the
 * feed yielded that message's later deltas (from its queue) without its first ones. The feed now
 * takes the recent deltas when it subscribes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  follow,
  openSqliteStore,
  SessionLog,
  Sessions,
  type FeedItem,
  type SqliteStore,
  type StoreChange,
} from '../../src/index.ts';
import { nodeOn } from '../support/feed-helpers.ts';

type NodeName = 'W' | 'R' | 'T';
type Notice = { from: NodeName; change: StoreChange };

/**
 * Nodes on one store with PostgreSQL's notice semantics, delivered by hand: one global order, each
 * node hears it in that order when the test says so (`hear`). R's log reads of a page (`limit`)
 * can be held by the test: `snapshot: 'before'` reads at once and answers on release (the read's
 * snapshot precedes what is committed meanwhile), 'after' reads on release.
 */
function cluster(raw: SqliteStore) {
  const G: Notice[] = [];
  let gate: { snapshot: 'before' | 'after'; release: Promise<void>; open: () => void; reached: boolean } | undefined;
  const nodes = {} as Record<NodeName, { cursor: number; listeners: Set<(c?: StoreChange) => void>; log: SessionLog }>;
  const mk = (name: NodeName) => {
    const node = nodeOn(raw, {
      broadcast: (sessionId: string, message: Record<string, unknown>) =>
        G.push({ from: name, change: { sessionId, message: message as never } }),
      noticesCaughtUp: () => new Promise<void>(() => {}),
      append: async (sessionId: string, ...rest: unknown[]) => {
        const events = (await (raw.events.append as (...a: unknown[]) => Promise<Array<{ seq: number }>>).call(
          raw,
          sessionId,
          ...rest,
        )) as Array<{ seq: number }>;
        G.push({ from: name, change: { sessionId, lastSeq: events.at(-1)!.seq } });
        return events;
      },
      ...(name === 'R'
        ? {
            readEvents: async (sessionId: string, o: { limit?: number }) => {
              const g = o.limit !== undefined ? gate : undefined;
              if (!g) return raw.events.read(sessionId, o as never);
              gate = undefined;
              g.reached = true;
              if (g.snapshot === 'before') {
                const events = await raw.events.read(sessionId, o as never);
                await g.release;
                return events;
              }
              await g.release;
              return raw.events.read(sessionId, o as never);
            },
          }
        : {}),
    });
    nodes[name] = { cursor: 0, listeners: node.listeners, log: new SessionLog(node.store) };
  };
  mk('W');
  mk('R');
  mk('T');
  return {
    nodes,
    /** Node `name` hears every notice sent so far. */
    hear(name: NodeName) {
      const st = nodes[name];
      while (st.cursor < G.length) {
        const n = G[st.cursor++]!;
        if (n.change.message !== undefined && n.from === name) continue;
        for (const l of [...st.listeners]) l(n.change);
      }
    },
    /** Holds R's next page read until `open()`. */
    holdNextPageRead(snapshot: 'before' | 'after') {
      let open!: () => void;
      const release = new Promise<void>((r) => (open = r));
      gate = { snapshot, release, open, reached: false };
      return gate;
    },
  };
}

const tick = () => new Promise<void>((r) => setImmediate(r));
const settle = async () => {
  for (let i = 0; i < 20; i++) await tick();
};

describe('a feed resumed mid-message while its node goes on hearing', () => {
  let raw: SqliteStore;
  afterEach(() => raw.close());

  async function setup() {
    raw = openSqliteStore({ path: ':memory:' });
    const c = cluster(raw);
    const { W, R, T } = c.nodes;
    const sid = (await new Sessions({ store: raw }).create()).id;
    W.log.numberDeltas();
    const release = R.log.keepRecentDeltas();
    const delta = (step: number, text: string) =>
      W.log.publishDelta(sid, { type: 'text/delta', turn: 1, step, messageId: `m${step}`, delta: text });
    const step = (n: number, text: string, first = false) =>
      W.log.append(
        sid,
        [
          ...(first ? [{ type: 'turn/start', runId: 'r1', turn: 1, data: { turn: 1 } }] : []),
          { type: 'step/start', runId: 'r1', turn: 1, step: n, data: { step: n } },
          {
            type: 'assistant/message',
            runId: 'r1',
            turn: 1,
            step: n,
            data: { message: { id: `m${n}`, role: 'assistant', content: [{ type: 'text', text }] } },
          },
          { type: 'step/end', runId: 'r1', turn: 1, step: n, data: { step: n } },
        ] as never,
        { trusted: true },
      );
    // Seq 2: r1 runs (1 is the session's creation).
    await W.log.append(
      sid,
      [{ type: 'run/status', runId: 'r1', data: { from: 'queued', to: 'running', attempt: 1 } } as never],
      { trusted: true },
    );
    c.hear('R');
    c.hear('W');
    return { c, W, R, T, sid, delta, step, release };
  }

  /** Follows on R after `after`, collecting items. */
  function client(R: { log: SessionLog }, sid: string, after?: { seq: number; n: number }) {
    const items: FeedItem[] = [];
    const ac = new AbortController();
    const done = (async () => {
      for await (const item of follow(R.log, sid, { ...(after ? { after } : {}), signal: ac.signal })) items.push(item);
    })();
    return {
      items,
      async stop() {
        ac.abort();
        await done;
      },
    };
  }

  const deltaTexts = (items: FeedItem[], messageId: string) =>
    items.flatMap((i) =>
      i.kind === 'delta' && i.delta.messageId === messageId ? [`${i.id}:${(i.delta as { delta: string }).delta}`] : [],
    );

  it("A: the page read predates the message's commit; the next message's first delta evicts the first deltas from recent before the read answers", async () => {
    const { c, R, sid, delta, step, release } = await setup();
    // m1, step 1: durable at 3..6 (turn/start, step/start, assistant/message, step/end).
    for (const t of ['a ', 'b ']) delta(1, t);
    await step(1, 'a b ', true);
    c.hear('R');
    // m2 streams: R hears its first three deltas (numbered 6.1..6.3) before the client connects.
    for (const t of ['one ', 'two ', 'three ']) delta(2, t);
    c.hear('R');
    expect(R.log.recentDeltas(sid).map((d) => d.id)).toEqual(['6.1', '6.2', '6.3']);
    // The client resumes after 6; the feed's page read is slow (a busy pool): its snapshot is taken now.
    const gate = c.holdNextPageRead('before');
    const feed = client(R, sid, { seq: 6, n: 0 });
    await settle();
    expect(gate.reached).toBe(true);
    // Meanwhile R hears the rest of m2, its commit (7..9), and m3's first delta (9.1).
    for (const t of ['four ', 'five']) delta(2, t);
    await step(2, 'one two three four five');
    delta(3, 'next ');
    c.hear('R');
    // RecentDeltas dropped m2's deltas (durable) on hearing 9.1; 6.4 and 6.5 wait in the feed's queue.
    expect(R.log.recentDeltas(sid).map((d) => d.id)).toEqual(['9.1']);
    gate.open();
    await settle();
    await feed.stop();
    release();
    const m2 = deltaTexts(feed.items, 'm2');
    // Every delta of m2 (before the fix: 6.4 and 6.5 only, not a prefix of its text).
    expect(m2).toEqual(['6.1:one ', '6.2:two ', '6.3:three ', '6.4:four ', '6.5:five']);
  });

  it("B (the cluster's shape): a third node commits the next run's status mid-message; the resumed feed yields the log up to the message, then only its later deltas", async () => {
    const { c, R, T, sid, delta, step, release } = await setup();
    // The client's first connection got m1's deltas 2.1, 2.2, then hopped.
    for (const t of ['a ', 'b ']) delta(1, t);
    c.hear('R');
    await step(1, 'a b ', true); // 3..6
    c.hear('R');
    for (const t of ['one ', 'two ', 'three ']) delta(2, t); // 6.1..6.3
    c.hear('R');
    // Connection 2 (resumed after 2.2): its page read waits for a pool connection.
    const gate = c.holdNextPageRead('after');
    const feed = client(R, sid, { seq: 2, n: 2 });
    await settle();
    expect(gate.reached).toBe(true);
    delta(2, 'four '); // 6.4
    c.hear('R');
    // Another API node enqueues a second run (seq 7); the worker has not heard of it yet.
    await T.log.append(
      sid,
      [{ type: 'run/status', runId: 'r2', data: { from: 'created', to: 'queued', attempt: 0 } } as never],
      { trusted: true },
    );
    delta(2, 'five'); // 6.5
    await step(2, 'one two three four five'); // 8..10
    delta(3, 'next '); // 10.1
    c.hear('R');
    gate.open();
    await settle();
    await feed.stop();
    release();
    const m2 = deltaTexts(feed.items, 'm2');
    const seqs = feed.items.flatMap((i) => (i.kind === 'event' ? [i.event.seq] : []));
    expect(seqs).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
    expect(m2).toEqual(['6.1:one ', '6.2:two ', '6.3:three ', '6.4:four ', '6.5:five']);
  });
});
