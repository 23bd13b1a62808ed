import { afterEach, describe, expect, it } from 'vitest';
import {
  contextMessages,
  contextProjection,
  costOf,
  fold,
  InvalidEntryError,
  openSqliteStore,
  pathEntries,
  ScriptedModel,
  Sessions,
  verifyReplay,
  type Message,
  type SessionEvent,
  type SqliteStore,
} from '../../src/index.ts';
import { assistantTexts, userTexts } from '../support/turn-helpers.ts';
import {
  agentWith,
  allEvents,
  memorySessions,
  ofType,
  promptText,
  shape,
  summarizerInput,
  summarizerModel,
  tempDbPath,
  turn,
} from '../support/session-helpers.ts';

const stores: SqliteStore[] = [];
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const c of cleanups.splice(0)) c();
});

function open(snapshotEvery?: number) {
  const m = memorySessions(snapshotEvery !== undefined ? { snapshotEvery } : {});
  stores.push(m.store);
  return m.sessions;
}

const FIRST_PATH = ['user:first question', 'assistant:first answer'];
const SECOND_PATH = [
  ...FIRST_PATH,
  'user:second question',
  'call:lookup+checking',
  'tool:found second',
  'assistant:second answer',
];

/** Two turns: u1 a1 | u2 a2(call) t2 a3. Returns the entries by name. */
async function twoTurns(sessions: Sessions, title = 'source') {
  const s = await sessions.create({ title });
  const model = new ScriptedModel([
    { text: 'first answer' },
    { text: 'checking', toolCalls: [{ id: 'b1', name: 'lookup', input: { q: 'second' } }] },
    { text: 'second answer' },
  ]);
  const agent = agentWith(model);
  await turn(sessions, s.id, agent, 'first question');
  await turn(sessions, s.id, agent, 'second question');
  const events = await allEvents(sessions, s.id);
  const entries = events.filter((e) => e.entry);
  expect(entries.map((e) => e.type)).toEqual([
    'user/message',
    'assistant/message',
    'user/message',
    'assistant/message',
    'tool/result',
    'assistant/message',
  ]);
  const [u1, a1, u2, a2, t2, a3] = entries as [
    SessionEvent,
    SessionEvent,
    SessionEvent,
    SessionEvent,
    SessionEvent,
    SessionEvent,
  ];
  expect(shape((await sessions.context(s.id)).messages)).toEqual(SECOND_PATH);
  return { id: s.id, events, u1, a1, u2, a2, t2, a3 };
}

const transcriptTexts = async (sessions: Sessions, id: string) =>
  (await sessions.transcript(id)).map((i) =>
    i.kind === 'user' || i.kind === 'assistant' ? `${i.kind}:${i.text}` : `${i.kind}:${i.summary}`,
  );

