import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  defineAgent,
  MemorySink,
  runTurn,
  ScriptedModel,
  tool,
  type AgentOptions,
  type Message,
  type ScriptEntry,
} from '../../src/index.ts';
import { ProbeSink, textOfMessage, userTexts } from '../support/turn-helpers.ts';

const fastRetry = { initialDelayMs: 1, maxDelayMs: 5 };

function agent(script: ScriptEntry[], options: Partial<AgentOptions> = {}) {
  const model = new ScriptedModel(script);
  return { model, agent: defineAgent({ name: 't', model, ...options, retry: { ...fastRetry, ...options.retry } }) };
}

describe('transient model errors', () => {
  it.each(['rate_limit', 'overloaded', 'server', 'network'] as const)(
    'retries a %s error with backoff and succeeds',
    async (kind) => {
      const { model, agent: a } = agent([{ error: { kind } }, { error: { kind } }, { text: 'finally' }]);
      const sink = new MemorySink();
      const result = await runTurn(a, { sink, input: 'go' });

      expect(result.reason).toBe('completed');
      expect(model.calls).toHaveLength(3);
      const retries = sink.ofType('model/retry');
      expect(retries.map((e) => e.data.attempt)).toEqual([1, 2]);
      for (const r of retries) {
        expect(r.data.error.kind).toBe('transient');
        expect(r.data.delayMs).toBeGreaterThanOrEqual(0);
        expect(r.data.delayMs).toBeLessThanOrEqual(5);
      }
      // One request header per attempt, each written before its attempt, each with a fresh message id.
      const headers = sink.ofType('request/header');
      expect(headers.map((h) => h.data.attempt)).toEqual([1, 2, 3]);
      expect(retries.map((r) => r.data.abandonedMessageId)).toEqual([
        headers[0]!.data.messageId,
        headers[1]!.data.messageId,
      ]);
      const assistant = sink.ofType('assistant/message');
      expect(assistant).toHaveLength(1);
      expect(assistant[0]!.data.message.id).toBe(headers[2]!.data.messageId);
      // Every attempt sends the same prompt.
      expect(model.calls[1]!.prompt).toEqual(model.calls[0]!.prompt);
      expect(model.calls[2]!.prompt).toEqual(model.calls[0]!.prompt);
      expect(sink.ofType('model/error')).toHaveLength(0);
      expect(sink.ofType('step/start')).toHaveLength(1);
    },
  );

  it('honours retry-after from the provider', async () => {
    const { model, agent: a } = agent([{ error: { kind: 'rate_limit', retryAfterMs: 30 } }, { text: 'ok' }]);
    const sink = new MemorySink();
    const result = await runTurn(a, { sink, input: 'go' });
    expect(result.reason).toBe('completed');
    expect(model.calls).toHaveLength(2);
    const [retry] = sink.ofType('model/retry');
    expect(retry!.data.delayMs).toBe(30);
    expect(retry!.data.error).toMatchObject({ kind: 'transient', status: 429, retryAfterMs: 30 });
  });

  it('bounds the attempts, then fails the turn with a model error', async () => {
    const { model, agent: a } = agent(
      [
        { error: { kind: 'server' } },
        { error: { kind: 'server' } },
        { error: { kind: 'server', message: 'still broken' } },
        { text: 'too late' },
      ],
      { retry: { maxAttempts: 3 } },
    );
    const sink = new MemorySink();
    const result = await runTurn(a, { sink, input: 'go' });

    expect(result.reason).toBe('failed');
    expect(model.calls).toHaveLength(3);
    expect(sink.ofType('model/retry').map((e) => e.data.attempt)).toEqual([1, 2]);
    const errors = sink.ofType('model/error');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.data).toMatchObject({
      attempt: 3,
      willCompact: false,
      error: { kind: 'transient', status: 500, message: 'still broken' },
    });
    expect(result.error).toMatchObject({
      kind: 'model',
      message: 'still broken',
      model: { kind: 'transient', status: 500 },
    });
    expect(sink.ofType('turn/end')[0]!.data).toMatchObject({ reason: 'failed', error: { kind: 'model' } });
    expect(sink.ofType('step/end').map((e) => e.data.reason)).toEqual(['failed']);
    expect(sink.ofType('assistant/message')).toHaveLength(0);
  });

  it('retries an error that arrives mid-stream; the abandoned partial output is dropped', async () => {
    const { model, agent: a } = agent([
      { text: 'partial words that will be lost', error: { kind: 'overloaded', afterChunks: 2 } },
      { text: 'clean answer' },
    ]);
    const sink = new ProbeSink();
    const result = await runTurn(a, { sink, input: 'go' });

    expect(result.reason).toBe('completed');
    expect(model.calls).toHaveLength(2);
    const [retry] = sink.ofType('model/retry');
    expect(retry!.data.error.kind).toBe('transient');
    // Deltas of the abandoned attempt streamed under its own message id, which never became a message.
    expect(sink.textOf(retry!.data.abandonedMessageId)).toBe('partial words ');
    expect(result.conversation.map((m) => m.id)).not.toContain(retry!.data.abandonedMessageId);
    expect(result.conversation.filter((m) => m.role === 'assistant').map(textOfMessage)).toEqual(['clean answer']);
  });

  it('retries a mid-stream network failure', async () => {
    const { model, agent: a } = agent([{ text: 'a b c', error: { kind: 'network', afterChunks: 1 } }, { text: 'ok' }]);
    const sink = new MemorySink();
    const result = await runTurn(a, { sink, input: 'go' });
    expect(result.reason).toBe('completed');
    expect(model.calls).toHaveLength(2);
    expect(sink.ofType('model/retry')).toHaveLength(1);
  });

  it('does not retry a bad request', async () => {
    const { model, agent: a } = agent([
      { error: { kind: 'bad_request', message: 'unknown field' } },
      { text: 'never' },
    ]);
    const sink = new MemorySink();
    const result = await runTurn(a, { sink, input: 'go' });
    expect(result.reason).toBe('failed');
    expect(model.calls).toHaveLength(1);
    expect(sink.ofType('model/retry')).toHaveLength(0);
    expect(sink.ofType('model/error')[0]!.data).toMatchObject({
      attempt: 1,
      willCompact: false,
      error: { kind: 'fatal', status: 400 },
    });
    expect(result.error).toMatchObject({ kind: 'model', model: { kind: 'fatal' } });
  });
});

