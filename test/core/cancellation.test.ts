import { describe, expect, it } from 'vitest';
import { getEventListeners } from 'node:events';
import { z } from 'zod';
import { defineAgent, MemorySink, runTurn, ScriptedModel, startTurn, tool, type TurnHandle } from '../../src/index.ts';
import { aborted, deferred } from '../support/deferred.ts';
import {
  assistantTexts,
  danglingCalls,
  ProbeSink,
  textOfMessage,
  toolResultsIn,
  userTexts,
} from '../support/turn-helpers.ts';

const LONG = 'one two three four five six seven eight nine ten eleven twelve';

describe('cancelling the model call', () => {
  it('keeps the partial text as an interrupted assistant message and ends the turn cancelled', async () => {
    const model = new ScriptedModel([{ text: LONG, chunkDelayMs: 5 }]);
    const sink = new ProbeSink();
    const handle = startTurn(defineAgent({ name: 't', model }), { sink, input: 'talk' });
    await sink.waitForDelta((d) => d.type === 'text/delta' && d.delta.startsWith('two'));
    handle.cancelModelCall();
    const result = await handle.result;

    expect(result.reason).toBe('cancelled');
    expect(model.calls).toHaveLength(1);
    const [assistant] = sink.ofType('assistant/message');
    expect(assistant).toBeDefined();
    const message = assistant!.data.message;
    expect(message.interrupted).toBe(true);
    expect(assistant!.data.finishReason).toBe('interrupted');
    const partial = textOfMessage(message);
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.length).toBeLessThan(LONG.length);
    expect(LONG.startsWith(partial)).toBe(true);
    expect(partial.startsWith('one two')).toBe(true);
    // What was kept is exactly what streamed.
    expect(sink.textOf(message.id)).toBe(partial);
    expect(result.conversation.at(-1)).toEqual(message);
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['interrupted']);
    expect(sink.ofType('turn/end')[0]!.data.reason).toBe('cancelled');
  });

  it('goes on with the next step when modelCallCancelled says continue', async () => {
    const model = new ScriptedModel([{ text: LONG, chunkDelayMs: 5 }, { text: 'short answer' }]);
    const hookSteps: number[] = [];
    const cancelOnce = { done: false };
    const probe = new ProbeSink({
      onDelta: (d) => {
        if (d.step === 1 && !cancelOnce.done && d.type === 'text/delta') {
          cancelOnce.done = true;
          handle.cancelModelCall();
        }
      },
    });
    const handle: TurnHandle = startTurn(defineAgent({ name: 't', model }), {
      sink: probe,
      input: 'talk',
      hooks: {
        modelCallCancelled(ctx) {
          hookSteps.push(ctx.step);
          ctx.steer('be brief');
          return 'continue';
        },
      },
    });
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    expect(hookSteps).toEqual([1]);
    expect(model.calls).toHaveLength(2);
    // The interrupted output (exactly the first chunk, since the cancel happened on it) is context for the next step.
    expect(assistantTexts(model.calls[1])).toEqual(['one ']);
    expect(model.calls[1]!.prompt.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(userTexts(model.calls[1])).toEqual(['talk', 'be brief']);
    expect(
      result.conversation
        .filter((m) => m.role === 'assistant')
        .map((m) => m.role === 'assistant' && m.interrupted === true),
    ).toEqual([true, false]);
    expect(probe.ofType('step/end').map((e) => e.data.reason)).toEqual(['interrupted', 'final']);
  });

  it('cancelling the turn during the model call keeps the partial output and ends cancelled, hooks notwithstanding', async () => {
    const model = new ScriptedModel([{ text: LONG, chunkDelayMs: 5 }, { text: 'never' }]);
    const sink = new ProbeSink();
    let hookCalled = false;
    const handle = startTurn(defineAgent({ name: 't', model }), {
      sink,
      input: 'talk',
      hooks: {
        modelCallCancelled: () => {
          hookCalled = true;
          return 'continue';
        },
      },
    });
    await sink.waitForDelta((d) => d.type === 'text/delta');
    handle.cancel('user pressed stop');
    const result = await handle.result;

    expect(result.reason).toBe('cancelled');
    expect(hookCalled).toBe(false);
    expect(model.calls).toHaveLength(1);
    expect(model.calls[0]!.abortSignal?.aborted).toBe(true);
    const last = result.conversation.at(-1);
    expect(last?.role === 'assistant' && last.interrupted).toBe(true);
    expect(LONG.startsWith(textOfMessage(last))).toBe(true);
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['cancelled']);
    expect(sink.ofType('turn/end')[0]!.data.reason).toBe('cancelled');
  });

  it('closes tool calls that streamed before the cut so no call is left dangling', async () => {
    const executed: string[] = [];
    const noop = tool({
      name: 'noop',
      description: 'noop',
      input: z.object({}),
      execute: () => {
        executed.push('noop');
        return 'ran';
      },
    });
    const model = new ScriptedModel([
      {
        chunkDelayMs: 2,
        toolCalls: [
          { id: 'first', name: 'noop', input: {} },
          { id: 'second', name: 'noop', input: {} },
        ],
      },
      { text: 'after' },
    ]);
    const sink = new ProbeSink({
      // The second call's input starts streaming only after the first call is complete.
      onDelta: (d) => {
        if (d.type === 'tool-input/delta' && d.toolCallId === 'second') handle.cancelModelCall();
      },
    });
    const handle: TurnHandle = startTurn(defineAgent({ name: 't', model, tools: [noop] }), {
      sink,
      input: 'go',
      hooks: { modelCallCancelled: () => 'continue' },
    });
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    expect(executed).toEqual([]);
    const assistant = sink.ofType('assistant/message')[0]!.data.message;
    expect(assistant.interrupted).toBe(true);
    expect(assistant.content).toEqual([{ type: 'tool-call', toolCallId: 'first', toolName: 'noop', input: {} }]);
    expect(
      sink.ofType('tool/result').map((e) => [e.data.toolCallId, e.data.output.type === 'error' && e.data.output.code]),
    ).toEqual([['first', 'cancelled']]);
    expect(danglingCalls(result.conversation)).toEqual([]);
    expect(toolResultsIn(model.calls[1])).toEqual([
      {
        toolCallId: 'first',
        toolName: 'noop',
        output: { type: 'error-text', value: expect.stringMatching(/^\[cancelled\]/) },
      },
    ]);
  });
});

