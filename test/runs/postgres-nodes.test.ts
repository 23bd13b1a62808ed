/**
 * Keel on PostgreSQL with several nodes: two store instances on one schema stand for two machines
 * (separate pools and connections; the database is the only thing they share). What SQLite's single
 * writer gave for free must hold here through the locks each operation takes (ADR-0011): two
 * approvals of one run at once, usage roll-ups from children ending together, appends racing for
 * the same seqs, claims racing, inputs taken once; and the live feed crosses nodes.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  follow,
  ScriptedModel,
  subagent,
  tool,
  type AgentDefinition,
  type FeedItem,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import { CLAIM_POLICY } from '../../src/runs/lifecycle/run-status.ts';
import type { PostgresStore } from '../../src/store/postgres/index.ts';
import { ofType, allEvents } from '../support/session-helpers.ts';
import { openTestPostgres, postgresUrl } from '../support/postgres.ts';
import { expectIdsToGrow, followInBackground, textOf, waitFor } from '../support/feed-helpers.ts';

const T0 = 1_700_000_000_000;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Two nodes on one fresh schema. */
async function twoNodes(): Promise<[PostgresStore, PostgresStore]> {
  const db = await openTestPostgres();
  cleanups.push(db.cleanup);
  return [db.store, await db.another()];
}

function runtimeOn(store: Store, agents: AgentDefinition[], o: { worker?: boolean } = {}): Runtime {
  const rt = createRuntime({ store, agents });
  if (o.worker !== false) rt.startWorker({ concurrency: 4 });
  cleanups.push(() => rt.close({ graceMs: 100 }));
  return rt;
}

const note = (n: number) => ({ id: randomUUID(), type: 'test/note', v: 1, time: T0, entry: false, data: { n } });

/** What a node hears from now on: each broadcast's `n`, and `commit <seq>` for each commit notice. */
async function hearing(node: PostgresStore): Promise<Array<number | string>> {
  const heard: Array<number | string> = [];
  const off = node.notices.changes((c) => {
    if (c?.message) heard.push(c.message.n as number);
    else if (c) heard.push(`commit ${c.lastSeq}`);
  });
  cleanups.push(async () => off());
  await new Promise((r) => setTimeout(r, 200)); // it listens
  return heard;
}

