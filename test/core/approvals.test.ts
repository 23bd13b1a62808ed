import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, MemorySink, runTurn, ScriptedModel, startTurn, tool, type ScriptEntry } from '../../src/index.ts';
import { danglingCalls, toolResultsIn } from '../support/turn-helpers.ts';

function bank(approval: 'always' | ((input: { to: string; amount: number }) => boolean)) {
  const transfers: Array<{ to: string; amount: number }> = [];
  const lookups: string[] = [];
  const tools = [
    tool({
      name: 'transfer',
      description: 'Moves money',
      input: z.object({ to: z.string(), amount: z.number().positive() }),
      approval,
      execute: (input) => {
        transfers.push(input);
        return `sent ${input.amount} to ${input.to}`;
      },
    }),
    tool({
      name: 'balance',
      description: 'Reads the balance',
      input: z.object({}),
      execute: () => {
        lookups.push('balance');
        return '1000';
      },
    }),
  ];
  return { tools, transfers, lookups };
}

const mixedStep: ScriptEntry = {
  toolCalls: [
    { id: 't1', name: 'transfer', input: { to: 'alice', amount: 500 } },
    { id: 'b1', name: 'balance', input: {} },
  ],
};

describe('approvals', () => {
  it('suspends on a call that needs approval after running the others, then resumes and continues', async () => {
    const b = bank('always');
    const model = new ScriptedModel([mixedStep, { text: 'transfer done' }]);
    const agent = defineAgent({ name: 'bank', model, tools: b.tools });
    const sink = new MemorySink();
    const suspended = await runTurn(agent, { sink, input: 'pay alice 500' });

    expect(suspended.reason).toBe('suspended');
    expect(suspended.steps).toBe(1);
    expect(suspended.pending).toEqual([
      { toolCallId: 't1', toolName: 'transfer', input: { to: 'alice', amount: 500 }, kind: 'approval' },
    ]);
    expect(sink.ofType('turn/end')[0]!.data).toMatchObject({ reason: 'suspended', pending: suspended.pending });
    // The other call of the step ran; the open one did not.
    expect(b.lookups).toEqual(['balance']);
    expect(b.transfers).toEqual([]);
    expect(sink.ofType('tool/approval').map((e) => e.data)).toEqual([
      {
        toolCallId: 't1',
        toolName: 'transfer',
        input: { to: 'alice', amount: 500 },
        assistantMessageId: suspended.conversation[1]!.id,
      },
    ]);
    expect(sink.ofType('tool/call').map((e) => e.data.toolCallId)).toEqual(['b1']);
    expect(sink.ofType('tool/result').map((e) => e.data.toolCallId)).toEqual(['b1']);
    // The step stays open: no step/end, and only one model call.
    expect(sink.ofType('step/start')).toHaveLength(1);
    expect(sink.ofType('step/end')).toHaveLength(0);
    expect(model.calls).toHaveLength(1);
    expect(danglingCalls(suspended.conversation)).toEqual(['t1']);

    const resumedSink = new MemorySink();
    const handle = startTurn(agent, {
      sink: resumedSink,
      resume: {
        conversation: suspended.conversation,
        step: suspended.steps,
        approvals: [{ toolCallId: 't1', approved: true }],
      },
    });
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    expect(b.transfers).toEqual([{ to: 'alice', amount: 500 }]);
    expect(b.lookups).toEqual(['balance']);
    expect(resumedSink.ofType('turn/start')[0]!.data.resumed).toBe(true);
    expect(resumedSink.ofType('tool/decision').map((e) => e.data)).toEqual([{ toolCallId: 't1', approved: true }]);
    expect(resumedSink.ofType('tool/call').map((e) => [e.data.toolCallId, e.step])).toEqual([['t1', 1]]);
    // The open step is closed now, and the turn went on with step 2.
    expect(resumedSink.ofType('step/end').map((e) => [e.step, e.data.reason])).toEqual([
      [1, 'tool-calls'],
      [2, 'final'],
    ]);
    expect(result.steps).toBe(2);
    expect(model.calls).toHaveLength(2);
    // Both results, in the model's call order, reach the model.
    expect(toolResultsIn(model.calls[1]).map((r) => [r.toolCallId, r.output])).toEqual([
      ['t1', { type: 'text', value: 'sent 500 to alice' }],
      ['b1', { type: 'text', value: '1000' }],
    ]);
    expect(danglingCalls(result.conversation)).toEqual([]);
    expect(result.conversation.filter((m) => m.role === 'tool')).toHaveLength(1);
  });

  it('asks a predicate whether a call needs approval', async () => {
    const b = bank((input) => input.amount > 100);
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 'small', name: 'transfer', input: { to: 'bob', amount: 50 } },
          { id: 'big', name: 'transfer', input: { to: 'carol', amount: 5000 } },
        ],
      },
    ]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 'bank', model, tools: b.tools }), { sink, input: 'pay' });
    expect(result.reason).toBe('suspended');
    expect(result.pending?.map((p) => p.toolCallId)).toEqual(['big']);
    expect(b.transfers).toEqual([{ to: 'bob', amount: 50 }]);
    expect(sink.ofType('tool/approval').map((e) => e.data.toolCallId)).toEqual(['big']);
  });

  it('turns a denial into a denied error result the model sees', async () => {
    const b = bank('always');
    const model = new ScriptedModel([mixedStep, { text: 'understood, not sending' }]);
    const agent = defineAgent({ name: 'bank', model, tools: b.tools });
    const suspended = await runTurn(agent, { sink: new MemorySink(), input: 'pay alice 500' });
    const sink = new MemorySink();
    const result = await runTurn(agent, {
      sink,
      resume: {
        conversation: suspended.conversation,
        step: suspended.steps,
        approvals: [{ toolCallId: 't1', approved: false, reason: 'too much money' }],
      },
    });

    expect(result.reason).toBe('completed');
    expect(b.transfers).toEqual([]);
    expect(sink.ofType('tool/decision').map((e) => e.data)).toEqual([
      { toolCallId: 't1', approved: false, reason: 'too much money' },
    ]);
    expect(sink.ofType('tool/result').map((e) => e.data.output)).toEqual([
      { type: 'error', code: 'denied', message: 'too much money' },
    ]);
    // The denied call is on record with its result, but never ran.
    expect(sink.ofType('tool/call').map((e) => e.data.toolCallId)).toEqual(['t1']);
    expect(toolResultsIn(model.calls[1])).toEqual([
      { toolCallId: 't1', toolName: 'transfer', output: { type: 'execution-denied', reason: 'too much money' } },
      { toolCallId: 'b1', toolName: 'balance', output: { type: 'text', value: '1000' } },
    ]);
  });

  it('executes edited input instead of the model arguments, validated again', async () => {
    const b = bank('always');
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 't1', name: 'transfer', input: { to: 'alice', amount: 500 } },
          { id: 't2', name: 'transfer', input: { to: 'dave', amount: 10 } },
        ],
      },
      { text: 'ok' },
    ]);
    const agent = defineAgent({ name: 'bank', model, tools: b.tools });
    const suspended = await runTurn(agent, { sink: new MemorySink(), input: 'pay' });
    expect(suspended.pending?.map((p) => p.toolCallId)).toEqual(['t1', 't2']);

    const sink = new MemorySink();
    const result = await runTurn(agent, {
      sink,
      resume: {
        conversation: suspended.conversation,
        step: suspended.steps,
        approvals: [
          { toolCallId: 't1', approved: true, input: { to: 'alice', amount: 50 } },
          { toolCallId: 't2', approved: true, input: { to: 'dave', amount: -1 } },
        ],
      },
    });
    expect(result.reason).toBe('completed');
    expect(b.transfers).toEqual([{ to: 'alice', amount: 50 }]);
    expect(sink.ofType('tool/decision').map((e) => e.data.editedInput)).toEqual([
      { to: 'alice', amount: 50 },
      { to: 'dave', amount: -1 },
    ]);
    expect(sink.ofType('tool/call').map((e) => [e.data.toolCallId, e.data.input])).toEqual([
      ['t1', { to: 'alice', amount: 50 }],
      ['t2', { to: 'dave', amount: -1 }],
    ]);
    const outputs = sink.ofType('tool/result').map((e) => e.data.output);
    expect(outputs[0]).toEqual({ type: 'text', value: 'sent 50 to alice' });
    expect(outputs[1]).toMatchObject({ type: 'error', code: 'invalid_input' });
    expect(toolResultsIn(model.calls[1]).map((r) => r.output.type)).toEqual(['text', 'error-text']);
  });

  it('suspends again when a decision is still missing', async () => {
    const b = bank('always');
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 't1', name: 'transfer', input: { to: 'a', amount: 1 } },
          { id: 't2', name: 'transfer', input: { to: 'b', amount: 2 } },
        ],
      },
      { text: 'ok' },
    ]);
    const agent = defineAgent({ name: 'bank', model, tools: b.tools });
    const first = await runTurn(agent, { sink: new MemorySink(), input: 'pay' });
    const second = await runTurn(agent, {
      sink: new MemorySink(),
      resume: {
        conversation: first.conversation,
        step: first.steps,
        approvals: [{ toolCallId: 't1', approved: true }],
      },
    });
    expect(second.reason).toBe('suspended');
    expect(second.pending?.map((p) => p.toolCallId)).toEqual(['t2']);
    expect(b.transfers).toEqual([{ to: 'a', amount: 1 }]);
    const third = await runTurn(agent, {
      sink: new MemorySink(),
      resume: {
        conversation: second.conversation,
        step: second.steps,
        approvals: [{ toolCallId: 't2', approved: true }],
      },
    });
    expect(third.reason).toBe('completed');
    expect(b.transfers).toEqual([
      { to: 'a', amount: 1 },
      { to: 'b', amount: 2 },
    ]);
    expect(toolResultsIn(model.calls[1]).map((r) => r.toolCallId)).toEqual(['t1', 't2']);
  });

  it('resuming leaves the suspended result untouched', async () => {
    const b = bank('always');
    const model = new ScriptedModel([mixedStep, { text: 'done' }]);
    const agent = defineAgent({ name: 'bank', model, tools: b.tools });
    const suspended = await runTurn(agent, { sink: new MemorySink(), input: 'pay' });
    const snapshot = structuredClone(suspended.conversation);
    await runTurn(agent, {
      sink: new MemorySink(),
      resume: {
        conversation: suspended.conversation,
        step: suspended.steps,
        approvals: [{ toolCallId: 't1', approved: true }],
      },
    });
    // The suspended state can be resumed again (e.g. after a crash) or stored as it was.
    expect(suspended.conversation).toEqual(snapshot);
  });

  it('rejects a decision for a call that is not open', async () => {
    const b = bank('always');
    const model = new ScriptedModel([mixedStep]);
    const agent = defineAgent({ name: 'bank', model, tools: b.tools });
    const suspended = await runTurn(agent, { sink: new MemorySink(), input: 'pay' });
    const sink = new MemorySink();
    const result = await runTurn(agent, {
      sink,
      resume: {
        conversation: suspended.conversation,
        step: suspended.steps,
        approvals: [{ toolCallId: 'b1', approved: true }],
      },
    });
    expect(result.reason).toBe('failed');
    expect(result.error?.message).toContain('b1');
    expect(b.transfers).toEqual([]);
    expect(b.lookups).toEqual(['balance']);
  });
});
