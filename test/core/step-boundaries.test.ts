import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  defineAgent,
  Inbox,
  MemorySink,
  runTurn,
  ScriptedModel,
  startTurn,
  tool,
  type Message,
  type TurnHandle,
} from '../../src/index.ts';
import { deferred, flush } from '../support/deferred.ts';
import { contentOf, ProbeSink, systemOf, toolNamesOf, toolResultsIn, userTexts } from '../support/turn-helpers.ts';

const echo = tool({
  name: 'echo',
  description: 'Echoes its text',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => `echo:${text}`,
});

describe('step boundaries', () => {
  it('brackets exactly one model decision and its tool calls and results in each step', async () => {
    const model = new ScriptedModel([
      {
        text: 'Looking. ',
        toolCalls: [
          { id: 'c1', name: 'echo', input: { text: 'a' } },
          { id: 'c2', name: 'echo', input: { text: 'b' } },
        ],
      },
      { toolCalls: [{ id: 'c3', name: 'echo', input: { text: 'c' } }] },
      { text: 'All done.' },
    ]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model, tools: [echo] }), { sink, input: 'go' });

    expect(result.reason).toBe('completed');
    expect(result.steps).toBe(3);
    expect(sink.events[0]!.type).toBe('turn/start');
    expect(sink.events.at(-1)!.type).toBe('turn/end');

    const probe = new ProbeSink();
    probe.events.push(...sink.events);
    const steps = probe.steps();
    expect(steps).toHaveLength(3);
    const expectedCalls = [['c1', 'c2'], ['c3'], []];
    steps.forEach((events, i) => {
      expect(events[0]!.type).toBe('step/start');
      expect(events.at(-1)!.type).toBe('step/end');
      // Every event inside the bracket belongs to that step.
      expect(new Set(events.map((e) => e.step))).toEqual(new Set([i + 1]));
      const assistants = events.filter((e) => e.type === 'assistant/message');
      expect(assistants).toHaveLength(1);
      const calls = events.flatMap((e) => (e.type === 'tool/call' ? [e.data.toolCallId] : []));
      const results = events.flatMap((e) => (e.type === 'tool/result' ? [e.data.toolCallId] : []));
      expect(calls).toEqual(expectedCalls[i]);
      expect(results).toEqual(expectedCalls[i]);
      const assistantAt = events.findIndex((e) => e.type === 'assistant/message');
      const firstCall = events.findIndex((e) => e.type === 'tool/call');
      if (firstCall >= 0) expect(firstCall).toBeGreaterThan(assistantAt);
    });
    // Nothing of a step happens outside its bracket.
    const inBrackets = new Set(steps.flat());
    const stepWork = sink.events.filter((e) =>
      ['request/header', 'assistant/message', 'tool/call', 'tool/result'].includes(e.type),
    );
    expect(stepWork.length).toBe(3 + 3 + 3 + 3);
    expect(stepWork.every((e) => inBrackets.has(e))).toBe(true);
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['tool-calls', 'tool-calls', 'final']);

    // The conversation mirrors the steps: user, (assistant, tool) x2, assistant.
    expect(result.conversation.map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'tool',
      'assistant',
      'tool',
      'assistant',
    ]);
    expect(result.added).toEqual(result.conversation);
  });

  it('ends a step only after every call of it has a result', async () => {
    const slow = deferred<string>();
    const slowStarted = deferred();
    const tools = [
      tool({ name: 'fast', description: 'fast', input: z.object({}), execute: () => 'fast done' }),
      tool({
        name: 'slow',
        description: 'slow',
        input: z.object({}),
        execute: async () => {
          slowStarted.resolve();
          return slow.promise;
        },
      }),
    ];
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 'f', name: 'fast', input: {} },
          { id: 's', name: 'slow', input: {} },
        ],
      },
      { text: 'ok' },
    ]);
    const sink = new ProbeSink();
    const handle = startTurn(defineAgent({ name: 't', model, tools }), { sink, input: 'go' });

    await slowStarted.promise;
    await flush();
    expect(sink.ofType('step/end')).toHaveLength(0);
    expect(sink.ofType('tool/call').map((e) => e.data.toolCallId)).toEqual(['f', 's']);
    expect(model.calls).toHaveLength(1);

    slow.resolve('slow done');
    const result = await handle.result;
    expect(result.reason).toBe('completed');
    const stepEnd = sink.indexOf((e) => e.type === 'step/end' && e.step === 1);
    const lastResult = Math.max(
      ...sink.events.flatMap((e, i) => (e.type === 'tool/result' && e.step === 1 ? [i] : [])),
    );
    expect(stepEnd).toBeGreaterThan(lastResult);
    expect(toolResultsIn(model.calls[1]).map((r) => [r.toolCallId, r.output.value])).toEqual([
      ['f', 'fast done'],
      ['s', 'slow done'],
    ]);
  });

  it('steering sent while a tool runs enters the next step, not the current one, and keeps the tool result', async () => {
    const release = deferred();
    const started = deferred();
    const work = tool({
      name: 'work',
      description: 'long work',
      input: z.object({}),
      execute: async () => {
        started.resolve();
        await release.promise;
        return 'work finished';
      },
    });
    const model = new ScriptedModel([{ toolCalls: [{ id: 'w1', name: 'work', input: {} }] }, { text: 'noted' }]);
    const sink = new ProbeSink();
    const handle = startTurn(defineAgent({ name: 't', model, tools: [work] }), { sink, input: 'start' });

    await started.promise;
    const steer = handle.inbox.steer('also check the logs');
    release.resolve();
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    expect(model.calls).toHaveLength(2);
    expect(userTexts(model.calls[0])).toEqual(['start']);
    // The tool work in flight was not discarded: its result is recorded and reaches the model.
    expect(sink.ofType('tool/result').map((e) => e.data.output)).toEqual([{ type: 'text', value: 'work finished' }]);
    expect(toolResultsIn(model.calls[1])).toEqual([
      { toolCallId: 'w1', toolName: 'work', output: { type: 'text', value: 'work finished' } },
    ]);
    // The steer is a user message after the tool result.
    expect(model.calls[1]!.prompt.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'user']);
    expect(userTexts(model.calls[1])).toEqual(['start', 'also check the logs']);

    const steerEvent = sink.ofType('user/message').find((e) => e.data.via === 'steer');
    expect(steerEvent?.data.message.id).toBe(steer.id);
    const steerAt = sink.events.indexOf(steerEvent!);
    expect(steerAt).toBeGreaterThan(sink.indexOf((e) => e.type === 'step/end' && e.step === 1));
    expect(steerAt).toBeLessThan(sink.indexOf((e) => e.type === 'step/start' && e.step === 2));
    expect(result.conversation.map((m) => m.id)).toContain(steer.id);
  });

  it('steering that arrives during the final model call keeps the turn going (inbox passed in)', async () => {
    const inbox = new Inbox();
    const model = new ScriptedModel([{ text: 'one two three four', chunkDelayMs: 2 }, { text: 'second answer' }]);
    let steered = false;
    const sink = new ProbeSink({
      onDelta: (d) => {
        if (d.type === 'text/delta' && !steered) {
          steered = true;
          inbox.steer('wait, one more thing');
        }
      },
    });
    const handle = startTurn(defineAgent({ name: 't', model }), { sink, input: 'hello', inbox });
    expect(handle.inbox).toBe(inbox);
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    expect(result.steps).toBe(2);
    expect(userTexts(model.calls[0])).toEqual(['hello']);
    expect(userTexts(model.calls[1])).toEqual(['hello', 'wait, one more thing']);
    expect(model.calls[1]!.prompt.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(inbox.hasSteering).toBe(false);
  });

  it('applies configuration changes made mid-step only from the next step', async () => {
    const next = new ScriptedModel([{ text: 'from the new model' }], { provider: 'other', modelId: 'other-2' });
    const other = tool({
      name: 'other_tool',
      description: 'other',
      input: z.object({ n: z.number() }),
      execute: () => 1,
    });
    const model = new ScriptedModel([
      { text: 'calling', chunkDelayMs: 1, toolCalls: [{ id: 'e1', name: 'echo', input: { text: 'x' } }] },
    ]);
    let configured = false;
    const sink = new ProbeSink({
      onDelta: () => {
        if (configured) return;
        configured = true;
        // During step 1's model call: the tool set of step 1 must still be the old one.
        handle.configure({ model: next, system: 'new system', tools: [other], settings: { temperature: 0.7 } });
      },
    });
    const handle: TurnHandle = startTurn(
      defineAgent({ name: 't', model, system: 'old system', tools: [echo], settings: { temperature: 0.1 } }),
      { sink, input: 'go' },
    );
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    // Step 1 ran entirely on the old configuration, including its tool call.
    expect(systemOf(model.calls[0])).toBe('old system');
    expect(model.calls[0]!.temperature).toBe(0.1);
    expect(toolNamesOf(model.calls[0])).toEqual(['echo']);
    expect(sink.ofType('tool/result')[0]!.data.output).toEqual({ type: 'text', value: 'echo:x' });
    // Step 2 runs on the new one.
    expect(model.calls).toHaveLength(1);
    expect(next.calls).toHaveLength(1);
    expect(systemOf(next.calls[0])).toBe('new system');
    expect(next.calls[0]!.temperature).toBe(0.7);
    expect(toolNamesOf(next.calls[0])).toEqual(['other_tool']);

    const change = sink.ofType('config/change');
    expect(change).toHaveLength(1);
    expect(change[0]!.data).toEqual({
      model: { provider: 'other', modelId: 'other-2' },
      system: true,
      tools: ['other_tool'],
      settings: { temperature: 0.7 },
    });
    const changeAt = sink.events.indexOf(change[0]!);
    expect(changeAt).toBeGreaterThan(sink.indexOf((e) => e.type === 'step/end' && e.step === 1));
    expect(changeAt).toBeLessThan(sink.indexOf((e) => e.type === 'step/start' && e.step === 2));
    const headers = sink.ofType('request/header');
    expect(headers.map((h) => [h.data.provider, h.data.modelId, contentOf(sink, h.data.system)])).toEqual([
      ['scripted', 'scripted-1', 'old system'],
      ['other', 'other-2', 'new system'],
    ]);
  });

  it('runs beforeStep between steps, and a beforeStep steer joins the next step', async () => {
    const seen: number[] = [];
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'e1', name: 'echo', input: { text: 'x' } }] },
      { text: 'done' },
    ]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model, tools: [echo] }), {
      sink,
      input: 'go',
      hooks: {
        beforeStep(ctx) {
          seen.push(ctx.step);
          // Hooks never run while a step is open.
          expect(sink.ofType('step/start').length).toBe(sink.ofType('step/end').length);
          if (ctx.step === 1) ctx.steer('a note from the hook');
        },
      },
    });
    expect(result.reason).toBe('completed');
    expect(seen).toEqual([0, 1]);
    expect(userTexts(model.calls[0])).toEqual(['go']);
    expect(userTexts(model.calls[1])).toEqual(['go', 'a note from the hook']);
    expect(sink.ofType('user/message').map((e) => e.data.via)).toEqual(['input', 'steer']);
  });

  it('turnStopping can steer to keep the turn going; otherwise the turn completes', async () => {
    let stopping = 0;
    const model = new ScriptedModel([{ text: 'first answer' }, { text: 'second answer' }]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model }), {
      sink,
      input: 'go',
      hooks: {
        turnStopping(ctx) {
          stopping++;
          if (stopping === 1) ctx.steer('are you sure?');
        },
      },
    });
    expect(result.reason).toBe('completed');
    expect(stopping).toBe(2);
    expect(result.steps).toBe(2);
    expect(model.calls).toHaveLength(2);
    expect(userTexts(model.calls[1])).toEqual(['go', 'are you sure?']);
    expect(sink.ofType('step/start')).toHaveLength(2);
    expect(sink.ofType('turn/end')[0]!.data.reason).toBe('completed');
  });

  it('calls compact at every step boundary, also mid tool loop, and a returned conversation replaces the working one', async () => {
    const calls: Array<{ reason: string; step: number; lastInputTokens: number | undefined; size: number }> = [];
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'c1', name: 'echo', input: { text: '1' } }], usage: { input: 100 } },
      { toolCalls: [{ id: 'c2', name: 'echo', input: { text: '2' } }], usage: { input: 200 } },
      { toolCalls: [{ id: 'c3', name: 'echo', input: { text: '3' } }], usage: { input: 30 } },
      { text: 'finished' },
    ]);
    const summary: Message = { id: 'summary-1', role: 'summary', text: 'echoed 1 and 2' };
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model, tools: [echo] }), {
      sink,
      input: 'go',
      hooks: {
        compact(ctx) {
          calls.push({
            reason: ctx.reason,
            step: ctx.step,
            lastInputTokens: ctx.lastInputTokens,
            size: ctx.conversation.length,
          });
          return ctx.step === 2 ? [summary] : undefined;
        },
      },
    });

    expect(result.reason).toBe('completed');
    expect(calls).toEqual([
      { reason: 'threshold', step: 0, lastInputTokens: undefined, size: 1 },
      { reason: 'threshold', step: 1, lastInputTokens: 100, size: 3 },
      { reason: 'threshold', step: 2, lastInputTokens: 200, size: 5 },
      { reason: 'threshold', step: 3, lastInputTokens: 30, size: 3 },
    ]);
    // Before compaction the prompt holds the whole loop; after it, only the summary and what followed.
    expect(toolResultsIn(model.calls[1]).map((r) => r.toolCallId)).toEqual(['c1']);
    expect(model.calls[2]!.prompt).toEqual([
      {
        role: 'user',
        content: [{ type: 'text', text: '<summary of earlier conversation>\nechoed 1 and 2\n</summary>' }],
      },
    ]);
    expect(toolResultsIn(model.calls[3]).map((r) => r.toolCallId)).toEqual(['c3']);
    expect(userTexts(model.calls[3])[0]).toContain('echoed 1 and 2');
    expect(result.conversation[0]).toEqual(summary);
    expect(result.conversation.map((m) => m.role)).toEqual(['summary', 'assistant', 'tool', 'assistant']);
  });
});
