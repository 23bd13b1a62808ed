import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  contextProjection,
  fold,
  openSqliteStore,
  readProjection,
  SessionLog,
  Sessions,
  statsProjection,
  transcriptProjection,
  type NewEvent,
  type Projection,
  type SessionEvent,
  type Store,
} from '../../src/index.ts';

/**
 * The cost of a read is the tail since the latest state (kept in memory, or the last snapshot), not the history: a long session reads in
 * time proportional to what happened since, a branch move rebuilds once from the path, and a
 * compaction bounds that rebuild to the part of the path it kept.
 */
const EVERY = 256;
const usage0 = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 };

let n = 0;
const user = (): NewEvent => ({
  type: 'user/message',
  data: { message: { id: `u${++n}`, role: 'user', content: [{ type: 'text', text: `question ${n}` }] }, via: 'input' },
});
const assistant = (): NewEvent => ({
  type: 'assistant/message',
  data: {
    message: { id: `a${++n}`, role: 'assistant', content: [{ type: 'text', text: `answer ${n}` }] },
    finishReason: 'stop',
    usage: usage0,
    cost: 0,
    timing: { startedAt: 0, durationMs: 1 },
  },
});
/** `count` events: user/assistant entries with some non-entry bookkeeping among them. */
const linear = (count: number): NewEvent[] =>
  Array.from({ length: count }, (_, i): NewEvent =>
    i % 5 === 4 ? { type: 'step/start', data: {} } : i % 2 === 0 ? user() : assistant(),
  );

