import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  defineAgent,
  idempotencyKey,
  MemorySink,
  runTurn,
  ScriptedModel,
  startTurn,
  tool,
  type Tool,
  type ToolContext,
} from '../../src/index.ts';
import { deferred, flush, type Deferred } from '../support/deferred.ts';
import { ProbeSink, toolResultsIn } from '../support/turn-helpers.ts';

/** Tools that block until the test releases them, and a log of what started and finished when. */
function gatedTools(names: string[], options: { sequential?: string[] } = {}) {
  const log: string[] = [];
  const active = new Set<string>();
  const gates = new Map<string, Deferred<void>>();
  const started = new Map<string, Deferred<void>>();
  const activeAtStart = new Map<string, string[]>();
  for (const n of names) {
    gates.set(n, deferred());
    started.set(n, deferred());
  }
  const tools: Tool[] = names.map((n) =>
    tool({
      name: n,
      description: `gated ${n}`,
      input: z.object({}),
      sequential: options.sequential?.includes(n) ?? false,
      execute: async () => {
        activeAtStart.set(n, [...active]);
        active.add(n);
        log.push(`start:${n}`);
        started.get(n)!.resolve();
        await gates.get(n)!.promise;
        active.delete(n);
        log.push(`end:${n}`);
        return `${n} result`;
      },
    }),
  );
  return {
    tools,
    log,
    active,
    activeAtStart,
    release: (n: string) => gates.get(n)!.resolve(),
    started: (n: string) => started.get(n)!,
  };
}

const calls = (...names: string[]) => ({ toolCalls: names.map((n) => ({ id: `id_${n}`, name: n, input: {} })) });