describe('cancelling the turn while tools run', () => {
  function setup() {
    const signals = new Map<string, AbortSignal>();
    const started = { listen: deferred(), deaf: deferred() };
    const executed: string[] = [];
    const tools = [
      tool({
        name: 'quick',
        description: 'finishes at once',
        input: z.object({}),
        execute: () => {
          executed.push('quick');
          return 'quick result';
        },
      }),
      tool({
        name: 'listen',
        description: 'stops when told',
        input: z.object({}),
        execute: async (_i, ctx) => {
          executed.push('listen');
          signals.set('listen', ctx.signal);
          started.listen.resolve();
          await aborted(ctx.signal);
          throw new Error('stopped');
        },
      }),
      tool({
        name: 'deaf',
        description: 'ignores its signal',
        input: z.object({}),
        execute: (_i, ctx) => {
          executed.push('deaf');
          signals.set('deaf', ctx.signal);
          started.deaf.resolve();
          return new Promise<string>(() => {});
        },
      }),
      tool({
        name: 'later',
        description: 'sequential, queued behind the others',
        input: z.object({}),
        sequential: true,
        execute: () => {
          executed.push('later');
          return 'later result';
        },
      }),
    ];
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 'q', name: 'quick', input: {} },
          { id: 'l', name: 'listen', input: {} },
          { id: 'd', name: 'deaf', input: {} },
          { id: 's', name: 'later', input: {} },
        ],
      },
      { text: 'must never be asked' },
    ]);
    return { tools, model, signals, started, executed };
  }

  async function check(result: Awaited<TurnHandle['result']>, sink: MemorySink, s: ReturnType<typeof setup>) {
    expect(result.reason).toBe('cancelled');
    expect(s.signals.get('listen')?.aborted).toBe(true);
    expect(s.signals.get('deaf')?.aborted).toBe(true);
    expect(s.executed.sort()).toEqual(['deaf', 'listen', 'quick']);
    // No new step, no new model call.
    expect(s.model.calls).toHaveLength(1);
    expect(sink.ofType('step/start')).toHaveLength(1);
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['cancelled']);
    // Work that finished is kept; everything else is closed as cancelled.
    expect(
      sink
        .ofType('tool/result')
        .map((e) => [e.data.toolCallId, e.data.output.type === 'error' ? e.data.output.code : e.data.output.type]),
    ).toEqual([
      ['q', 'text'],
      ['l', 'cancelled'],
      ['d', 'cancelled'],
      ['s', 'cancelled'],
    ]);
    expect(danglingCalls(result.conversation)).toEqual([]);
    const end = sink.ofType('turn/end')[0]!;
    expect(end.data.reason).toBe('cancelled');
    expect(end.data.steps).toBe(1);
  }

  it('handle.cancel() aborts the tools, closes every call and starts no new step', async () => {
    const s = setup();
    const sink = new MemorySink();
    const handle = startTurn(defineAgent({ name: 't', model: s.model, tools: s.tools }), { sink, input: 'go' });
    await Promise.all([s.started.listen.promise, s.started.deaf.promise]);
    handle.cancel();
    await check(await handle.result, sink, s);
  });

  it('aborting the signal passed in does the same', async () => {
    const s = setup();
    const sink = new MemorySink();
    const ctl = new AbortController();
    const result = runTurn(defineAgent({ name: 't', model: s.model, tools: s.tools }), {
      sink,
      input: 'go',
      signal: ctl.signal,
    });
    await Promise.all([s.started.listen.promise, s.started.deaf.promise]);
    ctl.abort();
    await check(await result, sink, s);
  });

  it('a signal shared by many turns (a server shutdown signal, say) holds none of them once they end', async () => {
    const ctl = new AbortController();
    const model = new ScriptedModel([{ text: 'hi' }], { loop: true });
    const agent = defineAgent({ name: 't', model });
    for (let i = 0; i < 5; i++) {
      const result = await runTurn(agent, { sink: new MemorySink(), input: `turn ${i}`, signal: ctl.signal });
      expect(result.reason).toBe('completed');
    }
    // Each turn listened for the abort while it ran; an ended turn's listener (and the turn it holds) is gone.
    expect(getEventListeners(ctl.signal, 'abort')).toHaveLength(0);
    ctl.abort();
  });

  it('a signal aborted before the turn starts means no model call at all', async () => {
    const model = new ScriptedModel([{ text: 'never' }]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model }), { sink, input: 'go', signal: AbortSignal.abort() });
    expect(result.reason).toBe('cancelled');
    expect(model.calls).toHaveLength(0);
    expect(sink.ofType('step/start')).toHaveLength(0);
    expect(sink.ofType('turn/end')[0]!.data.reason).toBe('cancelled');
  });
});

