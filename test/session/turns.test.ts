import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  openSqliteStore,
  ScriptedModel,
  Sessions,
  tool,
  type LiveListener,
  type SessionEvent,
  type SqliteStore,
} from '../../src/index.ts';
import { assistantTexts, reasoningPartsIn, userTexts } from '../support/turn-helpers.ts';
import { agentWith, allEvents, memorySessions, ofType, tempDbPath, turn } from '../support/session-helpers.ts';

const stores: SqliteStore[] = [];
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const c of cleanups.splice(0)) c();
});

function open() {
  const m = memorySessions();
  stores.push(m.store);
  return m;
}

type Live = Parameters<LiveListener>[0];

describe('Sessions.startTurn', () => {
  it('records every loop event durably, in order, with turn numbers 1, 2, 3 across turns', async () => {
    const { sessions } = open();
    const s = await sessions.create({ title: 't' });
    const model = new ScriptedModel([
      { text: 'let me look', toolCalls: [{ id: 'c1', name: 'lookup', input: { q: 'a' } }] },
      { text: 'a is found' },
      { text: 'second answer' },
      {
        toolCalls: [
          { id: 'c2', name: 'lookup', input: { q: 'b' } },
          { id: 'c3', name: 'lookup', input: { q: 'c' } },
        ],
      },
      { text: 'third answer' },
    ]);
    const agent = agentWith(model);

    const results = [
      await turn(sessions, s.id, agent, 'first'),
      await turn(sessions, s.id, agent, 'second'),
      await turn(sessions, s.id, agent, 'third'),
    ];
    expect(results.map((r) => [r.turn, r.reason])).toEqual([
      [1, 'completed'],
      [2, 'completed'],
      [3, 'completed'],
    ]);

    const events = await allEvents(sessions, s.id);
    // seqs 1..n with no gap, and the session record agrees.
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect((await sessions.get(s.id)).lastSeq).toBe(events.length);

    const byTurn = (n: number) => events.filter((e) => e.turn === n).map((e) => e.type);
    expect(byTurn(1)).toEqual([
      'turn/start',
      'user/message',
      'step/start',
      'request/header',
      'assistant/message',
      'tool/call',
      'tool/result',
      'step/end',
      'step/start',
      'request/header',
      'assistant/message',
      'step/end',
      'turn/end',
    ]);
    expect(byTurn(2)).toEqual([
      'turn/start',
      'user/message',
      'step/start',
      'request/header',
      'assistant/message',
      'step/end',
      'turn/end',
    ]);
    expect(byTurn(3)).toEqual([
      'turn/start',
      'user/message',
      'step/start',
      'request/header',
      'assistant/message',
      'tool/call',
      'tool/call',
      'tool/result',
      'tool/result',
      'step/end',
      'step/start',
      'request/header',
      'assistant/message',
      'step/end',
      'turn/end',
    ]);
    // Everything but the creation belongs to a turn, and the turns do not interleave.
    expect(events[0]!.type).toBe('session/created');
    expect(events.slice(1).map((e) => e.turn)).toEqual([
      ...byTurn(1).map(() => 1),
      ...byTurn(2).map(() => 2),
      ...byTurn(3).map(() => 3),
    ]);
    expect(ofType(events, 'turn/start').map((e) => e.turn)).toEqual([1, 2, 3]);
    // Step numbers restart in each turn.
    expect(ofType(events, 'step/start').map((e) => [e.turn, e.step])).toEqual([
      [1, 1],
      [1, 2],
      [2, 1],
      [3, 1],
      [3, 2],
    ]);
    expect(ofType(events, 'turn/end').map((e) => e.data.reason)).toEqual(['completed', 'completed', 'completed']);

    // What the log recorded is what the loop produced.
    const assistants = ofType(events, 'assistant/message').map((e) => e.data.message);
    expect(assistants).toEqual(results.flatMap((r) => r.added.filter((m) => m.role === 'assistant')));
    const stats = await sessions.stats(s.id);
    expect(stats).toMatchObject({
      lastTurn: 3,
      turns: 3,
      steps: 5,
      modelCalls: 5,
      toolCalls: 3,
      turnEnds: { completed: 3 },
    });
  });

  it('holds write-ahead with the SQLite sink: a running tool already finds its tool/call durably recorded', async () => {
    const db = tempDbPath();
    cleanups.push(db.cleanup);
    const store = openSqliteStore({ path: db.path });
    stores.push(store);
    const sessions = new Sessions({ store });
    const s = await sessions.create();
    // A second connection to the same file: what it reads has been committed.
    const other = openSqliteStore({ path: db.path });
    stores.push(other);
    const otherSessions = new Sessions({ store: other });

    const seen: Array<{
      toolCallId: string;
      sameConnection: string[];
      otherConnection: string[];
      resultRecorded: boolean;
      decisionRecorded: boolean;
    }> = [];
    const probe = tool({
      name: 'probe',
      description: 'records what the log holds while it runs',
      input: z.object({}),
      execute: async (_input, ctx) => {
        const mine = await sessions.events(s.id);
        const theirs = await otherSessions.events(s.id);
        seen.push({
          toolCallId: ctx.toolCallId,
          sameConnection: ofType(mine, 'tool/call').map((e) => e.data.toolCallId),
          otherConnection: ofType(theirs, 'tool/call').map((e) => e.data.toolCallId),
          resultRecorded: ofType(theirs, 'tool/result').some((e) => e.data.toolCallId === ctx.toolCallId),
          // The model decision that asked for the call is on record too.
          decisionRecorded: ofType(theirs, 'assistant/message').some((e) =>
            e.data.message.content.some((p) => p.type === 'tool-call' && p.toolCallId === ctx.toolCallId),
          ),
        });
        return 'probed';
      },
    });
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'p1', name: 'probe', input: {} }] },
      { toolCalls: [{ id: 'p2', name: 'probe', input: {} }] },
      { text: 'done' },
    ]);
    const result = await turn(sessions, s.id, agentWith(model, { tools: [probe] }), 'probe twice');

    expect(result.reason).toBe('completed');
    expect(seen).toEqual([
      {
        toolCallId: 'p1',
        sameConnection: ['p1'],
        otherConnection: ['p1'],
        resultRecorded: false,
        decisionRecorded: true,
      },
      {
        toolCallId: 'p2',
        sameConnection: ['p1', 'p2'],
        otherConnection: ['p1', 'p2'],
        resultRecorded: false,
        decisionRecorded: true,
      },
    ]);
    // Each call's event precedes its result in the log.
    const events = await otherSessions.events(s.id);
    for (const id of ['p1', 'p2']) {
      const call = events.find((e) => e.type === 'tool/call' && e.data.toolCallId === id)!;
      const res = events.find((e) => e.type === 'tool/result' && e.data.toolCallId === id)!;
      expect(call.seq).toBeLessThan(res.seq);
    }
  });

  it("takes the next turn's history from the context projection, not from the previous turn's memory", async () => {
    const db = tempDbPath();
    cleanups.push(db.cleanup);
    let store = openSqliteStore({ path: db.path });
    stores.push(store);
    let sessions = new Sessions({ store });
    const s = await sessions.create();
    const model1 = new ScriptedModel([
      {
        reasoning: 'private thoughts',
        reasoningSignature: 'sig-turn-1',
        toolCalls: [{ id: 'k1', name: 'lookup', input: { q: 'key' } }],
      },
      { text: 'the key is found' },
    ]);
    await turn(sessions, s.id, agentWith(model1, { system: 'be brief' }), 'find the key');
    const before = await sessions.context(s.id);
    await store.close();

    // A new process: only the log is left.
    store = openSqliteStore({ path: db.path });
    stores.push(store);
    sessions = new Sessions({ store });
    const model2 = new ScriptedModel([{ text: 'it opens the door' }]);
    const result = await turn(sessions, s.id, agentWith(model2, { system: 'be brief' }), 'what does it open?');
    expect(result.turn).toBe(2);

    const prompt = model2.calls[0]!;
    expect(userTexts(prompt)).toEqual(['find the key', 'what does it open?']);
    expect(assistantTexts(prompt)).toEqual(['', 'the key is found']);
    expect(JSON.stringify(prompt.prompt)).toContain('found key');
    // Opaque reasoning of turn 1 is in the log, but never in turn 2's prompt.
    expect(JSON.stringify(before.messages)).toContain('sig-turn-1');
    expect(reasoningPartsIn(prompt)).toEqual([]);

    const header = ofType(await allEvents(sessions, s.id), 'request/header').at(-1)!;
    const newUser = result.added[0]!;
    expect(header.turn).toBe(2);
    expect(header.data.context).toEqual({
      messages: before.messages.length + 1,
      first: before.messages[0]!.id,
      last: newUser.id,
    });
  });

  it('uses a message appended with appendUserMessage when the turn has no input of its own', async () => {
    const { sessions } = open();
    const s = await sessions.create();
    const model = new ScriptedModel([{ text: 'hello there' }, { text: 'second reply' }]);
    const agent = agentWith(model);
    await turn(sessions, s.id, agent, 'hi');

    const appended = await sessions.appendUserMessage(s.id, 'queued while idle');
    expect(appended).toMatchObject({ type: 'user/message', entry: true, data: { via: 'input' } });
    expect(appended.turn).toBeUndefined();
    expect((await sessions.context(s.id)).messages.at(-1)).toEqual(appended.data.message);

    const result = await turn(sessions, s.id, agent);
    expect(result.reason).toBe('completed');
    expect(userTexts(model.calls[1])).toEqual(['hi', 'queued while idle']);
    const events = await allEvents(sessions, s.id);
    // The turn itself added no user message; its request ends with the appended one.
    expect(events.filter((e) => e.turn === 2 && e.type === 'user/message')).toEqual([]);
    const header = ofType(events, 'request/header').at(-1)!;
    expect(header.data.context.last).toBe(appended.data.message.id);
    // The answer hangs under the appended message in the tree.
    const answer = ofType(events, 'assistant/message').at(-1)!;
    expect(answer.parentId).toBe(appended.id);
  });

  it("refuses a message that says nothing, appended or as a turn's input, and logs nothing", async () => {
    const { sessions } = open();
    const s = await sessions.create();
    const model = new ScriptedModel([{ text: 'never' }]);
    const before = await allEvents(sessions, s.id);
    for (const input of ['', ' ', [], [{ type: 'text' as const, text: '' }]]) {
      await expect(sessions.appendUserMessage(s.id, input), JSON.stringify(input)).rejects.toMatchObject({
        code: 'invalid_event',
      });
      await expect(sessions.startTurn(s.id, agentWith(model), { input }), JSON.stringify(input)).rejects.toMatchObject({
        code: 'invalid_event',
      });
    }
    // Parts that are no user message's are refused as such (not a TypeError from the check).
    const malformed = [{ type: 'text', text: 5 }] as unknown as Parameters<Sessions['appendUserMessage']>[1];
    await expect(sessions.appendUserMessage(s.id, malformed)).rejects.toMatchObject({ code: 'invalid_event' });
    await expect(sessions.startTurn(s.id, agentWith(model), { input: malformed })).rejects.toMatchObject({
      code: 'invalid_event',
    });
    expect(await allEvents(sessions, s.id)).toEqual(before);
    expect(model.calls).toHaveLength(0);
  });

  it('delivers deltas to subscribers while durable events arrive in seq order', async () => {
    const { sessions } = open();
    const s = await sessions.create();
    const live: Live[] = [];
    const unsubscribe = sessions.subscribe(s.id, (e) => live.push(e));
    const model = new ScriptedModel([
      { chunks: ['Look', 'ing ', 'up'], toolCalls: [{ id: 'd1', name: 'lookup', input: { q: 'x' } }], chunkDelayMs: 1 },
      { reasoning: 'thinking', text: 'x was found, all good', chunkDelayMs: 1 },
    ]);
    const result = await turn(sessions, s.id, agentWith(model), 'look up x');
    expect(result.reason).toBe('completed');

    const durable = live.flatMap((e) => (e.kind === 'event' ? [e.event] : []));
    const stored = await allEvents(sessions, s.id);
    // Exactly the turn's events, in seq order, as stored.
    expect(durable.map((e) => e.seq)).toEqual(stored.filter((e) => e.turn === 1).map((e) => e.seq));
    expect(durable.map((e) => e.seq)).toEqual(durable.map((_, i) => durable[0]!.seq + i));
    expect(durable).toEqual(stored.filter((e) => e.turn === 1) as SessionEvent[]);

    const messages = ofType(durable, 'assistant/message').map((e) => e.data.message);
    const textOfDeltas = (id: string) =>
      live
        .flatMap((e) =>
          e.kind === 'delta' && e.delta.type === 'text/delta' && e.delta.messageId === id ? [e.delta.delta] : [],
        )
        .join('');
    expect(textOfDeltas(messages[0]!.id)).toBe('Looking up');
    expect(textOfDeltas(messages[1]!.id)).toBe('x was found, all good');
    expect(
      live.some((e) => e.kind === 'delta' && e.delta.type === 'reasoning/delta' && e.delta.delta === 'thinking'),
    ).toBe(true);
    expect(
      live.some((e) => e.kind === 'delta' && e.delta.type === 'tool-input/delta' && e.delta.toolCallId === 'd1'),
    ).toBe(true);

    // Each message's deltas stream live before the durable events of its step, which are
    // published when the step commits (ADR-0008): its request header, then the message.
    for (const m of messages) {
      const at = (pred: (e: Live) => boolean) => live.findIndex(pred);
      const header = at(
        (e) => e.kind === 'event' && e.event.type === 'request/header' && e.event.data.messageId === m.id,
      );
      const lastDelta = live.findLastIndex((e) => e.kind === 'delta' && e.delta.messageId === m.id);
      const final = at(
        (e) => e.kind === 'event' && e.event.type === 'assistant/message' && e.event.data.message.id === m.id,
      );
      expect(lastDelta).toBeGreaterThanOrEqual(0);
      expect(lastDelta).toBeLessThan(header);
      expect(header).toBeLessThan(final);
    }
    // Deltas are never stored.
    expect(stored.some((e) => (e.type as string).endsWith('/delta'))).toBe(false);

    unsubscribe();
    const count = live.length;
    await sessions.appendUserMessage(s.id, 'after unsubscribing');
    expect(live).toHaveLength(count);
  });
});