describe('context overflow', () => {
  const echo = tool({
    name: 'echo',
    description: 'echo',
    input: z.object({ t: z.string() }),
    execute: ({ t }) => t.repeat(3),
  });

  it('fails the turn when no compact hook can help', async () => {
    const { model, agent: a } = agent([{ error: { kind: 'context_overflow' } }, { text: 'never' }]);
    const sink = new MemorySink();
    const result = await runTurn(a, { sink, input: 'go' });
    expect(result.reason).toBe('failed');
    expect(model.calls).toHaveLength(1);
    expect(sink.ofType('model/retry')).toHaveLength(0);
    expect(sink.ofType('model/error')[0]!.data).toMatchObject({
      willCompact: false,
      error: { kind: 'context_overflow' },
    });
    expect(result.error).toMatchObject({ kind: 'model', model: { kind: 'context_overflow' } });
  });

  it('compacts and retries the call once with the shorter conversation', async () => {
    const { model, agent: a } = agent(
      [
        { toolCalls: [{ id: 'c1', name: 'echo', input: { t: 'x' } }] },
        { error: { kind: 'context_overflow' } },
        { text: 'fits now' },
      ],
      { tools: [echo] },
    );
    const reasons: string[] = [];
    const compacted: Message = { id: 'sum', role: 'summary', text: 'the user said go; echo was called' };
    const sink = new MemorySink();
    const result = await runTurn(a, {
      sink,
      input: 'go',
      hooks: {
        compact(ctx) {
          reasons.push(ctx.reason);
          return ctx.reason === 'overflow' ? [compacted] : undefined;
        },
      },
    });

    expect(result.reason).toBe('completed');
    expect(reasons).toEqual(['threshold', 'threshold', 'overflow']);
    expect(model.calls).toHaveLength(3);
    expect(model.calls[1]!.prompt.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(userTexts(model.calls[2])).toEqual([
      '<summary of earlier conversation>\nthe user said go; echo was called\n</summary>',
    ]);
    expect(model.calls[2]!.prompt).toHaveLength(1);
    expect(sink.ofType('model/error').map((e) => e.data.willCompact)).toEqual([true]);
    const headers = sink.ofType('request/header').filter((h) => h.step === 2);
    const before = [
      sink.ofType('user/message')[0]!.data.message.id,
      sink.ofType('assistant/message')[0]!.data.message.id,
      sink.ofType('tool/result')[0]!.data.toolMessageId,
    ];
    expect(headers.map((h) => [h.data.attempt, h.data.context])).toEqual([
      [1, { messages: before.length, first: before[0], last: before.at(-1) }],
      [2, { messages: 1, first: 'sum', last: 'sum' }],
    ]);
    expect(result.conversation.map((m) => m.id)).toEqual(['sum', sink.ofType('assistant/message')[1]!.data.message.id]);
  });

  it('fails when the compacted call overflows again', async () => {
    const { model, agent: a } = agent([
      { error: { kind: 'context_overflow' } },
      { error: { kind: 'context_overflow' } },
      { text: 'never' },
    ]);
    let overflowCompactions = 0;
    const sink = new MemorySink();
    const result = await runTurn(a, {
      sink,
      input: 'a long question',
      hooks: {
        compact(ctx) {
          if (ctx.reason !== 'overflow') return undefined;
          overflowCompactions++;
          return [{ id: 'short', role: 'user', content: [{ type: 'text', text: 'short question' }] }];
        },
      },
    });
    expect(result.reason).toBe('failed');
    expect(overflowCompactions).toBe(1);
    expect(model.calls).toHaveLength(2);
    expect(userTexts(model.calls[1])).toEqual(['short question']);
    expect(sink.ofType('model/error').map((e) => e.data.willCompact)).toEqual([true, false]);
    expect(result.error).toMatchObject({ kind: 'model', model: { kind: 'context_overflow' } });
  });
});