describe('tool execution', () => {
  it('runs the calls of one decision in parallel and records results in the model order', async () => {
    const g = gatedTools(['a', 'b']);
    const model = new ScriptedModel([calls('a', 'b'), { text: 'ok' }]);
    const sink = new ProbeSink();
    const handle = startTurn(defineAgent({ name: 't', model, tools: g.tools }), { sink, input: 'go' });

    await g.started('a').promise;
    await flush();
    // Both are running before either has finished.
    expect(g.started('b').settled).toBe(true);
    expect([...g.active].sort()).toEqual(['a', 'b']);

    // They finish in reverse order...
    g.release('b');
    await flush();
    expect(g.log).toEqual(['start:a', 'start:b', 'end:b']);
    // ...but b's result waits for a's so the record keeps the model's order.
    expect(sink.ofType('tool/result')).toHaveLength(0);
    g.release('a');
    const result = await handle.result;

    expect(g.log).toEqual(['start:a', 'start:b', 'end:b', 'end:a']);
    expect(sink.ofType('tool/result').map((e) => e.data.toolCallId)).toEqual(['id_a', 'id_b']);
    const toolMessage = result.conversation.find((m) => m.role === 'tool');
    expect(toolMessage?.role === 'tool' && toolMessage.content.map((p) => [p.toolCallId, p.output])).toEqual([
      ['id_a', { type: 'text', value: 'a result' }],
      ['id_b', { type: 'text', value: 'b result' }],
    ]);
    expect(toolResultsIn(model.calls[1]).map((r) => r.toolCallId)).toEqual(['id_a', 'id_b']);
    // All results go in one tool message referenced by every tool/result event.
    expect(new Set(sink.ofType('tool/result').map((e) => e.data.toolMessageId))).toEqual(new Set([toolMessage!.id]));
  });

  it('never runs more calls at once than toolConcurrency', async () => {
    const g = gatedTools(['a', 'b']);
    const model = new ScriptedModel([calls('a', 'b'), { text: 'ok' }]);
    const handle = startTurn(defineAgent({ name: 't', model, tools: g.tools, toolConcurrency: 1 }), {
      sink: new MemorySink(),
      input: 'go',
    });

    await g.started('a').promise;
    await flush();
    expect(g.started('b').settled).toBe(false);
    g.release('a');
    await g.started('b').promise;
    expect(g.activeAtStart.get('b')).toEqual([]);
    g.release('b');
    const result = await handle.result;
    expect(result.reason).toBe('completed');
    expect(g.log).toEqual(['start:a', 'end:a', 'start:b', 'end:b']);
  });

  it('with toolConcurrency 2 runs two of three calls at once', async () => {
    const g = gatedTools(['a', 'b', 'c']);
    const model = new ScriptedModel([calls('a', 'b', 'c'), { text: 'ok' }]);
    const handle = startTurn(defineAgent({ name: 't', model, tools: g.tools, toolConcurrency: 2 }), {
      sink: new MemorySink(),
      input: 'go',
    });

    await g.started('b').promise;
    await flush();
    expect(g.started('a').settled).toBe(true);
    expect(g.started('c').settled).toBe(false);
    g.release('b');
    await g.started('c').promise;
    expect(g.activeAtStart.get('c')).toEqual(['a']);
    g.release('a');
    g.release('c');
    expect((await handle.result).reason).toBe('completed');
  });

  it('runs a sequential tool alone', async () => {
    const g = gatedTools(['p1', 'seq', 'p2'], { sequential: ['seq'] });
    const model = new ScriptedModel([calls('p1', 'seq', 'p2'), { text: 'ok' }]);
    const sink = new MemorySink();
    const handle = startTurn(defineAgent({ name: 't', model, tools: g.tools }), { sink, input: 'go' });

    await g.started('p1').promise;
    await flush();
    // seq waits for p1, and p2 (after seq in call order) waits for seq.
    expect(g.started('seq').settled).toBe(false);
    expect(g.started('p2').settled).toBe(false);
    g.release('p1');
    await g.started('seq').promise;
    await flush();
    expect(g.activeAtStart.get('seq')).toEqual([]);
    expect(g.started('p2').settled).toBe(false);
    g.release('seq');
    await g.started('p2').promise;
    g.release('p2');
    const result = await handle.result;

    expect(result.reason).toBe('completed');
    expect(g.log).toEqual(['start:p1', 'end:p1', 'start:seq', 'end:seq', 'start:p2', 'end:p2']);
    expect(sink.ofType('tool/result').map((e) => e.data.toolCallId)).toEqual(['id_p1', 'id_seq', 'id_p2']);
  });

  it('turns every kind of tool failure into an error result the model sees, and the turn goes on', async () => {
    let timedOutSignal: AbortSignal | undefined;
    const executed: string[] = [];
    const tools = [
      tool({
        name: 'echo',
        description: 'echo',
        input: z.object({ text: z.string() }),
        execute: ({ text }) => {
          executed.push(`echo:${text}`);
          return text;
        },
      }),
      tool({
        name: 'boom',
        description: 'throws',
        input: z.object({}),
        execute: () => {
          executed.push('boom');
          throw new Error('disk on fire');
        },
      }),
      tool({
        name: 'hang',
        description: 'never finishes by itself',
        input: z.object({}),
        timeoutMs: 20,
        execute: (_input, ctx) => {
          executed.push('hang');
          timedOutSignal = ctx.signal;
          return new Promise<string>(() => {});
        },
      }),
    ];
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 'u', name: 'nope', input: {} },
          { id: 'v', name: 'echo', input: { text: 5 } },
          { id: 'j', name: 'echo', input: '{"text": "unterminated' },
          { id: 'x', name: 'boom', input: {} },
          { id: 't', name: 'hang', input: {} },
          { id: 'ok', name: 'echo', input: { text: 'fine' } },
        ],
      },
      { text: 'I see the errors' },
    ]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model, tools }), { sink, input: 'go' });

    expect(result.reason).toBe('completed');
    expect(result.steps).toBe(2);
    // Invalid calls never execute.
    expect(executed.sort()).toEqual(['boom', 'echo:fine', 'hang']);
    const outputs = sink
      .ofType('tool/result')
      .map((e) => [e.data.toolCallId, e.data.output.type === 'error' ? e.data.output.code : e.data.output.type]);
    expect(outputs).toEqual([
      ['u', 'unknown_tool'],
      ['v', 'invalid_input'],
      ['j', 'invalid_input'],
      ['x', 'execution_error'],
      ['t', 'timeout'],
      ['ok', 'text'],
    ]);
    const byId = new Map(sink.ofType('tool/result').map((e) => [e.data.toolCallId, e.data.output]));
    expect(byId.get('u')).toMatchObject({ message: expect.stringContaining('nope') });
    expect(byId.get('v')).toMatchObject({ message: expect.stringContaining('text') });
    expect(byId.get('j')).toMatchObject({ message: expect.stringContaining('must be a JSON object') });
    expect(byId.get('x')).toMatchObject({ message: 'disk on fire' });
    expect(timedOutSignal?.aborted).toBe(true);
    // The malformed arguments are recorded verbatim.
    expect(sink.ofType('tool/call').find((e) => e.data.toolCallId === 'j')?.data.input).toBe('{"text": "unterminated');

    const seen = toolResultsIn(model.calls[1]);
    expect(seen.map((r) => r.toolCallId)).toEqual(['u', 'v', 'j', 'x', 't', 'ok']);
    for (const r of seen.slice(0, 5)) expect(r.output.type).toBe('error-text');
    expect(seen.slice(0, 5).map((r) => String(r.output.value).match(/^\[(\w+)\]/)?.[1])).toEqual([
      'unknown_tool',
      'invalid_input',
      'invalid_input',
      'execution_error',
      'timeout',
    ]);
    expect(seen[3]!.output.value).toContain('disk on fire');
    expect(seen[5]!.output).toEqual({ type: 'text', value: 'fine' });
  });

  it('records structured return values as json', async () => {
    const tools = [
      tool({ name: 'obj', description: 'object', input: z.object({}), execute: () => ({ when: new Date(0), n: 1 }) }),
      tool({ name: 'nothing', description: 'void', input: z.object({}), execute: () => undefined }),
    ];
    const model = new ScriptedModel([calls('obj', 'nothing'), { text: 'ok' }]);
    const sink = new MemorySink();
    await runTurn(defineAgent({ name: 't', model, tools }), { sink, input: 'go' });
    expect(sink.ofType('tool/result').map((e) => e.data.output)).toEqual([
      { type: 'json', value: { when: '1970-01-01T00:00:00.000Z', n: 1 } },
      { type: 'json', value: null },
    ]);
    expect(toolResultsIn(model.calls[1]).map((r) => r.output)).toEqual([
      { type: 'json', value: { when: '1970-01-01T00:00:00.000Z', n: 1 } },
      { type: 'json', value: null },
    ]);
  });

  it('gives tools a signal, their call id and an idempotency key stable per scope, place and call (not per provider call id)', async () => {
    const contexts: ToolContext[] = [];
    const probe = tool({
      name: 'probe',
      description: 'records its context',
      input: z.object({}),
      execute: (_input, ctx) => {
        contexts.push(ctx);
        return String(ctx.signal.aborted);
      },
    });
    const script = () =>
      new ScriptedModel([{ toolCalls: [{ id: 'call-7', name: 'probe', input: {} }] }, { text: 'ok' }]);
    const run = async (scope: string | undefined) => {
      const sink = new MemorySink();
      await runTurn(defineAgent({ name: 't', model: script(), tools: [probe] }), {
        sink,
        input: 'go',
        turn: 4,
        ...(scope ? { scope } : {}),
      });
      return sink;
    };

    const s1 = await run('session-1');
    const s1again = await run('session-1');
    const s2 = await run('session-2');
    await run(undefined);

    expect(contexts).toHaveLength(4);
    const [a, b, c, d] = contexts as [ToolContext, ToolContext, ToolContext, ToolContext];
    expect(a.signal).toBeInstanceOf(AbortSignal);
    expect(s1.ofType('tool/result')[0]!.data.output).toEqual({ type: 'text', value: 'false' });
    expect(a.signal.aborted).toBe(false);
    expect(a.toolCallId).toBe('call-7');
    expect(a.turn).toBe(4);
    expect(a.step).toBe(1);
    expect(a.idempotencyKey).toBe(b.idempotencyKey);
    expect(a.idempotencyKey).not.toBe(c.idempotencyKey);
    expect(d.idempotencyKey).not.toBe(a.idempotencyKey);
    expect(a.idempotencyKey).toBe(idempotencyKey('session-1', { turn: 4, step: 1, index: 0 }, 'probe', {}));
    // Its parts, each of which changes the key; the provider's call id is not one of them.
    for (const other of [
      idempotencyKey('session-1', { turn: 5, step: 1, index: 0 }, 'probe', {}),
      idempotencyKey('session-1', { turn: 4, step: 2, index: 0 }, 'probe', {}),
      idempotencyKey('session-1', { turn: 4, step: 1, index: 1 }, 'probe', {}),
      idempotencyKey('session-1', { turn: 4, step: 1, index: 0 }, 'other', {}),
      idempotencyKey('session-1', { turn: 4, step: 1, index: 0 }, 'probe', { x: 1 }),
    ])
      expect(other).not.toBe(a.idempotencyKey);
    // Inputs that are the same JSON in another key order are the same call.
    expect(idempotencyKey('s', { turn: 1, step: 1, index: 0 }, 't', { a: 1, b: 2 })).toBe(
      idempotencyKey('s', { turn: 1, step: 1, index: 0 }, 't', { b: 2, a: 1 }),
    );
    // The key the tool sees is the one recorded ahead of execution.
    expect(s1.ofType('tool/call')[0]!.data.idempotencyKey).toBe(a.idempotencyKey);
    expect(s1again.ofType('tool/call')[0]!.data.idempotencyKey).toBe(a.idempotencyKey);
    expect(s2.ofType('tool/call')[0]!.data.idempotencyKey).toBe(c.idempotencyKey);
  });
});
