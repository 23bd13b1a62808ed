import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, Inbox, runTurn, ScriptedModel, startTurn, tool, type TurnHandle } from '../../src/index.ts';
import { deferred } from '../support/deferred.ts';
import { ProbeSink, userTexts } from '../support/turn-helpers.ts';

describe('follow-ups', () => {
  it('are never part of the running turn and stay available once it ends', async () => {
    const started = deferred();
    const release = deferred();
    const work = tool({
      name: 'work',
      description: 'work',
      input: z.object({}),
      execute: async () => {
        started.resolve();
        await release.promise;
        return 'done';
      },
    });
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'w', name: 'work', input: {} }] },
      { text: 'final answer here', chunkDelayMs: 1 },
    ]);
    let sentDuringFinal = false;
    const sink = new ProbeSink({
      onDelta: (d) => {
        if (d.step === 2 && !sentDuringFinal) {
          sentDuringFinal = true;
          handle.inbox.followUp('second follow-up');
        }
      },
    });
    const handle: TurnHandle = startTurn(defineAgent({ name: 't', model, tools: [work] }), { sink, input: 'go' });
    await started.promise;
    const first = handle.inbox.followUp('first follow-up');
    release.resolve();
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    // A follow-up does not keep the turn going: two model decisions, no more.
    expect(result.steps).toBe(2);
    expect(model.calls).toHaveLength(2);
    for (const call of model.calls) expect(userTexts(call)).toEqual(['go']);
    expect(sink.ofType('user/message').map((e) => e.data.via)).toEqual(['input']);
    expect(result.conversation.some((m) => m.id === first.id)).toBe(false);

    expect(handle.inbox.hasFollowUps).toBe(true);
    const taken = handle.inbox.takeFollowUps();
    expect(taken.map((m) => m.content)).toEqual([
      [{ type: 'text', text: 'first follow-up' }],
      [{ type: 'text', text: 'second follow-up' }],
    ]);
    expect(taken[0]!.id).toBe(first.id);
    expect(handle.inbox.takeFollowUps()).toEqual([]);
  });

  it('a follow-up left in a passed-in inbox becomes the input of the next turn', async () => {
    const inbox = new Inbox();
    const model = new ScriptedModel([{ text: 'one' }, { text: 'two' }]);
    const agent = defineAgent({ name: 't', model });
    const sink = new ProbeSink({
      onEvent: (e) => {
        if (e.type === 'step/start' && e.turn === 1) inbox.followUp('and then?');
      },
    });
    const first = await runTurn(agent, { sink, input: 'hi', inbox });
    expect(userTexts(model.calls[0])).toEqual(['hi']);
    const [next] = inbox.takeFollowUps();
    expect(next).toBeDefined();
    const second = await runTurn(agent, { sink, history: first.conversation, input: next!.content, turn: 2 });
    expect(second.reason).toBe('completed');
    expect(userTexts(model.calls[1])).toEqual(['hi', 'and then?']);
  });
});