describe('cancelling during a retry backoff', () => {
  it('handle.cancel() ends the turn cancelled, not failed', async () => {
    const model = new ScriptedModel([{ error: { kind: 'rate_limit', retryAfterMs: 60_000 } }, { text: 'never' }]);
    const sink = new ProbeSink();
    const handle = startTurn(defineAgent({ name: 't', model }), { sink, input: 'go' });
    await sink.waitFor('model/retry');
    handle.cancel();
    const result = await handle.result;
    expect(result.reason).toBe('cancelled');
    expect(result.error).toBeUndefined();
    expect(model.calls).toHaveLength(1);
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['cancelled']);
  });

  it('handle.cancelModelCall() stops waiting and counts as an interrupted call', async () => {
    const model = new ScriptedModel([{ error: { kind: 'overloaded', retryAfterMs: 60_000 } }, { text: 'fresh try' }]);
    const sink = new ProbeSink();
    const handle = startTurn(defineAgent({ name: 't', model }), {
      sink,
      input: 'go',
      hooks: { modelCallCancelled: () => 'continue' },
    });
    await sink.waitFor('model/retry');
    handle.cancelModelCall();
    const result = await handle.result;
    expect(result.reason).toBe('completed');
    expect(model.calls).toHaveLength(2);
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['interrupted', 'final']);
    expect(textOfMessage(result.conversation.at(-1))).toBe('fresh try');
  });
});