describe('postgres: two nodes on one database', () => {
  it('appends racing from two nodes get every seq once, in one gap-free log; an expected seq lets one of them win', async () => {
    const [a, b] = await twoNodes();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const writes = Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).events.append('s', [note(i), note(i + 100)]));
    const results = await Promise.all(writes);
    const seqs = results.flatMap((r) => r.map((e) => e.seq)).sort((x, y) => x - y);
    expect(seqs).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));
    // Each append's two events are adjacent: no other append came in between.
    for (const r of results) expect(r[1]!.seq).toBe(r[0]!.seq + 1);
    expect((await b.events.read('s')).map((e) => e.seq)).toEqual(seqs);

    const racing = await Promise.allSettled([
      a.events.append('s', [note(1)], { expectLastSeq: 80 }),
      b.events.append('s', [note(2)], { expectLastSeq: 80 }),
    ]);
    expect(racing.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(racing.find((r) => r.status === 'rejected')).toMatchObject({ reason: { code: 'seq_conflict' } });
    expect((await a.sessions.get('s'))!.lastSeq).toBe(81);
  });

  it('claims racing from two nodes take every run exactly once (FOR UPDATE SKIP LOCKED)', async () => {
    const [a, b] = await twoNodes();
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      await a.sessions.create({ id: `s${i}`, createdAt: T0 });
      ids.push(
        (
          await a.runs.create({
            id: `r${String(i).padStart(2, '0')}`,
            sessionId: `s${i}`,
            agent: { name: 'x', version: '1' },
            agentSpec: {},
            createdAt: T0 + i,
          })
        ).id,
      );
    }
    const claims = await Promise.all(
      Array.from({ length: 24 }, (_, i) => (i % 2 ? a : b).claims.claim(`w${i}`, 30_000, T0 + 100, CLAIM_POLICY)),
    );
    const claimed = claims.flatMap((c) => (c ? [c.run.id] : []));
    expect(claimed.sort()).toEqual(ids);
    for (const c of claims) if (c) expect(c.run).toMatchObject({ status: 'running', fencingToken: 1, attempt: 1 });
  });

  it('inputs taken from two nodes at once are each taken once, oldest first', async () => {
    const [a, b] = await twoNodes();
    await a.sessions.create({ id: 's', createdAt: T0 });
    for (let i = 0; i < 30; i++)
      await a.inputs.add({
        id: `i${String(i).padStart(2, '0')}`,
        sessionId: 's',
        kind: 'message',
        runId: null,
        payload: { i },
        createdAt: T0 + i,
      });
    const takes = await Promise.all(
      Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).inputs.take('s', 'message', undefined, 4)),
    );
    const taken = takes.flat().map((x) => x.id);
    expect(new Set(taken).size).toBe(taken.length);
    expect(taken.sort()).toEqual(Array.from({ length: 30 }, (_, i) => `i${String(i).padStart(2, '0')}`));
    for (const t of takes)
      expect(t.map((x) => x.createdAt)).toEqual([...t.map((x) => x.createdAt)].sort((x, y) => x - y));
  });

  it('read-modify-write of one run from many transactions on two nodes loses no update (a run read in a transaction is locked)', async () => {
    const [a, b] = await twoNodes();
    await a.sessions.create({ id: 's', createdAt: T0 });
    await a.runs.create({
      id: 'parent',
      sessionId: 's',
      agent: { name: 'x', version: '1' },
      agentSpec: {},
      createdAt: T0,
    });
    // What a child's end does to its parent: read the parent's usage, add, write back.
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 ? a : b).transaction(async (tx) => {
          const parent = (await tx.runs.get('parent'))!;
          const usage = parent.usage as { inputTokens?: number };
          await new Promise((r) => setTimeout(r, 2));
          await tx.runs.update('parent', {
            usage: { inputTokens: (usage.inputTokens ?? 0) + 1 },
            cost: parent.cost + 0.5,
          });
        }),
      ),
    );
    expect(await b.runs.get('parent')).toMatchObject({ usage: { inputTokens: 20 }, cost: 10 });
  });

  it('two approvals of different calls of one run, each on its own node at the same moment: both recorded, the run resumes once, each tool runs once', async () => {
    const [a, b] = await twoNodes();
    const ran: string[] = [];
    const danger = tool({
      name: 'danger',
      description: 'Needs approval',
      input: z.object({ t: z.string() }),
      approval: 'always',
      execute: ({ t }) => (ran.push(t), `did ${t}`),
    });
    const script = () =>
      new ScriptedModel([
        {
          toolCalls: [
            { id: 'd1', name: 'danger', input: { t: 'one' } },
            { id: 'd2', name: 'danger', input: { t: 'two' } },
          ],
        },
        { text: 'both done' },
      ]);
    const rtA = runtimeOn(a, [defineAgent({ name: 'a', model: script(), tools: [danger] })]);
    const rtB = runtimeOn(b, [defineAgent({ name: 'a', model: script(), tools: [danger] })], { worker: false });
    const s = await rtA.sessions.create();
    const { run } = await rtA.sessions.send(s.id, 'go');
    expect((await rtA.runs.wait(run.id)).status).toBe('waiting_approval');
    const [one, two] = await Promise.all([rtA.runs.approve(run.id, 'd1'), rtB.runs.approve(run.id, 'd2')]);
    // One of them saw the other's decision and queued the run; the other left it waiting for that one.
    expect([one.status, two.status].sort()).toEqual(['queued', 'waiting_approval']);
    const done = await rtA.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    expect(ran.sort()).toEqual(['one', 'two']);
    const events = await allEvents(rtB.sessions, s.id);
    expect(
      ofType(events, 'tool/decision')
        .map((e) => e.data.toolCallId)
        .sort(),
    ).toEqual(['d1', 'd2']);
    expect(ofType(events, 'tool/result')).toHaveLength(2);
  });

  it('children ending at once on two nodes all count in their parent’s usage', async () => {
    const [a, b] = await twoNodes();
    const delegate = subagent({ name: 'delegate', description: 'Hands a task to the child agent', agent: 'child' });
    const calls = Array.from({ length: 6 }, (_, i) => ({
      id: `c${i}`,
      name: 'delegate',
      input: { task: `task ${i}` },
    }));
    const agents = () => [
      defineAgent({
        name: 'parent',
        model: new ScriptedModel([
          { toolCalls: calls, usage: { input: 1, output: 1 } },
          { text: 'all in', usage: { input: 1, output: 1 } },
        ]),
        tools: [delegate],
      }),
      defineAgent({
        name: 'child',
        model: new ScriptedModel(Array.from({ length: 6 }, () => ({ text: 'ok', usage: { input: 10, output: 100 } }))),
      }),
    ];
    const rtA = runtimeOn(a, agents());
    runtimeOn(b, agents());
    const s = await rtA.sessions.create({ agent: 'parent' });
    const { run } = await rtA.sessions.send(s.id, 'delegate everything');
    const done = await rtA.runs.wait(run.id, { until: 'terminal', timeoutMs: 30_000 });
    expect(done.status).toBe('completed');
    const children = await rtA.runs.list({ parentRunId: run.id });
    expect(children).toHaveLength(6);
    expect(children.every((c) => c.status === 'completed')).toBe(true);
    expect(done.usage).toMatchObject({ inputTokens: 2 + 60, outputTokens: 2 + 600 });
  });

  it('a run executing on node A streams to a reader on node B to its end (the live feed crosses nodes)', async () => {
    const [a, b] = await twoNodes();
    const slow = tool({
      name: 'slow',
      description: 'Takes a moment',
      input: z.object({}),
      execute: async () => (await new Promise((r) => setTimeout(r, 30)), 'ok'),
    });
    const model = () =>
      new ScriptedModel([
        ...Array.from({ length: 5 }, (_, i) => ({ toolCalls: [{ id: `t${i}`, name: 'slow', input: {} }] })),
        { text: 'finished' },
      ]);
    const rtA = runtimeOn(a, [defineAgent({ name: 'a', model: model(), tools: [slow] })]);
    const rtB = runtimeOn(b, [defineAgent({ name: 'a', model: model(), tools: [slow] })], { worker: false });
    const s = await rtB.sessions.create();
    const { run } = await rtB.sessions.send(s.id, 'go');
    const seen: number[] = [];
    const started = Date.now();
    for await (const item of rtB.runs.stream(run.id)) {
      if (item.kind === 'event') seen.push(item.event.seq);
    }
    expect(Date.now() - started).toBeLessThan(20_000);
    const all = (await allEvents(rtA.sessions, s.id)).filter((e) => e.runId === run.id).map((e) => e.seq);
    expect(seen).toEqual(all);
    expect((await rtB.runs.get(run.id)).status).toBe('completed');
  });

  it('token deltas of a model call on node A reach node B in order, with the ids node A gave them', async () => {
    const [a, b] = await twoNodes();
    const model = () => new ScriptedModel([{ chunks: Array.from({ length: 30 }, (_, i) => `c${i} `), delayMs: 2 }]);
    const rtA = runtimeOn(a, [defineAgent({ name: 'a', model: model() })]);
    const rtB = runtimeOn(b, [defineAgent({ name: 'a', model: model() })], { worker: false });
    const s = await rtB.sessions.create();
    const seenA: string[] = [];
    const seenB: string[] = [];
    const offA = rtA.sessions.log.subscribe(s.id, (i) => i.kind === 'delta' && seenA.push(`${i.id} ${i.delta.delta}`));
    const offB = rtB.sessions.log.subscribe(s.id, (i) => i.kind === 'delta' && seenB.push(`${i.id} ${i.delta.delta}`));
    cleanups.push(async () => (offA(), offB()));
    await new Promise((r) => setTimeout(r, 200)); // node B listens
    const { run } = await rtB.sessions.send(s.id, 'go');
    expect((await rtB.runs.wait(run.id, { until: 'terminal' })).status).toBe('completed');
    for (let i = 0; i < 100 && seenB.length < seenA.length; i++) await new Promise((r) => setTimeout(r, 20));
    expect(seenA).toHaveLength(30);
    expect(seenB).toEqual(seenA);
    // Numbered after the event before the model call, 1..30.
    expect(seenA.map((x) => Number(x.split(' ')[0]!.split('.')[1]))).toEqual(
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
  });

  it('noticesCaughtUp: once it resolves, a node has heard every broadcast and commit notice another node made before the call', async () => {
    const [a, b] = await twoNodes();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const heard = await hearing(b);
    for (let round = 0; round < 5; round++) {
      for (let i = 0; i < 300; i++) a.notices.broadcast('s', { n: round * 1000 + i, pad: 'x'.repeat(200) });
      const [e] = await a.events.append('s', [note(round)]);
      // Committed (node A's append returned): once node B's barrier resolves, it heard all of it.
      await b.notices.caughtUp();
      const want = [...Array.from({ length: 300 }, (_, i) => round * 1000 + i), `commit ${e!.seq}`];
      expect(heard.slice(-want.length)).toEqual(want);
    }
  });

  it('runs.wait on a run this process executes reads the run at its start and end, not at each step (its own commit notices are known for its own)', async () => {
    const { store } = await openTestPostgres();
    const stepTool = tool({
      name: 'inc',
      description: 'increments',
      input: z.object({ n: z.number() }),
      idempotent: true,
      execute: async ({ n }) => n + 1,
    });
    const steps = 8;
    const model = new ScriptedModel([
      ...Array.from({ length: steps }, (_, i) => ({
        text: 'working',
        toolCalls: [{ id: `c${i}`, name: 'inc', input: { n: i } }],
      })),
      { text: 'done' },
    ]);
    const rt = runtimeOn(store, [
      defineAgent({ name: 'a', model, tools: [stepTool], limits: { maxSteps: steps + 1 } }),
    ]);
    const s = await rt.sessions.create();
    // Someone follows the session: the store's notices are on (as with an SSE client).
    const feed = followInBackground(rt.sessions.log, s.id);
    cleanups.push(() => feed.stop());
    const get = store.runs.get.bind(store.runs);
    let reads = 0;
    store.runs.get = (id: string) => {
      reads++;
      return get(id);
    };
    const { run } = await rt.sessions.send(s.id, 'go');
    expect((await rt.runs.wait(run.id, { until: 'terminal' })).status).toBe('completed');
    store.runs.get = get;
    expect(reads).toBeLessThanOrEqual(3);
  });

  it('a notification of broadcasts that fails is sent again: the other node hears every message, in order, before the commit that follows them', async () => {
    const [a, b] = await twoNodes();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const heard = await hearing(b);
    // Node A's next two notifications of broadcasts fail (a connection of its pool broken, say).
    const pool = (a as unknown as { pool: { query: (...args: unknown[]) => Promise<unknown> } }).pool;
    const query = pool.query.bind(pool);
    let failures = 2;
    pool.query = (...args: unknown[]) => {
      if (failures > 0 && JSON.stringify(args).includes('\\"b\\":')) {
        failures--;
        return Promise.reject(new Error('Connection terminated unexpectedly'));
      }
      return query(...args);
    };
    for (let i = 0; i < 20; i++) a.notices.broadcast('s', { n: i });
    // The append made once they failed goes after them, in the call that sends them at last.
    await vi.waitFor(() => expect(failures).toBe(0));
    const [e] = await a.events.append('s', [note(1)]);
    await b.notices.caughtUp();
    expect(failures).toBe(0);
    expect(heard).toEqual([...Array.from({ length: 20 }, (_, i) => i), `commit ${e!.seq}`]);
    expect(a.droppedBroadcasts).toBe(0);
  });

  it('a message sent on node B while node A streams the answer (enqueued: its status commits mid-message): a reader of the session on node B gets every delta, ids only growing', async () => {
    const [a, b] = await twoNodes();
    const chunks = Array.from({ length: 40 }, (_, i) => `w${i} `);
    const model = () => new ScriptedModel([{ chunks, chunkDelayMs: 15 }, { text: 'second' }]);
    runtimeOn(a, [defineAgent({ name: 'a', model: model() })]);
    const rtB = runtimeOn(b, [defineAgent({ name: 'a', model: model() })], { worker: false });
    const s = await rtB.sessions.create();
    const feed = followInBackground(rtB.sessions.log, s.id);
    cleanups.push(() => feed.stop());
    const { items } = feed;
    await new Promise((r) => setTimeout(r, 200)); // node B listens
    const first = await rtB.sessions.send(s.id, 'go');
    await waitFor(() => items.filter((i) => i.kind === 'delta').length >= 5);
    const second = await rtB.sessions.send(s.id, 'and then', { ifBusy: 'enqueue' });
    expect(second.outcome).toBe('enqueued');
    expect((await rtB.runs.wait(first.run.id, { until: 'terminal' })).status).toBe('completed');
    expect((await rtB.runs.wait(second.run.id, { until: 'terminal' })).status).toBe('completed');
    const message = items.find(
      (i) => i.kind === 'event' && i.event.type === 'assistant/message' && i.event.runId === first.run.id,
    )!;
    const before = items.slice(0, items.indexOf(message));
    expect(textOf(before)).toBe(chunks.join(''));
    // Node A heard of the commit of node B and numbered the rest of its deltas after it.
    const queued = items.find(
      (i) => i.kind === 'event' && i.event.type === 'run/status' && i.event.runId === second.run.id,
    )!;
    expect(
      queued.kind === 'event' &&
        before.some((i) => i.kind === 'delta' && Number(i.id.split('.')[0]) === queued.event.seq),
    ).toBe(true);
    expectIdsToGrow(items);
  });

  it('a message sent on node B as node A starts the answer (before its first delta reached node B): the session reader on node B still gets every delta', async () => {
    const [a, b] = await twoNodes();
    for (let round = 0; round < 5; round++) {
      const chunks = Array.from({ length: 20 }, (_, i) => `r${round}w${i} `);
      const model = () => new ScriptedModel([{ chunks, chunkDelayMs: 5 }, { text: 'second' }]);
      const rtA = runtimeOn(a, [defineAgent({ name: 'a', model: model() })]);
      const rtB = runtimeOn(b, [defineAgent({ name: 'a', model: model() })], { worker: false });
      const s = await rtB.sessions.create();
      const ac = new AbortController();
      const items: FeedItem[] = [];
      let second: Promise<{ run: { id: string } }> | undefined;
      const reading = (async () => {
        for await (const item of follow(rtB.sessions.log, s.id, { signal: ac.signal })) {
          items.push(item);
          // As soon as the run runs: the model call starts about now.
          if (
            !second &&
            item.kind === 'event' &&
            item.event.type === 'run/status' &&
            (item.event.data as { to: string }).to === 'running'
          )
            second = rtB.sessions.send(s.id, 'and then', { ifBusy: 'enqueue' });
        }
      })();
      await new Promise((r) => setTimeout(r, 100)); // node B listens
      const first = await rtB.sessions.send(s.id, 'go');
      expect((await rtB.runs.wait(first.run.id, { until: 'terminal' })).status).toBe('completed');
      await waitFor(() => second !== undefined);
      expect((await rtB.runs.wait((await second!).run.id, { until: 'terminal' })).status).toBe('completed');
      ac.abort();
      await reading;
      const message = items.find(
        (i) => i.kind === 'event' && i.event.type === 'assistant/message' && i.event.runId === first.run.id,
      )!;
      const before = items.slice(0, items.indexOf(message));
      expect(textOf(before)).toBe(chunks.join(''));
      await rtA.close({ graceMs: 0 });
      await rtB.close({ graceMs: 0 });
    }
  });

  it('one Idempotency-Key used on two nodes at the same moment: one message is accepted, the other request is refused', async () => {
    const [a, b] = await twoNodes();
    const agents = () => [defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'hi' }], { loop: true }) })];
    const rtA = runtimeOn(a, agents(), { worker: false });
    const rtB = runtimeOn(b, agents(), { worker: false });
    const s = await rtA.sessions.create();
    const idempotency = { tenant: 'default', key: 'k-1', fingerprint: 'f' };
    const outcomes = await Promise.allSettled([
      rtA.sessions.send(s.id, 'once', { idempotency, ifBusy: 'enqueue' }),
      rtB.sessions.send(s.id, 'once', { idempotency, ifBusy: 'enqueue' }),
    ]);
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    expect(outcomes.find((o) => o.status === 'rejected')).toMatchObject({
      reason: { code: 'idempotency_in_progress' },
    });
    expect(ofType(await allEvents(rtB.sessions, s.id), 'user/message')).toHaveLength(1);
    expect(await rtB.runs.list({ sessionId: s.id })).toHaveLength(1);
  });

  it('two messages sent to one idle session on two nodes at once, both enqueue if busy: one run is created, the other queued behind it', async () => {
    const [a, b] = await twoNodes();
    const agents = () => [defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'hi' }], { loop: true }) })];
    const rtA = runtimeOn(a, agents(), { worker: false });
    const rtB = runtimeOn(b, agents(), { worker: false });
    for (let i = 0; i < 5; i++) {
      const s = await rtA.sessions.create();
      const results = await Promise.all([
        rtA.sessions.send(s.id, 'one', { ifBusy: 'enqueue' }),
        rtB.sessions.send(s.id, 'two', { ifBusy: 'enqueue' }),
      ]);
      expect(results.map((r) => r.outcome).sort()).toEqual(['created', 'enqueued']);
      const runs = await rtA.runs.list({ sessionId: s.id });
      expect(runs.map((r) => r.queuedBehind).sort()).toEqual([false, true]);
    }
  });

  it('a node whose LISTEN connection is cut reconnects, and its followers catch up on what was committed meanwhile', async () => {
    const [a, b] = await twoNodes();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const rtB = runtimeOn(b, [defineAgent({ name: 'a', model: new ScriptedModel([]) })], { worker: false });
    const seen: number[] = [];
    let changed = 0;
    const off = rtB.sessions.log.subscribe('s', (i) =>
      i.kind === 'changed' ? changed++ : i.kind === 'event' && seen.push(i.event.seq),
    );
    cleanups.push(async () => off());
    await a.events.append('s', [note(1)]);
    for (let i = 0; i < 100 && changed === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(changed).toBe(1);
    // Cut node B's LISTEN connection from the server side (as a restart or a network cut would).
    const admin = new pg.Client({ connectionString: postgresUrl() });
    await admin.connect();
    const cut = await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1`, [
      `LISTEN "keel_${b.schema}"`,
    ]);
    await admin.end();
    expect(cut.rowCount).toBeGreaterThan(0);
    await a.events.append('s', [note(2)]);
    for (let i = 0; i < 150 && changed < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(changed).toBe(2);
    // Listening again: the next commit is told as it happens.
    await a.events.append('s', [note(3)]);
    for (let i = 0; i < 100 && changed < 3; i++) await new Promise((r) => setTimeout(r, 20));
    expect(changed).toBe(3);
  });
});