describe('branches', () => {
  it('keeps the current leaf durably: a moved leaf survives closing and reopening the database', async () => {
    const db = tempDbPath();
    cleanups.push(db.cleanup);
    const store = openSqliteStore({ path: db.path });
    stores.push(store);
    // Snapshot every read, so a stale snapshot of the old branch exists when the leaf moves.
    const sessions = new Sessions({ store, snapshotEvery: 1 });
    const src = await twoTurns(sessions);
    const lastSeq = (await sessions.get(src.id)).lastSeq;

    const move = await sessions.switchBranch(src.id, src.a1.id);
    expect(move).toMatchObject({
      type: 'leaf/move',
      seq: lastSeq + 1,
      entry: false,
      data: { entryId: src.a1.id, reason: 'switch' },
    });
    expect((await sessions.get(src.id)).leafId).toBe(src.a1.id);
    await store.close();

    const reopened = openSqliteStore({ path: db.path });
    stores.push(reopened);
    const again = new Sessions({ store: reopened, snapshotEvery: 1 });
    const record = await again.get(src.id);
    expect(record).toMatchObject({ leafId: src.a1.id, lastSeq: lastSeq + 1 });
    // Nothing was appended after the move: the leaf is the session's own state, not a memory.
    expect((await allEvents(again, src.id)).at(-1)).toMatchObject({ type: 'leaf/move', data: { entryId: src.a1.id } });

    const ctx = await again.context(src.id);
    expect(shape(ctx.messages)).toEqual(FIRST_PATH);
    expect(ctx.leafId).toBe(src.a1.id);
    expect(await transcriptTexts(again, src.id)).toEqual(FIRST_PATH);

    // A turn on the reopened database continues from the moved leaf.
    const model = new ScriptedModel([{ text: 'another answer' }]);
    await turn(again, src.id, agentWith(model), 'another question');
    expect(userTexts(model.calls[0])).toEqual(['first question', 'another question']);
    expect(assistantTexts(model.calls[0])).toEqual(['first answer']);
    const added = (await allEvents(again, src.id)).filter((e) => e.entry && e.seq > lastSeq + 1);
    expect(added[0]!.parentId).toBe(src.a1.id);
  });

  it('forks into a branch at an earlier entry: the model sees only the path to it, the old branch stays readable', async () => {
    const sessions = open();
    const src = await twoTurns(sessions);

    const forked = await sessions.fork(src.id, src.a1.id, { into: 'branch' });
    expect(forked).toEqual({ sessionId: src.id, leafId: src.a1.id });
    const events = await allEvents(sessions, src.id);
    expect(events.at(-1)).toMatchObject({ type: 'leaf/move', data: { entryId: src.a1.id, reason: 'fork' } });
    expect(shape((await sessions.context(src.id)).messages)).toEqual(FIRST_PATH);

    const model = new ScriptedModel([{ text: 'alternative answer' }]);
    const result = await turn(sessions, src.id, agentWith(model), 'alternative question');
    expect(result.reason).toBe('completed');
    expect(userTexts(model.calls[0])).toEqual(['first question', 'alternative question']);
    expect(assistantTexts(model.calls[0])).toEqual(['first answer']);
    expect(promptText(model.calls[0])).not.toContain('second');
    const altLeaf = (await sessions.get(src.id)).leafId!;
    const alt = (await allEvents(sessions, src.id)).filter((e) => e.entry && e.seq > events.at(-1)!.seq);
    expect(alt.map((e) => e.type)).toEqual(['user/message', 'assistant/message']);
    expect(alt[0]!.parentId).toBe(src.a1.id);

    // Every event of the old branch is still in the log, unchanged.
    const all = await allEvents(sessions, src.id);
    expect(all.slice(0, src.events.length)).toEqual(src.events);
    expect(await transcriptTexts(sessions, src.id)).toEqual([
      ...FIRST_PATH,
      'user:alternative question',
      'assistant:alternative answer',
    ]);

    // Switching back shows the old branch again, tool results included.
    await sessions.switchBranch(src.id, src.a3.id);
    expect(await transcriptTexts(sessions, src.id)).toEqual([
      ...FIRST_PATH,
      'user:second question',
      'assistant:checking',
      'assistant:second answer',
    ]);
    const items = await sessions.transcript(src.id);
    expect(items[3]).toMatchObject({
      kind: 'assistant',
      tools: [{ toolCallId: 'b1', toolName: 'lookup', status: 'ok' }],
    });
    expect(shape((await sessions.context(src.id)).messages)).toEqual(SECOND_PATH);

    await sessions.switchBranch(src.id, altLeaf);
    expect(shape((await sessions.context(src.id)).messages)).toEqual([
      ...FIRST_PATH,
      'user:alternative question',
      'assistant:alternative answer',
    ]);
    expect(await verifyReplay(sessions.log, src.id)).toMatchObject({ ok: true, requests: 4 });
  });

  it('forks into a branch with a summary string: the context is the path to the fork point plus the summary', async () => {
    const sessions = open();
    const src = await twoTurns(sessions);
    const summary = 'We looked up "second" and found it; the user wants another approach.';

    const forked = await sessions.fork(src.id, src.a1.id, { into: 'branch', summary });
    const events = await allEvents(sessions, src.id);
    const [move, branch] = events.slice(-2) as [SessionEvent<'leaf/move'>, SessionEvent<'branch/summary'>];
    expect(move).toMatchObject({ type: 'leaf/move', data: { entryId: src.a1.id, reason: 'fork' } });
    expect(branch).toMatchObject({
      type: 'branch/summary',
      entry: true,
      parentId: src.a1.id,
      data: {
        summary,
        abandonedLeafId: src.a3.id,
        model: null,
        usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 },
        cost: 0,
      },
    });
    expect(forked).toEqual({ sessionId: src.id, leafId: branch.id });
    expect((await sessions.get(src.id)).leafId).toBe(branch.id);

    const ctx = await sessions.context(src.id);
    expect(shape(ctx.messages)).toEqual([...FIRST_PATH, `summary:${summary}`]);
    expect(ctx.messages[2]).toEqual({ id: branch.id, role: 'summary', text: summary });
    expect((await sessions.transcript(src.id)).at(-1)).toMatchObject({ kind: 'branch', entryId: branch.id, summary });

    const model = new ScriptedModel([{ text: 'trying another way' }]);
    await turn(sessions, src.id, agentWith(model), 'try something else');
    expect(userTexts(model.calls[0])).toEqual([
      'first question',
      `<summary of earlier conversation>\n${summary}\n</summary>`,
      'try something else',
    ]);
    expect(assistantTexts(model.calls[0])).toEqual(['first answer']);
    expect(promptText(model.calls[0])).not.toContain('second answer');

    // The abandoned branch is intact behind the summary.
    await sessions.switchBranch(src.id, src.a3.id);
    expect(shape((await sessions.context(src.id)).messages)).toEqual(SECOND_PATH);
    expect((await allEvents(sessions, src.id)).slice(0, src.events.length)).toEqual(src.events);
  });

  it('forks into a branch with a summarizer model and records its model, usage and cost', async () => {
    const sessions = open();
    const src = await twoTurns(sessions);
    const summarizer = new ScriptedModel(
      [{ text: 'digest of the abandoned branch', usage: { input: 120, output: 30 } }],
      { modelId: 'summarizer-1' },
    );
    const pricing = { inputPerMTok: 3, outputPerMTok: 15 };
    const usage = { inputTokens: 120, outputTokens: 30, cachedInputTokens: 0, reasoningTokens: 0 };
    const statsBefore = await sessions.stats(src.id);

    const forked = await sessions.fork(src.id, src.a1.id, { into: 'branch', summary: { model: summarizer, pricing } });
    const branch = ofType(await allEvents(sessions, src.id), 'branch/summary')[0]!;
    expect(forked.leafId).toBe(branch.id);
    expect(branch.data).toEqual({
      summary: 'digest of the abandoned branch',
      abandonedLeafId: src.a3.id,
      model: { provider: 'scripted', modelId: 'summarizer-1' },
      usage,
      cost: costOf(usage, pricing),
    });
    expect(branch.data.cost).toBeGreaterThan(0);

    // The summarizer was shown the path being left, not what lies before the fork point.
    expect(summarizer.calls).toHaveLength(1);
    const input = summarizerInput(summarizer.calls[0]);
    for (const part of [
      'User: second question',
      'Assistant: checking',
      'Assistant called lookup({"q":"second"})',
      'Tool lookup returned: found second',
      'Assistant: second answer',
    ]) {
      expect(input).toContain(part);
    }
    expect(input).not.toContain('first question');
    expect(input).not.toContain('<previous-summary>');

    const stats = await sessions.stats(src.id);
    expect(stats.cost).toBeCloseTo(statsBefore.cost + branch.data.cost, 12);
    expect(stats.usage.inputTokens).toBe(statsBefore.usage.inputTokens + 120);
    expect(shape((await sessions.context(src.id)).messages)).toEqual([
      ...FIRST_PATH,
      'summary:digest of the abandoned branch',
    ]);
  });

  it('forks into a new session that starts with the source context at that entry and records its origin', async () => {
    const sessions = open();
    const src = await twoTurns(sessions);
    // A compaction on the path, so the copy must carry its first kept entry over to the new ids.
    const summarizer = summarizerModel('SUMMARY');
    const compacted = await sessions.compact(src.id, { model: summarizer, keepRecentTokens: 1 });
    expect(compacted.compacted).toBe(true);
    await turn(sessions, src.id, agentWith(new ScriptedModel([{ text: 'third answer' }])), 'third question');
    const sourceEvents = await allEvents(sessions, src.id);
    const u3 = ofType(sourceEvents, 'user/message').at(-1)!;
    const sourceRecord = await sessions.get(src.id);
    const sourceContext = await sessions.context(src.id);

    // The source's own context at u3, from its log.
    const expected = contextMessages(fold(contextProjection, await pathEntries(sessions.log, src.id, u3.id, true)));
    expect(shape(expected)).toEqual(['summary:SUMMARY 1', 'assistant:second answer', 'user:third question']);

    const forked = await sessions.fork(src.id, u3.id, { into: 'session' });
    expect(forked.sessionId).not.toBe(src.id);
    const record = await sessions.get(forked.sessionId);
    expect(record).toMatchObject({
      origin: { sessionId: src.id, entryId: u3.id },
      title: 'source (fork)',
      leafId: forked.leafId,
    });

    const ctx = await sessions.context(forked.sessionId);
    const anonymous = (ms: readonly Message[]) => ms.map((m) => (m.role === 'summary' ? { ...m, id: '(summary)' } : m));
    expect(anonymous(ctx.messages)).toEqual(anonymous(expected));
    // The summary stands for a copied compaction entry of the new session.
    const events = await allEvents(sessions, forked.sessionId);
    expect(events[0]).toMatchObject({
      type: 'session/created',
      data: { origin: { sessionId: src.id, entryId: u3.id } },
    });
    const compaction = ofType(events, 'compaction')[0]!;
    expect(ctx.messages[0]!.id).toBe(compaction.id);
    const firstKept = events.find((e) => e.id === compaction.data.firstKeptEntryId)!;
    expect(firstKept).toMatchObject({ type: 'assistant/message', entry: true });
    expect(firstKept.data).toEqual(
      sourceEvents.find((e) => e.id === ofType(sourceEvents, 'compaction')[0]!.data.firstKeptEntryId)!.data,
    );
    // Only the path was copied: the new session's events are all entries with their own ids.
    expect(events.slice(1).every((e) => e.entry && !sourceEvents.some((x) => x.id === e.id))).toBe(true);

    // The source is untouched.
    expect(await sessions.get(src.id)).toEqual(sourceRecord);
    expect(await allEvents(sessions, src.id)).toEqual(sourceEvents);
    expect(await sessions.context(src.id)).toEqual(sourceContext);

    // A turn in the new session continues from the fork point.
    const model = new ScriptedModel([{ text: 'forked answer' }]);
    await turn(sessions, forked.sessionId, agentWith(model), 'forked question');
    expect(userTexts(model.calls[0])).toEqual([
      '<summary of earlier conversation>\nSUMMARY 1\n</summary>',
      'third question',
      'forked question',
    ]);
    expect(assistantTexts(model.calls[0])).toEqual(['second answer']);
    expect((await verifyReplay(sessions.log, forked.sessionId)).ok).toBe(true);
    expect((await verifyReplay(sessions.log, src.id)).ok).toBe(true);
  });

  it('refuses invalid entry ids, and a branch switch to an event that is not an entry', async () => {
    const sessions = open();
    const src = await twoTurns(sessions);
    const other = await twoTurns(sessions, 'other');
    const before = await sessions.get(src.id);
    const sessionCount = (await sessions.list({ limit: 100 })).length;
    const turnStart = ofType(src.events, 'turn/start')[0]!;
    const header = ofType(src.events, 'request/header')[0]!;

    for (const bad of ['no-such-entry', turnStart.id, header.id, other.a1.id]) {
      await expect(sessions.fork(src.id, bad, { into: 'branch' })).rejects.toBeInstanceOf(InvalidEntryError);
      await expect(sessions.fork(src.id, bad, { into: 'branch', summary: 'x' })).rejects.toBeInstanceOf(
        InvalidEntryError,
      );
      await expect(sessions.fork(src.id, bad, { into: 'session' })).rejects.toBeInstanceOf(InvalidEntryError);
      await expect(sessions.switchBranch(src.id, bad)).rejects.toThrow(InvalidEntryError);
    }
    await expect(sessions.switchBranch(src.id, header.id)).rejects.toMatchObject({ code: 'invalid_entry' });
    // Nothing was written anywhere.
    expect(await sessions.get(src.id)).toEqual(before);
    expect((await sessions.list({ limit: 100 })).length).toBe(sessionCount);

    // null is a valid target: an empty context, and the next message starts a new root.
    await sessions.switchBranch(src.id, null);
    expect((await sessions.context(src.id)).messages).toEqual([]);
    const model = new ScriptedModel([{ text: 'fresh start' }]);
    await turn(sessions, src.id, agentWith(model), 'from scratch');
    expect(userTexts(model.calls[0])).toEqual(['from scratch']);
    const root = ofType(await allEvents(sessions, src.id), 'user/message').at(-1)!;
    expect(root.parentId).toBeUndefined();
  });
});
