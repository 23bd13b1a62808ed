import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  contentHash,
  defineAgent,
  HELD,
  runTurn,
  ScriptedModel,
  tool,
  TurnNotOverError,
  type EventSink,
  type Message,
  type SinkAppendOptions,
  type TurnEvent,
} from '../../src/index.ts';
import { contentOf, ProbeSink, systemOf, userTexts } from '../support/turn-helpers.ts';

function weatherTool(executed: string[]) {
  return tool({
    name: 'weather',
    description: 'Weather forecast for a city',
    input: z.object({ city: z.string().describe('City name'), days: z.number().int().min(1).max(7).optional() }),
    execute: ({ city }) => {
      executed.push(city);
      return `sunny in ${city}`;
    },
  });
}

describe('write-ahead', () => {
  it('records each request header before the provider is called and each tool call before it runs', async () => {
    const executed: string[] = [];
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'w1', name: 'weather', input: { city: 'Oslo' } }] },
      { text: 'sunny' },
    ]);
    const callsAtHeader: number[] = [];
    const executedAtCall: number[] = [];
    const sink = new ProbeSink({
      onEvent: (e) => {
        if (e.type === 'request/header') callsAtHeader.push(model.calls.length);
        if (e.type === 'tool/call') executedAtCall.push(executed.length);
      },
    });
    const result = await runTurn(defineAgent({ name: 't', model, tools: [weatherTool(executed)] }), {
      sink,
      input: 'weather?',
    });
    expect(result.reason).toBe('completed');
    expect(callsAtHeader).toEqual([0, 1]);
    expect(executedAtCall).toEqual([0]);
    expect(executed).toEqual(['Oslo']);
  });

  it('never calls the provider when the request header cannot be recorded', async () => {
    const model = new ScriptedModel([{ text: 'never' }]);
    const sink = new ProbeSink({ failOn: (e) => e.type === 'request/header' });
    const result = await runTurn(defineAgent({ name: 't', model }), { sink, input: 'hi' });

    expect(model.calls).toHaveLength(0);
    expect(result.reason).toBe('failed');
    expect(result.error?.kind).toBe('sink');
    expect(result.error?.message).toContain('request/header');
    expect(sink.ofType('request/header')).toHaveLength(0);
    expect(sink.ofType('turn/end')[0]!.data).toMatchObject({ reason: 'failed', error: { kind: 'sink' } });
  });

  it('never executes a tool whose call cannot be recorded, nor any other call of the step', async () => {
    const executed: string[] = [];
    const model = new ScriptedModel([
      {
        toolCalls: [
          { id: 'w1', name: 'weather', input: { city: 'Oslo' } },
          { id: 'w2', name: 'weather', input: { city: 'Rome' } },
        ],
      },
      { text: 'never' },
    ]);
    const sink = new ProbeSink({ failOn: (e) => e.type === 'tool/call' && e.data.toolCallId === 'w2' });
    const result = await runTurn(defineAgent({ name: 't', model, tools: [weatherTool(executed)] }), {
      sink,
      input: 'weather?',
    });

    expect(executed).toEqual([]);
    expect(result.reason).toBe('failed');
    expect(result.error?.kind).toBe('sink');
    expect(model.calls).toHaveLength(1);
    expect(sink.ofType('tool/call').map((e) => e.data.toolCallId)).toEqual(['w1']);
    expect(sink.ofType('tool/result')).toHaveLength(0);
  });

  it('records provider, model, settings, rendered system prompt, tool schemas and context ids', async () => {
    const executed: string[] = [];
    const weather = weatherTool(executed);
    const model = new ScriptedModel(
      [{ toolCalls: [{ id: 'w1', name: 'weather', input: { city: 'Oslo', days: 2 } }] }, { text: 'sunny' }],
      {
        provider: 'acme',
        modelId: 'acme-large',
      },
    );
    const history: Message[] = [
      { id: 'h1', role: 'user', content: [{ type: 'text', text: 'earlier' }] },
      { id: 'h2', role: 'assistant', content: [{ type: 'text', text: 'earlier answer' }] },
    ];
    const sink = new ProbeSink();
    const result = await runTurn(
      defineAgent({
        name: 't',
        model,
        tools: [weather],
        system: ({ turn, step }) => `You are helpful. turn=${turn} step=${step}`,
        settings: { temperature: 0.3, maxOutputTokens: 256, stopSequences: ['END'] },
      }),
      { sink, history, input: 'weather?', turn: 3 },
    );
    expect(result.reason).toBe('completed');

    const headers = sink.ofType('request/header').map((e) => e.data);
    expect(headers).toHaveLength(2);
    const [h1, h2] = headers as [(typeof headers)[0], (typeof headers)[0]];
    expect(h1).toMatchObject({ provider: 'acme', modelId: 'acme-large', attempt: 1 });
    expect(h1.settings).toEqual({ temperature: 0.3, maxOutputTokens: 256, stopSequences: ['END'] });
    // The system prompt and tool schemas go by content hash; their text rides with the header
    // once per turn (the log stores it once, content-addressed).
    const attached = sink.events.flatMap((e) => e.blobs ?? []);
    const content = new Map(attached.map((b) => [b.hash, JSON.parse(b.data) as unknown]));
    for (const b of attached) expect(contentHash(b.data)).toBe(b.hash);
    // A function system prompt is recorded as rendered, per step.
    expect(content.get(h1.system!)).toBe('You are helpful. turn=3 step=1');
    expect(content.get(h2.system!)).toBe('You are helpful. turn=3 step=2');
    expect(systemOf(model.calls[0])).toBe(content.get(h1.system!));
    expect(systemOf(model.calls[1])).toBe(content.get(h2.system!));
    // Tool schemas are JSON schema derived from zod, and are what the provider got.
    const schemas = content.get(h1.tools!) as Array<{ name: string; description: string; inputSchema: unknown }>;
    expect(h2.tools).toBe(h1.tools);
    expect(attached.filter((b) => b.hash === h1.tools)).toHaveLength(1);
    expect(schemas).toEqual([
      {
        name: 'weather',
        description: 'Weather forecast for a city',
        inputSchema: expect.objectContaining({
          type: 'object',
          properties: {
            city: { type: 'string', description: 'City name' },
            days: expect.objectContaining({ type: 'integer', minimum: 1, maximum: 7 }),
          },
          required: ['city'],
        }),
      },
    ]);
    expect(JSON.stringify(schemas[0]!.inputSchema)).not.toContain('$schema');
    expect(model.calls[0]!.tools).toEqual([
      {
        type: 'function',
        name: 'weather',
        description: 'Weather forecast for a city',
        inputSchema: schemas[0]!.inputSchema,
      },
    ]);
    // Context: by reference, constant in size: how many messages were sent, the first and the last.
    const userId = sink.ofType('user/message')[0]!.data.message.id;
    const toolMessageId = sink.ofType('tool/result')[0]!.data.toolMessageId;
    expect(h1.context).toEqual({ messages: 3, first: 'h1', last: userId });
    expect(h2.context).toEqual({ messages: 5, first: 'h1', last: toolMessageId });
    expect(model.calls[0]!.prompt.filter((m) => m.role !== 'system')).toHaveLength(h1.context.messages);
    // The message ids named in the header are the ids of what the model produced.
    expect(sink.ofType('assistant/message').map((e) => e.data.message.id)).toEqual(headers.map((h) => h.messageId));
    expect(model.calls[0]!.temperature).toBe(0.3);
    expect(model.calls[0]!.maxOutputTokens).toBe(256);
    expect(model.calls[0]!.stopSequences).toEqual(['END']);
  });

  it('writes a header per attempt when a call is retried', async () => {
    const model = new ScriptedModel([{ error: { kind: 'server' } }, { text: 'ok' }]);
    const callsAtHeader: number[] = [];
    const sink = new ProbeSink({
      onEvent: (e) => e.type === 'request/header' && void callsAtHeader.push(model.calls.length),
    });
    await runTurn(defineAgent({ name: 't', model, system: 'S', retry: { initialDelayMs: 1, maxDelayMs: 5 } }), {
      sink,
      input: 'hi',
    });
    const headers = sink.ofType('request/header');
    expect(headers.map((h) => h.data.attempt)).toEqual([1, 2]);
    expect(callsAtHeader).toEqual([0, 1]);
    expect(headers[1]!.data.context).toEqual(headers[0]!.data.context);
    expect(contentOf(sink, headers[1]!.data.system)).toBe('S');
    expect(headers[1]!.data.messageId).not.toBe(headers[0]!.data.messageId);
  });

  it('asks for durability only at its durable points: before a tool that is not idempotent runs, at the end of a step that ran tools, at the turn end', async () => {
    const ran: string[] = [];
    const make = (name: string, idempotent: boolean) =>
      tool({ name, description: name, input: z.object({}), idempotent, execute: () => void ran.push(name) });
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'p1', name: 'pure', input: {} }] },
      {
        toolCalls: [
          { id: 'c1', name: 'charge', input: {} },
          { id: 'p2', name: 'pure', input: {} },
        ],
      },
      { text: 'done' },
    ]);
    const durableAtRun: number[] = [];
    const sink = new ProbeSink();
    const pure = make('pure', true);
    const charge = tool({
      name: 'charge',
      description: 'not safe to repeat',
      input: z.object({}),
      execute: () => {
        // Its call, and everything of its step before it, was durable before it ran.
        durableAtRun.push(sink.durableAt.at(-1)!);
        ran.push('charge');
      },
    });
    const result = await runTurn(defineAgent({ name: 't', model, tools: [pure, charge] }), { sink, input: 'go' });
    expect(result.reason).toBe('completed');
    const types = sink.events.map((e) => e.type);
    const at = (n: number) => types.slice(0, n).at(-1);
    // Step 1 (idempotent only): one durable point, its end. Step 2: its calls before the charge, then its end. Step 3 (final): the turn's end.
    expect(sink.durableAt.map(at)).toEqual(['step/end', 'tool/call', 'step/end', 'turn/end']);
    expect(types.slice(sink.durableAt[0]!, sink.durableAt[1]!)).toEqual([
      'step/start',
      'request/header',
      'assistant/message',
      'tool/call',
      'tool/call',
    ]);
    expect(durableAtRun).toEqual([sink.durableAt[1]]);
    expect(ran).toEqual(['pure', 'charge', 'pure']);
  });

  it('goes on when its sink answers that input is waiting (TurnNotOverError) to the end of a completed turn, and ends once', async () => {
    const model = new ScriptedModel([{ text: 'first answer' }, { text: 'answer to the late one' }]);
    let refused = 0;
    let late = false;
    class RefusingSink extends ProbeSink {
      override async append(events: readonly TurnEvent[], options?: SinkAppendOptions): Promise<void> {
        if (refused === 0 && events.some((e) => e.type === 'turn/end')) {
          refused++;
          late = true;
          throw new TurnNotOverError();
        }
        return super.append(events, options);
      }
    }
    const sink = new RefusingSink();
    const result = await runTurn(defineAgent({ name: 't', model }), {
      sink,
      input: 'hi',
      hooks: {
        beforeStep: (ctx) => {
          if (late) {
            late = false;
            ctx.steer('a late one');
          }
        },
      },
    });
    expect(result).toMatchObject({ reason: 'completed', steps: 2 });
    expect(model.calls).toHaveLength(2);
    expect(userTexts(model.calls[1])).toEqual(['hi', 'a late one']);
    expect(sink.ofType('turn/end')).toHaveLength(1);
    expect(sink.ofType('user/message').map((e) => e.data.via)).toEqual(['input', 'steer']);
  });

  it('fails the turn, as a rejection does, when its sink throws instead of rejecting: the provider is never called', async () => {
    const model = new ScriptedModel([{ text: 'never' }]);
    const seen: string[] = [];
    const sink: EventSink = {
      append(events) {
        for (const e of events) {
          if (e.type === 'request/header') throw new Error('disk full at request/header');
          seen.push(e.type);
        }
        return HELD;
      },
    };
    const result = await runTurn(defineAgent({ name: 't', model }), { sink, input: 'hi' });

    expect(model.calls).toHaveLength(0);
    expect(result.reason).toBe('failed');
    expect(result.error).toMatchObject({
      kind: 'sink',
      message: expect.stringContaining('disk full at request/header'),
    });
    expect(seen).toEqual(['turn/start', 'user/message', 'step/start', 'turn/end']);
  });

  it('waits for a durable append of a sink that answers HELD to the others: a tool that is not idempotent starts only once its call is durable', async () => {
    const order: string[] = [];
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'p1', name: 'pay', input: { cents: 5 } }] },
      { text: 'paid' },
    ]);
    const pay = tool({
      name: 'pay',
      description: 'pays',
      input: z.object({ cents: z.number() }),
      idempotent: false,
      execute: ({ cents }) => (order.push(`paid ${cents}`), 'ok'),
    });
    const sink: EventSink = {
      append(events, options) {
        for (const e of events) order.push(e.type);
        if (!options?.durable) return HELD;
        order.push('durable: asked');
        return new Promise<void>((resolve) =>
          setTimeout(() => {
            order.push('durable: done');
            resolve();
          }, 5),
        );
      },
    };
    const result = await runTurn(defineAgent({ name: 't', model, tools: [pay] }), { sink, input: 'pay 5' });

    expect(result.reason).toBe('completed');
    const call = order.indexOf('tool/call');
    expect(order.slice(call, call + 4)).toEqual(['tool/call', 'durable: asked', 'durable: done', 'paid 5']);
  });

  it('takes a sink written in plain JavaScript whose append returns nothing, or a foreign thenable, as one that answered at once', async () => {
    const kept: string[] = [];
    const answers = [undefined, { then: (resolve: () => void) => resolve() }];
    let n = 0;
    const sink = {
      append(events: readonly TurnEvent[]) {
        for (const e of events) kept.push(e.type);
        return answers[n++ % 2];
      },
    } as unknown as EventSink;
    const model = new ScriptedModel([
      { toolCalls: [{ id: 'w1', name: 'weather', input: { city: 'Oslo' } }] },
      { text: 'sunny' },
    ]);
    const result = await runTurn(defineAgent({ name: 't', model, tools: [weatherTool([])] }), {
      sink,
      input: 'weather?',
    });

    expect(result.reason).toBe('completed');
    expect(kept.at(-1)).toBe('turn/end');
    expect(kept.filter((t) => t === 'tool/result')).toHaveLength(1);
  });
});
