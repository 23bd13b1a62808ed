import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import {
  chooseCut,
  costOf,
  estimateTokens,
  ScriptedModel,
  verifyReplay,
  type AssistantMessage,
  type Message,
  type SessionEvent,
  type Sessions,
  type SqliteStore,
  type ToolMessage,
} from '../../src/index.ts';
import { reasoningPartsIn, userTexts } from '../support/turn-helpers.ts';
import {
  agentWith,
  allEvents,
  memorySessions,
  ofType,
  promptText,
  shape,
  summarizerInput,
  summarizerModel,
  textOf,
  turn,
  unpairedToolCalls,
} from '../support/session-helpers.ts';

const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function open(): Sessions {
  const m = memorySessions();
  stores.push(m.store);
  return m.sessions;
}

const pricing = { inputPerMTok: 3, outputPerMTok: 15 };
const SUMMARY_MARK = '<summary of earlier conversation>';

// ---------- messages for chooseCut ----------

let n = 0;
const user = (text: string): Message => ({ id: `u${++n}`, role: 'user', content: [{ type: 'text', text }] });
const say = (text: string): Message => ({ id: `a${++n}`, role: 'assistant', content: [{ type: 'text', text }] });
function callAndResults(outputs: string[]): [AssistantMessage, ToolMessage] {
  const id = ++n;
  const calls = outputs.map((_, i) => ({
    type: 'tool-call' as const,
    toolCallId: `c${id}_${i}`,
    toolName: 'lookup',
    input: { q: `q${i}` },
  }));
  return [
    { id: `a${id}`, role: 'assistant', content: calls },
    {
      id: `t${id}`,
      role: 'tool',
      content: calls.map((c, i) => ({
        type: 'tool-result' as const,
        toolCallId: c.toolCallId,
        toolName: 'lookup',
        output: { type: 'text' as const, value: outputs[i]! },
      })),
    },
  ];
}

/** Estimated tokens as chooseCut counts them: message by message. */
const tokens = (messages: readonly Message[]): number => messages.reduce((sum, m) => sum + estimateTokens([m]), 0);

/** Where a cut that only counts tokens (no regard for tool pairs) would land. */
function naiveCut(messages: readonly Message[], keep: number): number {
  let suffix = 0;
  for (let i = messages.length - 1; i > 0; i--) {
    suffix += estimateTokens([messages[i]!]);
    if (suffix > keep) return i + 1 < messages.length ? i + 1 : i;
  }
  return 1;
}