describe('snapshot cost', () => {
  let store: Store;
  let sessions: Sessions;
  let id: string;

  const read = <S>(p: Projection<S>) => readProjection(sessions.log, id, p, EVERY);
  /** A read by a process that has kept nothing in memory: from the stored snapshot. */
  const coldRead = <S>(p: Projection<S>) => readProjection(new SessionLog(store), id, p, EVERY);
  /** The from-scratch answer the snapshot-backed read must equal. */
  const scratch = async <S>(p: Projection<S>): Promise<S> => {
    const events = await sessions.log.read(id);
    if (p.scope === 'log') return fold(p, events);
    const byId = new Map(events.filter((e) => e.entry).map((e) => [e.id, e]));
    const path: SessionEvent[] = [];
    for (let c = (await sessions.get(id)).leafId; c; c = byId.get(c)!.parentId ?? null) path.push(byId.get(c)!);
    return fold(p, path.reverse());
  };
  const entryCount = async () => (await sessions.log.read(id)).filter((e) => e.entry).length;

  beforeAll(async () => {
    store = openSqliteStore({ path: ':memory:' });
    sessions = new Sessions({ store, snapshotEvery: EVERY });
    id = (await sessions.create()).id;
    for (let i = 0; i < 6; i++) await sessions.append(id, linear(500));
    expect((await sessions.get(id)).lastSeq).toBe(3001);
  });
  afterAll(() => store.close());

  it('folds the whole history once, then only the tail', async () => {
    const entries = await entryCount();
    expect(entries).toBe(2400);

    const first = await read(contextProjection);
    expect(first.folded).toBe(entries);
    expect(first.state.messages).toHaveLength(entries);
    const firstStats = await read(statsProjection);
    expect(firstStats.folded).toBe(3001);
    // The transcript is kept up to date by this process's own commits from the session's creation
    // on (FollowedProjections): nothing to fold, the same state as a cold reader's fold of the path.
    const firstTranscript = await read(transcriptProjection);
    expect(firstTranscript.folded).toBe(0);
    expect(firstTranscript.state).toEqual(await scratch(transcriptProjection));
    const coldTranscript = await coldRead(transcriptProjection);
    expect(coldTranscript.state).toEqual(firstTranscript.state);

    await sessions.append(id, linear(10));
    const next = await read(contextProjection);
    // Exactly the 10 new events: nothing of the 3,001 before them.
    expect(next.folded).toBe(10);
    expect(next.asOfSeq).toBe(3011);
    expect(next.state).toEqual(await scratch(contextProjection));
    expect((await read(statsProjection)).folded).toBe(10);
    expect((await read(transcriptProjection)).folded).toBe(0);
    expect((await read(transcriptProjection)).state).toEqual(await scratch(transcriptProjection));
    expect((await read(statsProjection)).state).toEqual(await scratch(statsProjection));

    // Nothing new: nothing to fold, the process keeps the context it read last in memory...
    expect((await read(contextProjection)).folded).toBe(0);
    // ...while a cold reader (another process) folds the short tail after the stored snapshot.
    expect((await coldRead(contextProjection)).folded).toBe(10);

    await sessions.append(id, linear(300));
    expect((await read(contextProjection)).folded).toBe(300);
    expect((await coldRead(contextProjection)).folded).toBe(310);
    await sessions.append(id, linear(3));
    expect((await read(contextProjection)).folded).toBe(3);
    expect((await coldRead(contextProjection)).state).toEqual(await scratch(contextProjection));
  });

  it('rebuilds once from the path after a branch switch, then folds only the tail again', async () => {
    const ctx = await read(contextProjection);
    // Brings the stats snapshot up to date (its tail had grown past snapshotEvery).
    expect((await read(statsProjection)).folded).toBe(10 + 300 + 3);
    expect((await read(statsProjection)).folded).toBe(0);
    const target = ctx.state.entryIds[1999]!;
    await sessions.switchBranch(id, target);

    const rebuilt = await read(contextProjection);
    // The path to the 2000th entry: exactly its 2000 entries, not the session's whole log.
    expect(rebuilt.folded).toBe(2000);
    expect(rebuilt.leafId).toBe(target);
    expect(rebuilt.state).toEqual(await scratch(contextProjection));
    expect(rebuilt.state.entryIds.at(-1)).toBe(target);

    await sessions.append(id, linear(10));
    const after = await read(contextProjection);
    expect(after.folded).toBe(10);
    expect(after.state).toEqual(await scratch(contextProjection));
    expect(after.state.messages).toHaveLength(2000 + 8);

    // Log projections do not care about branches: the switch is one more event in their tail.
    const stats = await read(statsProjection);
    expect(stats.folded).toBe(11);
    expect(stats.state).toEqual(await scratch(statsProjection));
  });

  it('bounds the rebuild by a compaction: only the entries from its first kept entry are folded', async () => {
    // A tail of snapshotEvery events: this read snapshots, so what follows starts from a fresh snapshot.
    await sessions.append(id, linear(EVERY));
    expect((await read(contextProjection)).folded).toBeGreaterThanOrEqual(EVERY);
    const ctx = await read(contextProjection);
    expect(ctx.folded).toBe(0);
    const kept = ctx.state.entryIds.length - 20;
    const firstKeptEntryId = ctx.state.entryIds[kept]!;
    const [compaction] = await sessions.append(id, [
      {
        type: 'compaction',
        data: {
          summary: 'everything so far, briefly',
          firstKeptEntryId,
          tokensBefore: 50_000,
          tokensAfter: 500,
          estimated: true,
          model: { provider: 'p', modelId: 'm' },
          usage: usage0,
          cost: 0,
          reason: 'manual',
        },
      },
    ]);
    await sessions.append(id, linear(6));
    const leaf = (await sessions.get(id)).leafId!;
    const afterCompaction = await read(contextProjection);
    expect(afterCompaction.folded).toBe(7);
    expect(afterCompaction.state.summary).toEqual({ id: compaction!.id, text: 'everything so far, briefly' });
    expect(afterCompaction.state.entryIds[0]).toBe(firstKeptEntryId);

    // Away and back (no read in between): the snapshot's branch no longer matches, so the read rebuilds.
    await sessions.switchBranch(id, ctx.state.entryIds[100]!);
    await sessions.switchBranch(id, leaf);
    const rebuilt = await read(contextProjection);
    // The 20 kept messages' entries, the compaction, and the 5 entries appended after it.
    expect(rebuilt.folded).toBe(20 + 1 + 5);
    expect(rebuilt.state).toEqual(await scratch(contextProjection));
    expect(rebuilt.state.messages).toHaveLength(25);

    // ...and the next read folds only its tail again.
    await sessions.append(id, linear(4));
    const next = await read(contextProjection);
    expect(next.folded).toBe(4);
    expect(next.state).toEqual(await scratch(contextProjection));

    // A switch to the leaf it is already on is not a move: no rebuild (the kept state folds the one event).
    await sessions.switchBranch(id, (await sessions.get(id)).leafId);
    expect((await read(contextProjection)).folded).toBe(1);

    // The transcript is not bounded by compaction: it shows the whole path, compaction marker included.
    const end = (await sessions.get(id)).leafId;
    await sessions.switchBranch(id, ctx.state.entryIds[0]!);
    await sessions.switchBranch(id, end);
    const transcript = await read(transcriptProjection);
    expect(transcript.state).toEqual(await scratch(transcriptProjection));
    expect(transcript.state.items.filter((x) => x.kind === 'compaction')).toHaveLength(1);
  });

  it("writes a snapshot once the events since the last one reach snapshotEvery or the state's own size, whichever is more", async () => {
    // So writing snapshots costs the same per event however long the history grows, and a cold
    // read (a process that kept nothing in memory) folds at most about what the snapshot holds.
    const other = (await sessions.create()).id;
    const warm = () => readProjection(sessions.log, other, contextProjection, EVERY);
    const cold = () => readProjection(new SessionLog(store), other, contextProjection, EVERY);
    await sessions.append(other, linear(500));
    const first = await warm();
    // Built from nothing: stored at once.
    expect((await cold()).folded).toBe(0);
    expect(first.state.messages.length).toBeGreaterThan(EVERY);
    let since = 0;
    let stored = 0;
    for (let round = 0; round < 40 && stored < 1; round++) {
      await sessions.append(other, linear(100));
      since += 100;
      const w = await warm();
      expect(w.folded).toBe(100);
      const due = since >= Math.max(EVERY, w.state.messages.length);
      expect((await cold()).folded).toBe(due ? 0 : since);
      if (due) {
        stored++;
        since = 0;
      }
    }
    expect(stored).toBe(1);
    expect(since).toBe(0);
    expect((await cold()).state).toEqual((await warm()).state);
  });

  it('keeps in memory at most as many states, and as large together, as it is told', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const sid = (await sessions.create()).id;
      await sessions.append(sid, linear(5)); // 4 messages
      ids.push(sid);
    }
    const byCount = new SessionLog(store, undefined, { keptStates: 2 });
    for (const sid of ids) await readProjection(byCount, sid, contextProjection, EVERY);
    expect([...byCount.kept.keys()].map((k) => k.split('\u0000')[0])).toEqual(ids.slice(1));
    // The least recently used goes first: reading the oldest again keeps it and drops the next.
    await readProjection(byCount, ids[1]!, contextProjection, EVERY);
    expect([...byCount.kept.keys()].map((k) => k.split('\u0000')[0])).toEqual([ids[2], ids[1]]);

    const bySize = new SessionLog(store, undefined, { keptSize: 10 });
    for (const sid of ids) await readProjection(bySize, sid, contextProjection, EVERY);
    expect([...bySize.kept.keys()].map((k) => k.split('\u0000')[0])).toEqual(ids.slice(1));
    // A state larger than the budget alone is still kept (the latest one).
    const tiny = new SessionLog(store, undefined, { keptSize: 1 });
    await readProjection(tiny, ids[0]!, contextProjection, EVERY);
    expect(tiny.kept.size).toBe(1);
  });
});
