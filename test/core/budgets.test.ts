import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, MemorySink, runTurn, ScriptedModel, tool } from '../../src/index.ts';
import { danglingCalls } from '../support/turn-helpers.ts';

const ping = tool({ name: 'ping', description: 'ping', input: z.object({}), execute: () => 'pong' });
/** A model that always wants another tool call. */
const looping = (usage?: { input?: number; output?: number; cached?: number }) =>
  new ScriptedModel([{ toolCalls: [{ name: 'ping', input: {} }], ...(usage ? { usage } : {}) }], { loop: true });

describe('limits and budgets', () => {
  it('stops at maxSteps', async () => {
    const model = looping();
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model, tools: [ping], limits: { maxSteps: 3 } }), {
      sink,
      input: 'go',
    });
    expect(result.reason).toBe('max_steps');
    expect(result.steps).toBe(3);
    expect(model.calls).toHaveLength(3);
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['tool-calls', 'tool-calls', 'tool-calls']);
    expect(sink.ofType('turn/end')[0]!.data).toMatchObject({ reason: 'max_steps', steps: 3 });
    // Stopping between steps leaves no call open.
    expect(danglingCalls(result.conversation)).toEqual([]);
  });

  it('a final answer on the last allowed step completes the turn', async () => {
    const model = new ScriptedModel([{ toolCalls: [{ name: 'ping', input: {} }] }, { text: 'done' }]);
    const result = await runTurn(defineAgent({ name: 't', model, tools: [ping], limits: { maxSteps: 2 } }), {
      sink: new MemorySink(),
      input: 'go',
    });
    expect(result.reason).toBe('completed');
    expect(result.steps).toBe(2);
  });

  it('stops when the token budget is spent, and sums usage in turn/end', async () => {
    const model = looping({ input: 100, output: 50, cached: 40 });
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model, tools: [ping], limits: { maxTokens: 400 } }), {
      sink,
      input: 'go',
    });
    // 150 tokens a step: 150, 300 are under 400; 450 is not.
    expect(result.reason).toBe('budget_exceeded');
    expect(result.steps).toBe(3);
    expect(model.calls).toHaveLength(3);
    const expected = { inputTokens: 300, outputTokens: 150, cachedInputTokens: 120, reasoningTokens: 0 };
    expect(result.usage).toEqual(expected);
    const end = sink.ofType('turn/end')[0]!.data;
    expect(end.reason).toBe('budget_exceeded');
    expect(end.usage).toEqual(expected);
    // Per-step usage adds up to the turn's.
    expect(sink.ofType('step/end').map((e) => e.data.usage.inputTokens)).toEqual([100, 100, 100]);
    expect(sink.ofType('assistant/message').map((e) => e.data.usage.outputTokens)).toEqual([50, 50, 50]);
  });

  it('stops when the cost budget is spent, and sums cost in turn/end', async () => {
    const model = looping({ input: 1000, output: 500 });
    const sink = new MemorySink();
    // 1000 * $3/M + 500 * $15/M = $0.0105 a step.
    const result = await runTurn(
      defineAgent({
        name: 't',
        model,
        tools: [ping],
        pricing: { inputPerMTok: 3, outputPerMTok: 15 },
        limits: { maxCostUsd: 0.025 },
      }),
      { sink, input: 'go' },
    );
    expect(result.reason).toBe('budget_exceeded');
    expect(result.steps).toBe(3);
    const costs = sink.ofType('assistant/message').map((e) => e.data.cost);
    expect(costs).toHaveLength(3);
    for (const c of costs) expect(c).toBeCloseTo(0.0105, 10);
    expect(result.cost).toBeCloseTo(0.0315, 10);
    expect(sink.ofType('turn/end')[0]!.data.cost).toBeCloseTo(0.0315, 10);
    expect(sink.ofType('turn/end')[0]!.data.usage).toEqual({
      inputTokens: 3000,
      outputTokens: 1500,
      cachedInputTokens: 0,
      reasoningTokens: 0,
    });
  });

  it('prices cached input at the cached rate', async () => {
    const model = new ScriptedModel([{ text: 'ok', usage: { input: 1_000_000, cached: 800_000, output: 0 } }]);
    const result = await runTurn(
      defineAgent({ name: 't', model, pricing: { inputPerMTok: 10, cachedInputPerMTok: 1, outputPerMTok: 0 } }),
      { sink: new MemorySink(), input: 'go' },
    );
    expect(result.cost).toBeCloseTo(0.2 * 10 + 0.8 * 1, 10);
  });

  it('refuses a cost limit without pricing', () => {
    expect(() => defineAgent({ name: 't', model: looping(), limits: { maxCostUsd: 1 } })).toThrow(/pricing/);
  });
});