describe('compaction', () => {
  it('(a) a manual compaction appends a compaction entry and deletes nothing', async () => {
    const sessions = open();
    const s = await sessions.create();
    const model = new ScriptedModel([
      { text: 'answer one', usage: { input: 100 } },
      { text: 'looking', toolCalls: [{ id: 'm1', name: 'lookup', input: { q: 'two' } }], usage: { input: 200 } },
      { text: 'answer two', usage: { input: 420 } },
      { text: 'answer three', usage: { input: 480 } },
    ]);
    const agent = agentWith(model);
    await turn(sessions, s.id, agent, 'question one');
    await turn(sessions, s.id, agent, 'question two');
    await turn(sessions, s.id, agent, 'question three');
    const before = await allEvents(sessions, s.id);
    const contextBefore = (await sessions.context(s.id)).messages;
    const transcriptBefore = await sessions.transcript(s.id);
    expect(shape(contextBefore)).toEqual([
      'user:question one',
      'assistant:answer one',
      'user:question two',
      'call:lookup+looking',
      'tool:found two',
      'assistant:answer two',
      'user:question three',
      'assistant:answer three',
    ]);

    const summarizer = new ScriptedModel(
      [{ text: 'They asked three questions; two was looked up.', usage: { input: 300, output: 25, cached: 100 } }],
      { modelId: 'summarizer-1' },
    );
    const keepRecentTokens = tokens(contextBefore.slice(6));
    const result = await sessions.compact(s.id, { model: summarizer, keepRecentTokens, pricing });
    if (!result.compacted) throw new Error(result.reason);

    const usage = { inputTokens: 300, outputTokens: 25, cachedInputTokens: 100, reasoningTokens: 0 };
    const kept = contextBefore.slice(6);
    const e = result.event;
    expect(e).toMatchObject({
      type: 'compaction',
      entry: true,
      seq: before.length + 1,
      parentId: before.filter((x) => x.entry).at(-1)!.id,
    });
    expect(e.data).toEqual({
      summary: 'They asked three questions; two was looked up.',
      firstKeptEntryId: before.find((x) => x.type === 'user/message' && x.data.message.id === kept[0]!.id)!.id,
      // The provider's report for the last call, not an estimate.
      tokensBefore: 480,
      tokensAfter: estimateTokens([{ id: '', role: 'summary', text: e.data.summary }, ...kept]),
      estimated: false,
      model: { provider: 'scripted', modelId: 'summarizer-1' },
      usage,
      cost: costOf(usage, pricing),
      reason: 'manual',
    });
    expect(e.data.cost).toBeGreaterThan(0);

    // Nothing deleted: the log only grew by the compaction, and every earlier event reads the same.
    const after = await allEvents(sessions, s.id);
    expect(after).toHaveLength(before.length + 1);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.at(-1)).toEqual(e);

    // The context is [summary, ...kept]; the transcript still shows everything, plus a marker.
    const ctx = await sessions.context(s.id);
    expect(ctx.messages).toEqual([{ id: e.id, role: 'summary', text: e.data.summary }, ...kept]);
    expect(result.context).toEqual(ctx.messages);
    expect(ctx.lastInputTokens).toBeNull();
    expect(await sessions.transcript(s.id)).toEqual([
      ...transcriptBefore,
      expect.objectContaining({ kind: 'compaction', entryId: e.id, tokensBefore: 480 }),
    ]);
    expect(await sessions.stats(s.id)).toMatchObject({ compactions: 1 });

    // The summarizer saw what was cut, and nothing of what was kept.
    const input = summarizerInput(summarizer.calls[0]);
    expect(input).toContain('User: question one');
    expect(input).toContain('Tool lookup returned: found two');
    expect(input).not.toContain('question three');

    // The next turn starts from the summary.
    const next = new ScriptedModel([{ text: 'answer four' }]);
    await turn(sessions, s.id, agentWith(next), 'question four');
    expect(userTexts(next.calls[0])).toEqual([
      `${SUMMARY_MARK}\n${e.data.summary}\n</summary>`,
      'question three',
      'question four',
    ]);
  });

  it('(a) refuses to compact when there is nothing to summarize', async () => {
    const sessions = open();
    const s = await sessions.create();
    await sessions.appendUserMessage(s.id, 'only message');
    const summarizer = summarizerModel();
    const result = await sessions.compact(s.id, { model: summarizer });
    expect(result.compacted).toBe(false);
    expect(summarizer.calls).toHaveLength(0);
    expect(ofType(await allEvents(sessions, s.id), 'compaction')).toEqual([]);
  });

  describe('(b) the cut never separates a tool call from its result', () => {
    it('moves a cut that would land on a tool message', () => {
      const [call, result] = callAndResults(['x'.repeat(400)]);
      const messages = [user('start'), say('ok'), user('look it up'), call, result, say('done')];
      const keep = tokens([result, messages[5]!]);
      // Counting tokens alone would start the kept part at the tool result.
      expect(messages[naiveCut(messages, keep)]!.role).toBe('tool');
      const cut = chooseCut(messages, keep);
      expect(messages[cut]!.role).not.toBe('tool');
      expect(unpairedToolCalls(messages.slice(cut))).toEqual([]);

      // A conversation that ends on tool results keeps the call with them.
      const [call2, result2] = callAndResults(['y'.repeat(400), 'z'.repeat(400)]);
      const open = [user('start'), say('ok'), call2, result2];
      expect(chooseCut(open, 1)).toBe(2);
      expect(unpairedToolCalls(open.slice(2))).toEqual([]);
    });

    it('holds for any conversation shape and any budget (property)', () => {
      const step = fc.oneof(
        fc.string({ maxLength: 80 }).map((t) => [user(t)]),
        fc.string({ maxLength: 80 }).map((t) => [say(t)]),
        fc.array(fc.string({ maxLength: 300 }), { minLength: 1, maxLength: 3 }).map((outs) => callAndResults(outs)),
      );
      fc.assert(
        fc.property(fc.array(step, { minLength: 1, maxLength: 12 }), fc.nat({ max: 600 }), (steps, keep) => {
          const messages: Message[] = steps.flat();
          const cut = chooseCut(messages, keep);
          expect(cut).toBeGreaterThanOrEqual(0);
          expect(cut).toBeLessThan(Math.max(messages.length, 1));
          if (cut === 0) {
            // Nothing to cut only when no message after the first can start a kept part.
            expect(messages.slice(1).every((m) => m.role === 'tool')).toBe(true);
            return;
          }
          expect(messages[cut]!.role).not.toBe('tool');
          expect(unpairedToolCalls(messages.slice(cut))).toEqual([]);
          // Keeps as much as fits: one more non-tool message before the cut would not have fit.
          const prev = messages.slice(0, cut).findLastIndex((m, i) => i > 0 && m.role !== 'tool');
          if (prev > 0 && tokens(messages.slice(cut)) <= keep)
            expect(tokens(messages.slice(prev))).toBeGreaterThan(keep);
        }),
        { numRuns: 300 },
      );
    });

    it('compacts a session whose naive cut lands on a tool result into a context with every call answered', async () => {
      const sessions = open();
      const s = await sessions.create();
      const big = (q: string) => `${q}:${'r'.repeat(600)}`;
      const tools = [
        // Tools whose results are large, so the token budget runs out in the middle of a step.
        { ...agentWith(new ScriptedModel([])).tools[0]!, execute: ({ q }: { q: string }) => big(q) },
      ];
      const model = new ScriptedModel([
        {
          toolCalls: [
            { id: 'k1', name: 'lookup', input: { q: 'one' } },
            { id: 'k2', name: 'lookup', input: { q: 'two' } },
          ],
        },
        { toolCalls: [{ id: 'k3', name: 'lookup', input: { q: 'three' } }] },
        { text: 'all found' },
      ]);
      await turn(sessions, s.id, agentWith(model, { tools }), 'find one, two and three');
      const before = (await sessions.context(s.id)).messages;
      expect(shape(before).map((x) => x.split(':')[0])).toEqual(['user', 'call', 'tool', 'call', 'tool', 'assistant']);

      for (let i = 1; i < before.length; i++) {
        const keep = tokens(before.slice(i));
        const cut = chooseCut(before, keep);
        expect(before[cut]!.role, `keep=${keep}`).not.toBe('tool');
      }
      // Enough for the last result and the answer, not for the call that asked for it.
      const keep = tokens(before.slice(4));
      expect(before[naiveCut(before, keep)]!.role).toBe('tool');
      const result = await sessions.compact(s.id, { model: summarizerModel(), keepRecentTokens: keep });
      if (!result.compacted) throw new Error(result.reason);
      const ctx = (await sessions.context(s.id)).messages;
      expect(ctx[0]!.role).toBe('summary');
      expect(ctx[1]!.role).not.toBe('tool');
      expect(unpairedToolCalls(ctx)).toEqual([]);
      const firstKept = (await allEvents(sessions, s.id)).find((e) => e.id === result.event.data.firstKeptEntryId)!;
      expect(firstKept.type).not.toBe('tool/result');
    });
  });

  it('(c) three successive compactions lose nothing', async () => {
    const sessions = open();
    const s = await sessions.create();
    const model = new ScriptedModel([
      { text: 'A1 alpha answer' },
      { text: 'A2 looking', toolCalls: [{ id: 'x1', name: 'lookup', input: { q: 'beta' } }] },
      { text: 'A2 beta answer' },
      { text: 'A3 gamma answer' },
      { text: 'A4 delta answer' },
      { text: 'A5 epsilon answer' },
    ]);
    const agent = agentWith(model);
    const summarizer = summarizerModel('RUNNING SUMMARY');
    const everything: Message[] = [];
    const keptBy: Message[][] = [];
    const plan: Array<{ inputs: string[]; keep: (ctx: Message[]) => number }> = [
      // Keep the last three messages (the tool step and the answer).
      { inputs: ['Q1 alpha', 'Q2 beta'], keep: (ctx) => tokens(ctx.slice(-3)) },
      // Keep a message the previous compaction kept, and cut another one of them.
      { inputs: ['Q3 gamma'], keep: (ctx) => tokens(ctx.slice(-3)) },
      // Keep almost nothing.
      { inputs: ['Q4 delta', 'Q5 epsilon'], keep: () => 1 },
    ];
    for (const [round, { inputs, keep }] of plan.entries()) {
      for (const input of inputs) {
        const r = await turn(sessions, s.id, agent, input);
        everything.push(...r.added);
      }
      const ctx = (await sessions.context(s.id)).messages.filter((m) => m.role !== 'summary');
      const result = await sessions.compact(s.id, { model: summarizer, keepRecentTokens: keep(ctx) });
      if (!result.compacted) throw new Error(`round ${round + 1}: ${result.reason}`);
      keptBy.push(result.context.filter((m) => m.role !== 'summary'));
      expect(result.context[0]).toMatchObject({ role: 'summary', text: `RUNNING SUMMARY ${round + 1}` });
    }
    expect(summarizer.calls).toHaveLength(3);

    // Each summary is built on the previous one.
    const inputs = summarizer.calls.map(summarizerInput);
    expect(inputs[0]).not.toContain('<previous-summary>');
    expect(inputs[1]).toContain('<previous-summary>\nRUNNING SUMMARY 1\n</previous-summary>');
    expect(inputs[2]).toContain('<previous-summary>\nRUNNING SUMMARY 2\n</previous-summary>');

    // Whatever an earlier compaction kept is still in the context or went to the next summary.
    const finalIds = new Set((await sessions.context(s.id)).messages.map((m) => m.id));
    const contextAfter = [keptBy[1]!, keptBy[2]!, [...finalIds].map((id) => ({ id }))];
    for (let k = 0; k < 2; k++) {
      for (const m of keptBy[k]!) {
        const stillThere = contextAfter[k]!.some((x) => x.id === m.id);
        const summarized = inputs[k + 1]!.includes(textOf(m) || '(no text)');
        expect(stillThere || summarized, `message ${shape([m])[0]} kept by compaction ${k + 1}`).toBe(true);
      }
    }
    // Both happened: compaction 2 cut something compaction 1 had kept, and kept something too.
    expect(keptBy[0]!.some((m) => !keptBy[1]!.some((x) => x.id === m.id))).toBe(true);
    expect(keptBy[0]!.some((m) => keptBy[1]!.some((x) => x.id === m.id))).toBe(true);

    // Every message ever produced is in the final context or in some summarizer input.
    for (const m of everything) {
      const text = textOf(m);
      if (!text) continue;
      expect(finalIds.has(m.id) || inputs.some((i) => i.includes(text)), `message ${shape([m])[0]}`).toBe(true);
    }
    const compactions = ofType(await allEvents(sessions, s.id), 'compaction');
    expect(compactions.map((c) => c.data.summary)).toEqual([
      'RUNNING SUMMARY 1',
      'RUNNING SUMMARY 2',
      'RUNNING SUMMARY 3',
    ]);
  });

  it('a boundary that does not compact costs no commit: a turn commits as often with compaction configured as without', async () => {
    const commitsOf = async (compaction: boolean) => {
      const m = memorySessions();
      stores.push(m.store);
      const s = await m.sessions.create();
      const steps = [1, 2].map((i) => ({
        toolCalls: [{ id: `t${i}`, name: 'lookup', input: { q: `item ${i}` } }],
        usage: { input: 100 },
      }));
      const before = m.store.commitCount;
      const result = await turn(m.sessions, s.id, agentWith(new ScriptedModel([...steps, { text: 'done' }])), 'go', {
        ...(compaction ? { compaction: { contextWindow: 100_000, model: summarizerModel('NEVER') } } : {}),
      });
      expect(result.reason).toBe('completed');
      return m.store.commitCount - before;
    };
    const without = await commitsOf(false);
    expect(await commitsOf(true)).toBe(without);
  });

  it('(e) a compaction that fails at a step boundary does not fail the turn: it goes on uncompacted and compacts at a later boundary', async () => {
    const sessions = open();
    const s = await sessions.create();
    const script = [100, 300, 500, 900, 950].map((input, i) => ({
      text: `step ${i + 1}`,
      toolCalls: [{ id: `t${i + 1}`, name: 'lookup', input: { q: `item ${i + 1}` } }],
      usage: { input },
    }));
    const model = new ScriptedModel([...script, { text: 'loop done', usage: { input: 350 } }]);
    // The summarizer refuses the first request for good (a 400), then works.
    let n = 0;
    const summarizer = new ScriptedModel(
      [
        () =>
          ++n === 1
            ? { error: { kind: 'bad_request' } }
            : { text: `LATER SUMMARY ${n}`, usage: { input: 200, output: 40 } },
      ],
      { loop: true },
    );
    const result = await turn(sessions, s.id, agentWith(model), 'process all items', {
      compaction: { contextWindow: 1000, reserveTokens: 200, keepRecentTokens: 40, model: summarizer, pricing },
    });
    expect(result.reason).toBe('completed');
    expect(result.steps).toBe(6);
    expect(summarizer.calls.length).toBeGreaterThanOrEqual(2);
    const events = await allEvents(sessions, s.id);
    expect(ofType(events, 'compaction').map((c) => c.data.summary)).toEqual([expect.stringMatching(/^LATER SUMMARY/)]);
    // The failure is on record, at the boundary where it happened.
    const failed = ofType(events, 'compaction/failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data).toMatchObject({ reason: 'threshold', error: expect.stringContaining('') });
    expect(failed[0]!.seq).toBeLessThan(ofType(events, 'compaction')[0]!.seq);
  });

  it('(d) compacts mid-turn, between two steps of a long tool loop, and the turn completes', async () => {
    const sessions = open();
    const s = await sessions.create();
    const script = [100, 300, 500, 900, 300].map((input, i) => ({
      text: `step ${i + 1}`,
      toolCalls: [{ id: `t${i + 1}`, name: 'lookup', input: { q: `item ${i + 1}` } }],
      usage: { input },
    }));
    const model = new ScriptedModel([...script, { text: 'loop done', usage: { input: 350 } }]);
    const summarizer = summarizerModel('MID-TURN SUMMARY');
    const result = await turn(sessions, s.id, agentWith(model), 'process all items', {
      compaction: { contextWindow: 1000, reserveTokens: 200, keepRecentTokens: 40, model: summarizer, pricing },
    });
    expect(result.reason).toBe('completed');
    expect(result.steps).toBe(6);
    expect(model.calls).toHaveLength(6);
    expect(summarizer.calls).toHaveLength(1);

    const events = await allEvents(sessions, s.id);
    const [compaction] = ofType(events, 'compaction');
    expect(ofType(events, 'compaction')).toHaveLength(1);
    expect(compaction!.data).toMatchObject({
      reason: 'threshold',
      tokensBefore: 900,
      estimated: false,
      model: { modelId: 'summarizer-1' },
    });
    // Placed between step 4's end and step 5's start of the same turn, and numbered so.
    const stepEnd4 = events.find((e) => e.type === 'step/end' && e.turn === 1 && e.step === 4)!;
    const stepStart5 = events.find((e) => e.type === 'step/start' && e.turn === 1 && e.step === 5)!;
    expect(compaction!.seq).toBeGreaterThan(stepEnd4.seq);
    expect(compaction!.seq).toBeLessThan(stepStart5.seq);
    expect(compaction!.turn).toBe(1);
    expect(compaction!.step).toBe(4);

    // The next request starts with the summary; what it replaced is no longer sent.
    const headers = ofType(events, 'request/header');
    expect(headers[4]!.data.context.first).toBe(compaction!.id);
    expect(userTexts(model.calls[4])[0]).toBe(`${SUMMARY_MARK}\nMID-TURN SUMMARY 1\n</summary>`);
    expect(promptText(model.calls[4])).not.toContain('process all items');
    expect(promptText(model.calls[3])).toContain('process all items');
    expect(unpairedToolCalls((await sessions.context(s.id)).messages)).toEqual([]);
    // The summarizer got the beginning of the turn.
    expect(summarizerInput(summarizer.calls[0])).toContain('User: process all items');
    const turnEnd = ofType(events, 'turn/end')[0]!;
    expect(turnEnd.seq).toBe(events.length);
    expect(turnEnd.data.reason).toBe('completed');
    expect((await sessions.stats(s.id)).cost).toBeCloseTo(compaction!.data.cost, 12);
    // The log explains every request, the ones after the cut included.
    expect(await verifyReplay(sessions.log, s.id)).toMatchObject({ ok: true, requests: 6 });
  });

  describe('(e) context overflow', () => {
    async function afterOneTurn() {
      const sessions = open();
      const s = await sessions.create();
      await turn(sessions, s.id, agentWith(new ScriptedModel([{ text: 'earlier answer' }])), 'earlier question');
      return { sessions, id: s.id };
    }

    it('compacts and retries the call once with the compacted context', async () => {
      const { sessions, id } = await afterOneTurn();
      const model = new ScriptedModel([{ error: { kind: 'context_overflow' } }, { text: 'fits now' }]);
      const summarizer = summarizerModel('OVERFLOW SUMMARY');
      const result = await turn(sessions, id, agentWith(model), 'big question', {
        compaction: { contextWindow: 100_000, keepRecentTokens: 1, model: summarizer },
      });
      expect(result.reason).toBe('completed');

      const events = (await allEvents(sessions, id)).filter((e) => e.turn === 2 || e.type === 'compaction');
      expect(events.map((e) => e.type)).toEqual([
        'turn/start',
        'user/message',
        'step/start',
        'request/header',
        'model/error',
        'compaction',
        'request/header',
        'assistant/message',
        'step/end',
        'turn/end',
      ]);
      const err = ofType(events, 'model/error')[0]!;
      expect(err.data).toMatchObject({ attempt: 1, willCompact: true, error: { kind: 'context_overflow' } });
      const compaction = ofType(events, 'compaction')[0]!;
      expect(compaction.data.reason).toBe('overflow');
      expect(compaction).toMatchObject({ turn: 2, step: 1 });
      const [first, retry] = ofType(events, 'request/header');
      expect(retry!.data.attempt).toBe(2);
      expect(first!.data.context.messages).toBe(3);
      expect(retry!.data.context).toEqual({ messages: 2, first: compaction.id, last: first!.data.context.last });
      expect(model.calls).toHaveLength(2);
      expect(userTexts(model.calls[1])).toEqual([`${SUMMARY_MARK}\nOVERFLOW SUMMARY 1\n</summary>`, 'big question']);
      expect(summarizerInput(summarizer.calls[0])).toContain('User: earlier question');
      expect(await verifyReplay(sessions.log, id)).toMatchObject({ ok: true, requests: 3 });
    });

    it('fails the turn when the call overflows again after the retry', async () => {
      const { sessions, id } = await afterOneTurn();
      const model = new ScriptedModel([
        { error: { kind: 'context_overflow' } },
        { error: { kind: 'context_overflow' } },
        { text: 'never' },
      ]);
      const summarizer = summarizerModel();
      const result = await turn(sessions, id, agentWith(model), 'big question', {
        compaction: { contextWindow: 100_000, keepRecentTokens: 1, model: summarizer },
      });
      expect(result.reason).toBe('failed');
      expect(result.error).toMatchObject({ kind: 'model', model: { kind: 'context_overflow' } });
      expect(model.calls).toHaveLength(2);
      expect(summarizer.calls).toHaveLength(1);
      const events = await allEvents(sessions, id);
      expect(ofType(events, 'model/error').map((e) => e.data.willCompact)).toEqual([true, false]);
      expect(ofType(events, 'compaction')).toHaveLength(1);
      expect(ofType(events, 'step/end').at(-1)!.data.reason).toBe('failed');
      expect(ofType(events, 'turn/end').at(-1)!.data).toMatchObject({ reason: 'failed', error: { kind: 'model' } });
    });

    it('fails the turn without compaction settings', async () => {
      const { sessions, id } = await afterOneTurn();
      const model = new ScriptedModel([{ error: { kind: 'context_overflow' } }, { text: 'never' }]);
      const result = await turn(sessions, id, agentWith(model), 'big question');
      expect(result.reason).toBe('failed');
      expect(model.calls).toHaveLength(1);
      const events = await allEvents(sessions, id);
      expect(ofType(events, 'model/error').map((e) => e.data.willCompact)).toEqual([false]);
      expect(ofType(events, 'compaction')).toEqual([]);
    });
  });

  it("(f) a mid-turn compaction never brings back an earlier turn's opaque reasoning, and keeps the current turn's", async () => {
    const sessions = open();
    const s = await sessions.create();
    // A long first message: the one thing to summarize, so the rest of turn 1 is kept verbatim.
    const long = `background ${'b'.repeat(2000)}`;
    const first = new ScriptedModel([
      {
        reasoning: 'turn one secret plan',
        reasoningSignature: 'sig-turn-1',
        text: 'turn one answer',
        usage: { input: 520 },
      },
    ]);
    await turn(sessions, s.id, agentWith(first), long);
    expect(JSON.stringify((await sessions.context(s.id)).messages)).toContain('sig-turn-1');

    const model = new ScriptedModel([
      {
        reasoning: 'turn two thinking',
        reasoningSignature: 'sig-turn-2',
        toolCalls: [{ id: 'r1', name: 'lookup', input: { q: 'it' } }],
        usage: { input: 900 },
      },
      { text: 'turn two answer', usage: { input: 300 } },
    ]);
    const summarizer = summarizerModel('REASONING SUMMARY');
    const result = await turn(sessions, s.id, agentWith(model), 'second question', {
      compaction: { contextWindow: 1000, reserveTokens: 200, keepRecentTokens: 200, model: summarizer },
    });
    expect(result.reason).toBe('completed');

    const events = await allEvents(sessions, s.id);
    const compaction = ofType(events, 'compaction')[0]!;
    expect(compaction).toMatchObject({ turn: 2, step: 1, data: { reason: 'threshold' } });
    // Turn 1's answer (which carried the reasoning) was kept, not summarized.
    const turnOneAnswer = ofType(events, 'assistant/message')[0]!;
    expect(compaction.data.firstKeptEntryId).toBe(turnOneAnswer.id);

    expect(model.calls).toHaveLength(2);
    const afterCompaction = model.calls[1]!;
    expect(userTexts(afterCompaction)[0]).toContain('REASONING SUMMARY 1');
    expect(promptText(afterCompaction)).toContain('turn one answer');
    for (const call of model.calls) {
      expect(promptText(call)).not.toContain('sig-turn-1');
      expect(promptText(call)).not.toContain('turn one secret plan');
    }
    expect(reasoningPartsIn(afterCompaction)).toEqual([
      { text: 'turn two thinking', providerOptions: { scripted: { signature: 'sig-turn-2' } } },
    ]);
    // The summarizer itself never sees reasoning.
    expect(summarizerInput(summarizer.calls[0])).not.toContain('secret plan');
    const header = ofType(events, 'request/header').at(-1)! as SessionEvent<'request/header'>;
    expect(header.data.context.first).toBe(compaction.id);
    expect(turnOneAnswer.type).toBe('assistant/message');
    expect(await verifyReplay(sessions.log, s.id)).toMatchObject({ ok: true, requests: 3 });
  });
});
