import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  follow,
  openSqliteStore,
  ScriptedModel,
  Sessions,
  tool,
  type FeedItem,
  type ScriptedResponse,
  type SqliteStore,
  type Store,
  type StoreChange,
  type StoreOps,
} from '../../src/index.ts';
import { deferred } from '../support/deferred.ts';
import { expectIdsToGrow, followInBackground, textOf, waitFor } from '../support/feed-helpers.ts';

/**
 * Two nodes on one store: a writer (it runs the model calls) and a reader (an API node). The
 * notices the reader hears (every commit, its own included, and the writer's broadcast deltas)
 * are in the test's hands, in the order sent, as a relaying backend (PostgreSQL's LISTEN/NOTIFY)
 * delivers them. What a node reads from the store it reads at once, while what it hears may lag:
 * the commit of a message can be in the log before the reader has heard the message's last deltas.
 */
function twoNodes(store: SqliteStore) {
  type Notice = StoreChange;
  const pending: Notice[] = [];
  const listeners = new Set<(c?: StoreChange) => void>();
  let held = false;
  // Deltas still delivered before the notices are held (Infinity: no hold).
  let deltasBeforeHold = Infinity;
  // Deltas still delivered before the rest of the deltas are lost on the way (Infinity: none lost).
  let deltasBeforeLoss = Infinity;
  // Notices sent and notices delivered (or lost), counted: what a barrier waits for.
  let sent = 0;
  let delivered = 0;
  const barriers: Array<{ upTo: number; resolve: () => void }> = [];
  const deliver = () => {
    while (pending.length > 0 && !held) {
      if (deltasBeforeHold === 0) {
        held = true;
        break;
      }
      const n = pending.shift()!;
      delivered++;
      if (n.message !== undefined) {
        deltasBeforeHold--;
        if (deltasBeforeLoss-- <= 0) continue;
      }
      for (const l of [...listeners]) l(n);
    }
    for (let i = barriers.length - 1; i >= 0; i--)
      if (barriers[i]!.upTo <= delivered) barriers.splice(i, 1)[0]!.resolve();
  };
  const send = (n: Notice) => {
    pending.push(n);
    sent++;
    deliver();
  };
  const withNotices = <T extends StoreOps>(ops: T, appended: (sessionId: string, lastSeq: number) => void): T => ({
    ...ops,
    events: {
      ...ops.events,
      append: async (...args: Parameters<StoreOps['events']['append']>) => {
        const events = await ops.events.append(...args);
        if (events.length > 0) appended(args[0], events.at(-1)!.seq);
        return events;
      },
    },
  });
  /** A node on the store: its commits are noticed (after they happen), and so are its broadcasts when `broadcasts`. */
  const node = (o: { broadcasts: boolean; hears: boolean }): Store => ({
    ...withNotices(store as Store, (sessionId, lastSeq) => send({ sessionId, lastSeq })),
    kind: store.kind,
    close: () => store.close(),
    observeCommits: (l) => store.observeCommits(l),
    notices: {
      broadcast: o.broadcasts
        ? (sessionId: string, message: Record<string, unknown>) => send({ sessionId, message: message as never })
        : () => {},
      // Resolves once what was sent before the call was delivered (a relaying backend's ping).
      caughtUp: () => new Promise<void>((resolve) => (o.hears ? barriers.push({ upTo: sent, resolve }) : resolve())),
      changes: (l: (c?: StoreChange) => void) => {
        if (o.hears) listeners.add(l);
        return () => listeners.delete(l);
      },
    },
    transaction: async <T>(fn: (tx: StoreOps) => Promise<T>) => {
      const commits: Array<[string, number]> = [];
      const result = await store.transaction((tx) => fn(withNotices(tx, (s, q) => commits.push([s, q]))));
      for (const [sessionId, lastSeq] of commits) send({ sessionId, lastSeq });
      return result;
    },
  });
  const writerNode = node({ broadcasts: true, hears: false });
  const readerNode = node({ broadcasts: false, hears: true });
  return {
    writer: writerNode,
    reader: readerNode,
    /** The next `n` deltas are heard, and what comes after them waits until `release`. */
    holdAfterDeltas(n: number) {
      deltasBeforeHold = n;
    },
    /** The next `n` deltas are heard, and the deltas after them are lost on the way (the notices of commits are not). */
    loseAfterDeltas(n: number) {
      deltasBeforeLoss = n;
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

describe('the live feed across nodes', () => {
  let store: SqliteStore;
  afterEach(async () => store.close());

  const CHUNKS = ['one ', 'two ', 'three ', 'four ', 'five'];

  /**
   * A worker node and an API node on one store, a session, and an agent that streams five deltas
   * (`answer` adds to its answer: a pause between deltas, say).
   */
  async function twoNodeSession(answer: Partial<ScriptedResponse> = {}) {
    store = openSqliteStore({ path: ':memory:' });
    const nodes = twoNodes(store);
    const worker = new Sessions({ store: nodes.writer });
    const api = new Sessions({ store: nodes.reader });
    const release = api.log.keepRecentDeltas();
    const s = await worker.create();
    const agent = defineAgent({ name: 'a', model: new ScriptedModel([{ chunks: CHUNKS, ...answer }], { loop: true }) });
    return { nodes, worker, api, release, s, agent };
  }

  async function messageStreamedThenCommitted(o: { lost?: boolean } = {}) {
    const { nodes, worker, api, release, s, agent } = await twoNodeSession();
    // The API node hears the turn start and the first three deltas; the rest (two deltas, the
    // commit of the message) is on its way when a client connects there (or, when `lost`, the two
    // deltas never come and the rest is delivered).
    if (o.lost) nodes.loseAfterDeltas(3);
    else nodes.holdAfterDeltas(3);
    await (
      await worker.startTurn(s.id, agent, { input: 'count' })
    ).result;
    if (!o.lost) expect(nodes.pending).toBeGreaterThan(2);
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

  it('a reader following all along, on a node that commits to the session meanwhile, gets every delta before the durable message and every event once, in order', async () => {
    const { nodes, worker, api, release, s, agent } = await twoNodeSession();
    const feed = followInBackground(api.log, s.id);
    const { items } = feed;
    nodes.holdAfterDeltas(3);
    await (
      await worker.startTurn(s.id, agent, { input: 'count' })
    ).result;
    // The API node commits to the session after the message's commit, before it heard of it.
    await api.appendUserMessage(s.id, 'and again');
    await new Promise((r) => setTimeout(r, 50));
    expect(items.some((i) => i.kind === 'event' && i.event.type === 'assistant/message')).toBe(false);
    nodes.release();
    const lastSeq = (await api.get(s.id)).lastSeq;
    await feed.untilSeq(lastSeq);
    await feed.stop();
    const message = items.findIndex((i) => i.kind === 'event' && i.event.type === 'assistant/message');
    expect(textOf(items.slice(0, message))).toBe('one two three four five');
    expect(textOf(items.slice(message))).toBe('');
    const seqs = items.flatMap((i) => (i.kind === 'event' ? [i.event.seq] : []));
    expect(seqs).toEqual(Array.from({ length: lastSeq }, (_, i) => i + 1));
    release();
  });

  it('a reader busy while its node hears the last deltas gets them before the message, though its own node committed after the message first', async () => {
    const { nodes, worker, api, release, s, agent } = await twoNodeSession();
    // Pulled by hand: while the test does not ask for the next item, the reader is busy.
    const feed = follow(api.log, s.id);
    const items: FeedItem[] = [];
    const pull = async () => {
      const r = await feed.next();
      if (!r.done) items.push(r.value);
      return r;
    };
    const first = pull();
    nodes.holdAfterDeltas(3);
    await (
      await worker.startTurn(s.id, agent, { input: 'count' })
    ).result;
    await first;
    while (items.filter((i) => i.kind === 'delta').length < 3) await pull();
    // Its node commits to the session (after the message), and only then hears the rest: the last
    // deltas and the notices wait in the reader's queue behind its own commit.
    await api.appendUserMessage(s.id, 'and again');
    nodes.release();
    const lastSeq = (await api.get(s.id)).lastSeq;
    while (!items.some((i) => i.kind === 'event' && i.event.seq === lastSeq)) await pull();
    await feed.return();
    const message = items.findIndex((i) => i.kind === 'event' && i.event.type === 'assistant/message');
    expect(textOf(items.slice(0, message))).toBe('one two three four five');
    expect(items.flatMap((i) => (i.kind === 'event' ? [i.event.seq] : []))).toEqual(
      Array.from({ length: lastSeq }, (_, i) => i + 1),
    );
    release();
  });

  it('a reader waits for the last deltas as long as the notices before them are on their way, however slow (a busy or lagging node)', async () => {
    const { nodes, api, sessionId, release } = await messageStreamedThenCommitted();
    const reader = readUntilMessage(follow(api.log, sessionId));
    // Longer than any fixed wait a reader could give up after: the notices only lag.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(reader.items.some((i) => i.kind === 'event' && i.event.type === 'assistant/message')).toBe(false);
    nodes.release();
    await reader.done;
    expect(textOf(reader.items)).toBe('one two three four five');
    expect(reader.items.at(-1)!.kind).toBe('event');
    release();
  });

  it('deltas lost on the way: once every notice committed before the message arrived, the durable message follows at once', async () => {
    const { api, sessionId, release } = await messageStreamedThenCommitted({ lost: true });
    const started = Date.now();
    const reader = readUntilMessage(follow(api.log, sessionId));
    await reader.done;
    expect(Date.now() - started).toBeLessThan(500);
    expect(textOf(reader.items)).toBe('one two three ');
    expect(reader.items.at(-1)!.kind).toBe('event');
    release();
  });

  it('a wait that gave up on one message does not shorten the wait for the next', async () => {
    const { nodes, worker, api, release, s, agent } = await twoNodeSession();
    // Polling reads the log while the notices are held: the commits are read before they are heard.
    const feed = followInBackground(api.log, s.id, { noticeWaitMs: 300, pollMs: 20 });
    const { items } = feed;
    const messages = () => items.filter((i) => i.kind === 'event' && i.event.type === 'assistant/message').length;
    // 1. The notices stop after three deltas and do not come while the reader waits: it gives up.
    nodes.holdAfterDeltas(3);
    await (
      await worker.startTurn(s.id, agent, { input: 'count' })
    ).result;
    await waitFor(() => messages() === 1);
    expect(textOf(items)).toBe('one two three ');
    nodes.release();
    // 2. The next message's notices are only late, by less than noticeWaitMs: all of them come first.
    const before = items.length;
    nodes.holdAfterDeltas(3);
    await (
      await worker.startTurn(s.id, agent, { input: 'count again' })
    ).result;
    await waitFor(() => textOf(items.slice(before)) === 'one two three ');
    await new Promise((r) => setTimeout(r, 150));
    nodes.release();
    await waitFor(() => messages() === 2);
    const second = items.slice(before);
    const message = second.findIndex((i) => i.kind === 'event' && i.event.type === 'assistant/message');
    expect(textOf(second.slice(0, message))).toBe('one two three four five');
    await feed.stop();
    release();
  });

  it("an event this node commits while another node's message streams waits for the deltas its writer numbered before it", async () => {
    // The writer does not hear the reader's commits: it numbers every delta before them.
    const { worker, api, release, s, agent } = await twoNodeSession({ chunkDelayMs: 40 });
    const feed = followInBackground(api.log, s.id);
    const { items } = feed;
    const turn = await worker.startTurn(s.id, agent, { input: 'count' });
    await waitFor(() => items.filter((i) => i.kind === 'delta').length >= 2);
    await api.appendUserMessage(s.id, 'meanwhile');
    await turn.result;
    const lastSeq = (await api.get(s.id)).lastSeq;
    await feed.untilSeq(lastSeq);
    await feed.stop();
    const meanwhile = items.findIndex(
      (i) =>
        i.kind === 'event' && i.event.type === 'user/message' && JSON.stringify(i.event.data).includes('meanwhile'),
    );
    expect(textOf(items.slice(0, meanwhile))).toBe('one two three four five');
    expectIdsToGrow(items);
    expect(items.flatMap((i) => (i.kind === 'event' ? [i.event.seq] : []))).toEqual(
      Array.from({ length: lastSeq }, (_, i) => i + 1),
    );
    release();
  });

  it('a reader resuming while a run runs on another node: an event committed meanwhile waits for the deltas numbered before it', async () => {
    // The writer does not hear the reader's commits: it numbers every delta before them.
    const { worker, api, release, s, agent } = await twoNodeSession({ chunkDelayMs: 60 });
    await worker.log.append(s.id, [
      { type: 'run/status', runId: 'r1', data: { from: 'queued', to: 'running', attempt: 1 } },
    ]);
    // A first connection reads up to the second delta, then drops.
    const first: FeedItem[] = [];
    const ac1 = new AbortController();
    const turn = await worker.startTurn(s.id, agent, { input: 'count', runId: 'r1' });
    for await (const item of follow(api.log, s.id, { signal: ac1.signal })) {
      first.push(item);
      if (first.filter((i) => i.kind === 'delta').length === 2) break;
    }
    const last = first.at(-1)!;
    expect(last.kind).toBe('delta');
    // Meanwhile this node commits to the session; the client resumes after its last delta.
    await api.appendUserMessage(s.id, 'meanwhile');
    const [seq, n] = (last as { id: string }).id.split('.').map(Number) as [number, number];
    const feed = followInBackground(api.log, s.id, { after: { seq, n } });
    const { items } = feed;
    await turn.result;
    await feed.untilSeq((await api.get(s.id)).lastSeq);
    await feed.stop();
    const message = items.findIndex((i) => i.kind === 'event' && i.event.type === 'assistant/message');
    expect(textOf(first) + textOf(items.slice(0, message))).toBe(CHUNKS.join(''));
    expectIdsToGrow([...first, ...items]);
    release();
  });

  it('notices that never come (a broken connection to the store): the durable message follows after noticeWaitMs', async () => {
    const { api, sessionId, release } = await messageStreamedThenCommitted();
    const started = Date.now();
    const reader = readUntilMessage(follow(api.log, sessionId, { noticeWaitMs: 300 }));
    await reader.done;
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(textOf(reader.items)).toBe('one two three ');
    expect(reader.items.at(-1)!.kind).toBe('event');
    release();
  });
});

describe('the live feed on a store that relays, with the run executed on this node', () => {
  it("an event this node commits while its own run runs without streaming (a tool) is yielded at once, not after the run's next commit", async () => {
    // A SQLite file relays across its processes (ADR-0035): its feeds wait for other nodes' writers.
    // This node's own worker numbers its deltas after this node's commits at once: nothing to wait for.
    const dir = mkdtempSync(join(tmpdir(), 'keel-feed-'));
    const store = openSqliteStore({ path: join(dir, 'keel.db') });
    const toolGate = deferred();
    const toolStarted = deferred();
    const slow = tool({
      name: 'slow',
      description: 'Waits for the test',
      input: z.object({}),
      execute: async () => {
        toolStarted.resolve();
        await toolGate.promise;
        return 'done';
      },
    });
    const agent = defineAgent({
      name: 'a',
      model: new ScriptedModel(
        [{ chunks: ['calling '], toolCalls: [{ name: 'slow', input: {} }] }, { chunks: ['done'] }],
        { loop: true },
      ),
      tools: [slow],
    });
    const rt = createRuntime({ store, agents: [agent] });
    rt.startWorker({ pollMs: 20 });
    try {
      expect(store.notices.broadcast).toBeDefined();
      const s = await rt.sessions.create({ agent: 'a' });
      // No writer wait would end on its own within the test.
      const feed = followInBackground(rt.sessions.log, s.id, { writerWaitMs: 600_000 });
      const { run } = await rt.sessions.send(s.id, 'go');
      await toolStarted.promise;
      const queued = await rt.sessions.send(s.id, 'and then', { ifBusy: 'enqueue' });
      expect(queued.run.status).toBe('queued');
      const lastSeq = (await rt.sessions.get(s.id)).lastSeq;
      // The tool still runs: the run has not committed since.
      await feed.untilSeq(lastSeq);
      expect((await rt.runs.get(run.id)).status).toBe('running');
      toolGate.resolve();
      await rt.runs.wait(queued.run.id, { until: 'terminal' });
      await feed.untilSeq((await rt.sessions.get(s.id)).lastSeq);
      await feed.stop();
      expectIdsToGrow(feed.items);
      expect(textOf(feed.items)).toBe('calling donecalling done');
    } finally {
      toolGate.resolve();
      await rt.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
