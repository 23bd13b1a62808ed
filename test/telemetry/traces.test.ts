/**
 * OpenTelemetry traces (docs/observability.md, ADR-0013): with an in-memory span exporter
 * registered as the global tracer provider, the span tree of a run with tools, of a run that
 * waits for an approval, of a run recovered by another worker after a lost lease, and of a run
 * created over HTTP with a `traceparent` header. Spans are derived from the events each execution
 * commits; the run stores the trace context it was created in, and every execution continues it.
 */
import { trace, type Attributes } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { rmSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  SqliteStore,
  subagent,
  tool,
  type AgentDefinition,
  type Runtime,
  type ScriptEntry,
} from '../../src/index.ts';
import { RunSpans } from '../../src/telemetry/run-spans.ts';
import { formatTraceparent, parseTraceparent, traceOfRequest } from '../../src/telemetry/trace-context.ts';
import { recordsContent } from '../../src/telemetry/tracer.ts';
import { deferred } from '../support/deferred.ts';
import { crashMidCall, effectsAgent, runtimeFor } from '../support/effects.ts';
import { startTestServer, type TestServer } from '../support/server-helpers.ts';
import { allEvents, tempDbPath } from '../support/session-helpers.ts';

let exporter: InMemorySpanExporter;
const cleanups: Array<() => Promise<void> | void> = [];

beforeEach(() => {
  exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  trace.disable();
});

const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
const named = (prefix: string): ReadableSpan[] => spans().filter((s) => s.name.startsWith(prefix));
const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;
const ms = (t: [number, number]): number => t[0] * 1000 + t[1] / 1e6;
const attr = (s: ReadableSpan, key: string): Attributes[string] => s.attributes[key];

function start(agents: AgentDefinition[], o: { recordContent?: boolean; store?: SqliteStore } = {}): Runtime {
  const store = o.store ?? openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({
    store,
    agents,
    ...(o.recordContent !== undefined ? { telemetry: { recordContent: o.recordContent } } : {}),
  });
  rt.startWorker({ pollMs: 20 });
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return rt;
}

const lookup = tool({
  name: 'lookup',
  description: 'Looks something up',
  input: z.object({ q: z.string() }),
  idempotent: true,
  execute: ({ q }) => `found ${q}`,
});
const write = tool({
  name: 'write',
  description: 'Writes a note (not safe to repeat)',
  input: z.object({ note: z.string() }),
  execute: ({ note }) => ({ saved: note }),
});
const danger = tool({
  name: 'danger',
  description: 'Needs approval',
  input: z.object({ target: z.string() }),
  approval: 'always',
  execute: ({ target }) => `did ${target}`,
});

function toolAgent(script: ScriptEntry[]): AgentDefinition {
  return defineAgent({
    name: 'planner',
    version: '3',
    model: new ScriptedModel(script, { provider: 'acme', modelId: 'acme-large' }),
    tools: [lookup, write, danger],
    settings: { temperature: 0.2, maxOutputTokens: 500 },
  });
}

const toolScript: ScriptEntry[] = [
  {
    toolCalls: [
      { id: 'call-a', name: 'lookup', input: { q: 'alpha' } },
      { id: 'call-b', name: 'write', input: { note: 'secret note' } },
    ],
    usage: { input: 120, output: 30, cached: 40 },
    responseId: 'resp-1',
    finishReason: 'tool-calls',
  },
  { text: 'all done', usage: { input: 200, output: 12, cached: 100 }, responseId: 'resp-2' },
];

describe('the span tree of a run', () => {
  it('a run with tools: keel.send → invoke_agent → chat ×2 and execute_tool ×2, with GenAI and Keel attributes; token counts match the run', async () => {
    const rt = start([toolAgent(toolScript)]);
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'look up alpha and write a note');
    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');

    const [send] = named('keel.send');
    const [invoke] = named('invoke_agent');
    expect(named('keel.send')).toHaveLength(1);
    expect(named('invoke_agent')).toHaveLength(1);
    expect(send!.name).toBe('keel.send planner');
    expect(parentOf(send!)).toBeUndefined(); // no caller context: the send is the trace's root
    expect(attr(send!, 'keel.run.id')).toBe(run.id);
    expect(attr(send!, 'keel.send.outcome')).toBe('created');
    // The run stored the send's context.
    expect((run.options as { trace?: { traceparent: string } }).trace?.traceparent).toBe(
      formatTraceparent(send!.spanContext()).traceparent,
    );

    const traceId = send!.spanContext().traceId;
    for (const s of spans()) expect(s.spanContext().traceId).toBe(traceId);
    expect(invoke!.name).toBe('invoke_agent planner');
    expect(parentOf(invoke!)).toBe(send!.spanContext().spanId);
    expect(invoke!.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'planner',
      'gen_ai.agent.version': '3',
      'gen_ai.provider.name': 'acme',
      'gen_ai.request.model': 'acme-large',
      'gen_ai.conversation.id': session.id,
      'keel.session.id': session.id,
      'keel.run.id': run.id,
      'keel.attempt': 1,
      'keel.resumed': false,
      'keel.run.status': 'completed',
      'keel.steps': 2,
      'gen_ai.usage.input_tokens': 320,
      'gen_ai.usage.output_tokens': 42,
      'gen_ai.usage.cache_read.input_tokens': 140,
    });
    expect(invoke!.status.code).toBe(0); // unset: not an error

    const chats = named('chat');
    expect(chats.map((s) => s.name)).toEqual(['chat acme-large', 'chat acme-large']);
    for (const c of chats) expect(parentOf(c)).toBe(invoke!.spanContext().spanId);
    expect(chats[0]!.kind).toBe(2); // CLIENT
    expect(chats[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'acme',
      'gen_ai.request.model': 'acme-large',
      'gen_ai.request.temperature': 0.2,
      'gen_ai.request.max_tokens': 500,
      'gen_ai.response.id': 'resp-1',
      'gen_ai.response.finish_reasons': ['tool-calls'],
      'gen_ai.usage.input_tokens': 120,
      'gen_ai.usage.output_tokens': 30,
      'gen_ai.usage.cache_read.input_tokens': 40,
      'keel.step': 1,
      'keel.model.attempt': 1,
      'keel.run.id': run.id,
    });
    expect(chats[1]!.attributes).toMatchObject({
      'gen_ai.response.id': 'resp-2',
      'gen_ai.response.finish_reasons': ['stop'],
      'keel.step': 2,
    });
    // The tokens of the model calls are the run's usage.
    const usage = done.usage as { inputTokens: number; outputTokens: number; cachedInputTokens: number };
    expect(chats.reduce((n, c) => n + (attr(c, 'gen_ai.usage.input_tokens') as number), 0)).toBe(usage.inputTokens);
    expect(chats.reduce((n, c) => n + (attr(c, 'gen_ai.usage.output_tokens') as number), 0)).toBe(usage.outputTokens);
    expect(chats.reduce((n, c) => n + (attr(c, 'gen_ai.usage.cache_read.input_tokens') as number), 0)).toBe(
      usage.cachedInputTokens,
    );

    const tools = named('execute_tool').sort((a, b) =>
      String(attr(a, 'gen_ai.tool.call.id')).localeCompare(String(attr(b, 'gen_ai.tool.call.id'))),
    );
    expect(tools.map((s) => s.name)).toEqual(['execute_tool lookup', 'execute_tool write']);
    for (const t of tools) {
      expect(parentOf(t)).toBe(invoke!.spanContext().spanId);
      expect(t.attributes).toMatchObject({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.type': 'function',
        'keel.step': 1,
        'keel.run.id': run.id,
      });
    }
    expect(tools[0]!.attributes).toMatchObject({
      'gen_ai.tool.name': 'lookup',
      'gen_ai.tool.call.id': 'call-a',
      'gen_ai.tool.description': 'Looks something up',
    });
    expect(tools[1]!.attributes).toMatchObject({ 'gen_ai.tool.name': 'write', 'gen_ai.tool.call.id': 'call-b' });

    // Seq ranges are the log's: each span's first and last event, in the run's events.
    const events = await rt.sessions.log.read(session.id, { runId: run.id });
    const seqOf = (type: string, pick: (e: (typeof events)[number]) => boolean = () => true) =>
      events.find((e) => e.type === type && pick(e))!.seq;
    expect(attr(chats[0]!, 'keel.seq.first')).toBe(seqOf('request/header'));
    expect(attr(chats[0]!, 'keel.seq.last')).toBe(seqOf('assistant/message'));
    const callOf = (id: string) => (e: (typeof events)[number]) =>
      (e.data as { toolCallId?: string }).toolCallId === id;
    expect(attr(tools[1]!, 'keel.seq.first')).toBe(seqOf('tool/call', callOf('call-b')));
    expect(attr(tools[1]!, 'keel.seq.last')).toBe(seqOf('tool/result', callOf('call-b')));
    expect(attr(invoke!, 'keel.seq.first')).toBe(seqOf('turn/start'));
    expect(attr(invoke!, 'keel.seq.last')).toBe(seqOf('turn/end'));

    // Times: each child lies within the run's span, and ends after it starts.
    for (const s of [...chats, ...tools]) {
      expect(ms(s.startTime)).toBeGreaterThanOrEqual(ms(invoke!.startTime) - 1);
      expect(ms(s.endTime)).toBeLessThanOrEqual(ms(invoke!.endTime) + 1);
      expect(ms(s.endTime)).toBeGreaterThanOrEqual(ms(s.startTime));
    }

    // Contents are not recorded by default.
    const content = [
      'gen_ai.input.messages',
      'gen_ai.output.messages',
      'gen_ai.tool.call.arguments',
      'gen_ai.tool.call.result',
    ];
    for (const s of spans()) for (const k of content) expect(s.attributes[k], `${s.name} ${k}`).toBeUndefined();
    expect(JSON.stringify(spans().map((s) => s.attributes))).not.toContain('secret note');
  });

  it('contents are recorded when switched on: input and output messages, tool arguments and results', async () => {
    const rt = start([toolAgent(toolScript)], { recordContent: true });
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'look up alpha and write a note');
    await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    const [invoke] = named('invoke_agent');
    expect(JSON.parse(attr(invoke!, 'gen_ai.input.messages') as string)).toEqual([
      { role: 'user', parts: [{ type: 'text', content: 'look up alpha and write a note' }] },
    ]);
    const chats = named('chat');
    expect(JSON.parse(attr(chats[0]!, 'gen_ai.output.messages') as string)).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'tool_call', id: 'call-a', name: 'lookup', arguments: { q: 'alpha' } },
          { type: 'tool_call', id: 'call-b', name: 'write', arguments: { note: 'secret note' } },
        ],
        finish_reason: 'tool-calls',
      },
    ]);
    expect(JSON.parse(attr(chats[1]!, 'gen_ai.output.messages') as string)).toEqual([
      { role: 'assistant', parts: [{ type: 'text', content: 'all done' }], finish_reason: 'stop' },
    ]);
    const write = named('execute_tool write')[0]!;
    expect(JSON.parse(attr(write, 'gen_ai.tool.call.arguments') as string)).toEqual({ note: 'secret note' });
    expect(JSON.parse(attr(write, 'gen_ai.tool.call.result') as string)).toEqual({ saved: 'secret note' });
    expect(attr(named('execute_tool lookup')[0]!, 'gen_ai.tool.call.result')).toBe('found alpha');
  });

  it('the content switch: the runtime option, else KEEL_OTEL_RECORD_CONTENT or OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', () => {
    expect(recordsContent(undefined, {})).toBe(false);
    expect(recordsContent(undefined, { KEEL_OTEL_RECORD_CONTENT: '1' })).toBe(true);
    expect(recordsContent(undefined, { KEEL_OTEL_RECORD_CONTENT: '0' })).toBe(false);
    expect(recordsContent(undefined, { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' })).toBe(true);
    expect(recordsContent({ recordContent: false }, { KEEL_OTEL_RECORD_CONTENT: '1' })).toBe(false);
    expect(recordsContent({ recordContent: true }, {})).toBe(true);
  });

  it('a failed model call attempt is a chat span with error.type; the retry is another chat span', async () => {
    const rt = start([
      toolAgent([{ error: { kind: 'overloaded' } }, { text: 'fine', usage: { input: 5, output: 1 } }]),
    ]);
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'hi');
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
    const chats = named('chat');
    expect(chats).toHaveLength(2);
    expect(chats[0]!.attributes).toMatchObject({ 'error.type': '529', 'keel.model.attempt': 1 }); // the provider's status
    expect(chats[0]!.status.code).toBe(2); // ERROR
    expect(chats[1]!.attributes).toMatchObject({ 'keel.model.attempt': 2, 'gen_ai.usage.input_tokens': 5 });
    expect(chats[1]!.attributes['error.type']).toBeUndefined();
  });

  it('a run that waits for an approval: the execution after the decision continues the same trace, under the same parent', async () => {
    const rt = start([
      toolAgent([
        { toolCalls: [{ id: 'call-d', name: 'danger', input: { target: 'prod' } }], usage: { input: 10, output: 5 } },
        { text: 'did it', usage: { input: 20, output: 3 } },
      ]),
    ]);
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'do the dangerous thing');
    expect((await rt.runs.wait(run.id, { timeoutMs: 10_000 })).status).toBe('waiting_approval');
    const [first] = named('invoke_agent');
    expect(first!.attributes).toMatchObject({
      'keel.run.status': 'waiting_approval',
      'keel.resumed': false,
      'keel.attempt': 1,
    });
    expect(named('execute_tool')).toHaveLength(0); // nothing ran yet
    expect(named('chat')).toHaveLength(1);

    await rt.runs.approve(run.id, 'call-d');
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    const invokes = named('invoke_agent');
    expect(invokes).toHaveLength(2);
    const second = invokes[1]!;
    expect(second.spanContext().traceId).toBe(first!.spanContext().traceId);
    expect(parentOf(second)).toBe(parentOf(first!)); // both under the run's stored context (the send)
    expect(parentOf(second)).toBe(named('keel.send')[0]!.spanContext().spanId);
    expect(second.attributes).toMatchObject({
      'keel.run.status': 'completed',
      'keel.resumed': true,
      'keel.attempt': 1,
      'gen_ai.usage.input_tokens': 20,
    });
    const [exec] = named('execute_tool');
    expect(exec!.name).toBe('execute_tool danger');
    expect(parentOf(exec!)).toBe(second.spanContext().spanId);
    expect(exec!.attributes).toMatchObject({ 'gen_ai.tool.call.id': 'call-d', 'keel.step': 1 });
    expect(parentOf(named('chat')[1]!)).toBe(second.spanContext().spanId);
  });

  it('a run recovered by another worker after a lost lease continues the same trace, with keel.attempt 2', async () => {
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const entered = deferred();
    const gate = deferred();
    const slow = tool({
      name: 'charge',
      description: 'Charges a card (not safe to repeat)',
      input: z.object({}),
      execute: async () => {
        entered.resolve();
        await gate.promise;
        return 'charged';
      },
    });
    const agent = (script: ScriptEntry[]) =>
      defineAgent({
        name: 'payer',
        version: '1',
        model: new ScriptedModel(script, { modelId: 'pay-1' }),
        tools: [slow],
      });
    const storeA = new SqliteStore({ path: db.path });
    const storeB = new SqliteStore({ path: db.path });
    const a = createRuntime({
      store: storeA,
      agents: [agent([{ toolCalls: [{ id: 'call-c', name: 'charge', input: {} }], usage: { input: 7, output: 2 } }])],
      leaseMs: 300,
      renewEveryMs: 50,
      maxAttempts: 5,
    });
    const b = createRuntime({
      store: storeB,
      agents: [agent([{ text: 'checked, done', usage: { input: 9, output: 4 } }])],
      leaseMs: 60_000,
      maxAttempts: 5,
    });
    cleanups.push(async () => {
      gate.resolve();
      await a.close({ graceMs: 100 });
      await b.close({ graceMs: 100 });
      await storeA.close();
      await storeB.close();
    });

    const session = await a.sessions.create();
    const { run } = await a.sessions.send(session.id, 'charge the card');
    a.startWorker({ id: 'A', concurrency: 1, pollMs: 20 });
    await entered.promise; // A executes the call (made durable before it started)
    const executionA = a.executions.get(run.id)!;
    // A freezes: its lease renewals no longer reach the store; B takes the run over once it expires.
    storeA.claims.renewLease = () => Promise.resolve(true);
    b.startWorker({ id: 'B', pollMs: 20 });
    const done = await b.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 });
    expect(done).toMatchObject({ status: 'completed', attempt: 2 });
    gate.resolve();
    await executionA.done.catch(() => {});

    const send = named('keel.send')[0]!;
    // B cannot tell a frozen worker from a dead one: it makes the spans A had open (as for a killed
    // process, below) beside A's own, which A ends when it finds it lost the run.
    const rebuilt = named('invoke_agent').filter((s) => attr(s, 'keel.recovered_by') !== undefined);
    expect(rebuilt.map((s) => [attr(s, 'keel.attempt'), attr(s, 'keel.recovered_by'), attr(s, 'error.type')])).toEqual([
      [1, 'B', 'interrupted'],
    ]);
    expect(parentOf(rebuilt[0]!)).toBe(send.spanContext().spanId);
    const invokes = named('invoke_agent')
      .filter((s) => !rebuilt.includes(s))
      .sort((x, y) => (attr(x, 'keel.attempt') as number) - (attr(y, 'keel.attempt') as number));
    expect(invokes.map((s) => attr(s, 'keel.attempt'))).toEqual([1, 2]);
    const [byA, byB] = invokes as [ReadableSpan, ReadableSpan];
    for (const s of spans()) expect(s.spanContext().traceId).toBe(send.spanContext().traceId);
    expect(parentOf(byA)).toBe(send.spanContext().spanId);
    expect(parentOf(byB)).toBe(send.spanContext().spanId);
    expect(byA.attributes).toMatchObject({ 'keel.worker.id': 'A', 'keel.run.id': run.id });
    expect(byA.status.code).toBe(2); // A's execution could not record the run's end (fenced out)
    expect(byA.attributes['error.type']).toBe('end_not_recorded');
    expect(byB.attributes).toMatchObject({
      'keel.worker.id': 'B',
      'keel.run.status': 'completed',
      'keel.resumed': true,
    });
    // A's model call committed (with the call, before it ran): its span is A's. The call's result
    // was never A's to write: B records it (outcome unknown, not run again), under B's span.
    const chats = named('chat');
    expect(chats.map((c) => [parentOf(c), attr(c, 'keel.attempt')])).toEqual([
      [byA.spanContext().spanId, 1],
      [byB.spanContext().spanId, 2],
    ]);
    const tools = named('execute_tool charge');
    const ofB = tools.filter((t) => parentOf(t) === byB.spanContext().spanId);
    expect(ofB).toHaveLength(1);
    expect(ofB[0]!.attributes).toMatchObject({
      'error.type': 'outcome_unknown',
      'gen_ai.tool.call.id': 'call-c',
      'keel.attempt': 2,
    });
    // A's own view of the call: started, no result recorded by A; and B's view of what A had open.
    const ofA = tools.filter((t) => parentOf(t) === byA.spanContext().spanId);
    expect(ofA.map((t) => attr(t, 'error.type'))).toEqual(['interrupted']);
    const ofRebuilt = tools.filter((t) => parentOf(t) === rebuilt[0]!.spanContext().spanId);
    expect(
      ofRebuilt.map((t) => [attr(t, 'error.type'), attr(t, 'gen_ai.tool.call.id'), attr(t, 'keel.attempt')]),
    ).toEqual([['interrupted', 'call-c', 1]]);
  });

  it('a worker process killed mid-run: the recovering worker ends the spans it had open (error.type interrupted), and the next attempt continues the same trace', async () => {
    // The run is created here (its keel.send span recorded, its context stored with it); a worker
    // process with no SDK starts its tool step and is killed (SIGKILL) while both calls run.
    const crash = await crashMidCall();
    cleanups.push(() => rmSync(crash.dir, { recursive: true, force: true }));
    const { rt, store } = runtimeFor(crash.db, effectsAgent({ ledger: crash.ledger }));
    cleanups.push(async () => {
      await rt.close({ graceMs: 100 });
      await store.close();
    });
    rt.startWorker({ id: 'recoverer', concurrency: 1, pollMs: 20 });
    expect(await rt.runs.wait(crash.runId, { until: 'terminal', timeoutMs: 20_000 })).toMatchObject({
      status: 'completed',
      attempt: 2,
    });
    // The execution's span ends just after the run's end is committed.
    await expect
      .poll(() => named('invoke_agent').filter((s) => attr(s, 'keel.attempt') === 2).length, { timeout: 10_000 })
      .toBe(1);

    const send = named('keel.send')[0]!;
    for (const s of spans()) expect(s.spanContext().traceId).toBe(send.spanContext().traceId);
    const invokes = named('invoke_agent');
    expect(invokes.map((s) => attr(s, 'keel.attempt')).sort()).toEqual([1, 2]);
    const dead = invokes.find((s) => attr(s, 'keel.attempt') === 1)!;
    const next = invokes.find((s) => attr(s, 'keel.attempt') === 2)!;
    // Both attempts are siblings under the run's stored context.
    expect(parentOf(dead)).toBe(send.spanContext().spanId);
    expect(parentOf(next)).toBe(send.spanContext().spanId);

    // The interrupted attempt: from its claim to the recovery's run/interrupted, as the log has them.
    const events = (await allEvents(rt.sessions, crash.sessionId)).filter((e) => e.runId === crash.runId);
    const claim = events.find((e) => e.type === 'run/status' && e.data.to === 'running' && e.data.attempt === 1)!;
    const interrupted = events.find((e) => e.type === 'run/interrupted')!;
    expect(interrupted.data).toMatchObject({ attempt: 2, reason: 'lease_expired' });
    const lastOfDead = events.filter((e) => e.seq < interrupted.seq).at(-1)!;
    expect(dead.name).toBe('invoke_agent payments');
    expect(dead.status).toMatchObject({
      code: 2,
      message: expect.stringMatching(/^attempt 1 of the run was interrupted \(lease_expired\)/),
    });
    expect(dead.attributes).toMatchObject({
      'error.type': 'interrupted',
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'payments',
      'keel.run.id': crash.runId,
      'keel.session.id': crash.sessionId,
      'keel.attempt': 1,
      'keel.run.status': 'running',
      'keel.interruption': 'lease_expired',
      'keel.recovered_by': 'recoverer',
      'keel.seq.first': claim.seq,
      'keel.seq.last': lastOfDead.seq,
    });
    expect(ms(dead.startTime)).toBe(claim.time);
    expect(ms(dead.endTime)).toBe(interrupted.time);

    // Under it, the two calls it started and never saw end, ended at the interruption.
    const underDead = spans().filter((s) => parentOf(s) === dead.spanContext().spanId);
    expect(underDead.map((s) => s.name).sort()).toEqual(['execute_tool charge', 'execute_tool reserve']);
    for (const s of underDead) {
      const call = events.find((e) => e.type === 'tool/call' && e.data.toolCallId === attr(s, 'gen_ai.tool.call.id'))!;
      expect(s.attributes).toMatchObject({
        'error.type': 'interrupted',
        'keel.attempt': 1,
        'keel.step': 1,
        'keel.seq.first': call.seq,
        'gen_ai.tool.description': expect.any(String),
      });
      expect(s.status.code).toBe(2);
      expect(ms(s.startTime)).toBe(call.time);
      expect(ms(s.endTime)).toBe(interrupted.time);
    }
    // Its model call had ended (committed with the calls): that span was the dead process's to export, and is not made again.
    expect(named('chat').map((s) => attr(s, 'keel.attempt'))).toEqual([2]);

    // The next attempt: the calls' results (the idempotent one ran again, the other's outcome is unknown) and the final answer.
    expect(next.attributes).toMatchObject({
      'keel.worker.id': 'recoverer',
      'keel.run.status': 'completed',
      'keel.resumed': true,
    });
    expect(next.attributes['keel.recovered_by']).toBeUndefined();
    const underNext = spans().filter((s) => parentOf(s) === next.spanContext().spanId);
    expect(underNext.map((s) => [s.name, attr(s, 'error.type')]).sort()).toEqual([
      ['chat scripted-1', undefined],
      ['execute_tool charge', 'outcome_unknown'],
      ['execute_tool reserve', undefined],
    ]);
  });

  it('a killed worker whose run then fails at once (attempts exhausted): the trace still ends the spans it had open', async () => {
    const crash = await crashMidCall();
    cleanups.push(() => rmSync(crash.dir, { recursive: true, force: true }));
    const store = new SqliteStore({ path: crash.db, busyTimeoutMs: 30_000 });
    const rt = createRuntime({ store, agents: [effectsAgent({ ledger: crash.ledger })], leaseMs: 300, maxAttempts: 1 });
    cleanups.push(async () => {
      await rt.close({ graceMs: 100 });
      await store.close();
    });
    rt.startWorker({ id: 'recoverer', concurrency: 1, pollMs: 20 });
    expect(await rt.runs.wait(crash.runId, { until: 'terminal', timeoutMs: 20_000 })).toMatchObject({
      status: 'failed',
      error: { kind: 'attempts_exhausted' },
    });
    await expect.poll(() => named('invoke_agent').length, { timeout: 10_000 }).toBe(2);

    const send = named('keel.send')[0]!;
    const [dead, last] = named('invoke_agent').sort(
      (x, y) => (attr(x, 'keel.attempt') as number) - (attr(y, 'keel.attempt') as number),
    ) as [ReadableSpan, ReadableSpan];
    expect(dead.attributes).toMatchObject({
      'keel.attempt': 1,
      'error.type': 'interrupted',
      'keel.recovered_by': 'recoverer',
    });
    expect(last.attributes).toMatchObject({
      'keel.attempt': 2,
      'error.type': 'attempts_exhausted',
      'keel.run.status': 'failed',
    });
    for (const s of [dead, last]) expect(parentOf(s)).toBe(send.spanContext().spanId);
    const underDead = spans().filter((s) => parentOf(s) === dead.spanContext().spanId);
    expect(underDead.map((s) => [s.name, attr(s, 'error.type')]).sort()).toEqual([
      ['execute_tool charge', 'interrupted'],
      ['execute_tool reserve', 'interrupted'],
    ]);
  });

  it("a subagent's run traces under its parent's execution (its invoke_agent span), in the same trace", async () => {
    const delegate = subagent({ name: 'delegate', description: 'Hands a task to the child agent', agent: 'child' });
    const parent = defineAgent({
      name: 'boss',
      version: '1',
      model: new ScriptedModel([
        { toolCalls: [{ id: 'call-sub', name: 'delegate', input: { task: 'count to 3' } }] },
        { text: 'the child said 1 2 3' },
      ]),
      tools: [delegate],
    });
    const child = defineAgent({
      name: 'child',
      version: '1',
      model: new ScriptedModel([{ text: '1 2 3', usage: { input: 3, output: 3 } }]),
      tools: [],
    });
    const rt = start([parent, child]);
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'delegate counting');
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    const boss = named('invoke_agent boss')[0]!;
    const kid = named('invoke_agent child')[0]!;
    expect(kid.spanContext().traceId).toBe(boss.spanContext().traceId);
    expect(parentOf(kid)).toBe(boss.spanContext().spanId);
    expect(kid.attributes).toMatchObject({ 'keel.parent_run.id': run.id, 'keel.run.status': 'completed' });
    const call = named('execute_tool delegate')[0]!;
    expect(parentOf(call)).toBe(boss.spanContext().spanId);
    // The child's run lies within the call that waited for it.
    expect(ms(kid.startTime)).toBeGreaterThanOrEqual(ms(call.startTime) - 1);
    expect(ms(kid.endTime)).toBeLessThanOrEqual(ms(call.endTime) + 1);
  });
});

describe('trace context from HTTP', () => {
  let srv: TestServer;
  afterEach(async () => {
    await srv?.close();
  });

  const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
  const PARENT = 'b7ad6b7169203331';

  it("a request's traceparent: the run's spans are in that trace, under the request's span", async () => {
    srv = await startTestServer();
    const api = srv.api();
    const s = await api.session();
    const r = await api.post(
      `/v1/sessions/${s.id}/messages`,
      { content: 'hello' },
      { traceparent: `00-${TRACE_ID}-${PARENT}-01`, tracestate: 'vendor=abc' },
    );
    expect(r.status).toBe(202);
    expect(r.body.run).not.toHaveProperty('options'); // nothing of it leaks into the API
    await api.waitForRun(r.body.run.id, 'completed');
    const send = named('keel.send')[0]!;
    expect(send.spanContext().traceId).toBe(TRACE_ID);
    expect(parentOf(send)).toBe(PARENT);
    expect(send.spanContext().traceState?.get('vendor')).toBe('abc');
    const invoke = named('invoke_agent')[0]!;
    expect(invoke.name).toBe('invoke_agent helper');
    expect(invoke.spanContext().traceId).toBe(TRACE_ID);
    expect(parentOf(invoke)).toBe(send.spanContext().spanId);
    expect(named('chat')[0]!.spanContext().traceId).toBe(TRACE_ID);
    // Stored with the run (for the worker that recovers it).
    const stored = await srv.runtime.runs.get(r.body.run.id);
    expect((stored.options as { trace?: { traceparent: string; tracestate?: string } }).trace).toEqual({
      traceparent: `00-${TRACE_ID}-${send.spanContext().spanId}-01`,
      tracestate: 'vendor=abc',
    });
  });

  it('a bad traceparent is ignored: the run gets a trace of its own, and the request succeeds', async () => {
    srv = await startTestServer();
    const api = srv.api();
    const s = await api.session();
    for (const bad of ['garbage', `00-${'0'.repeat(32)}-${PARENT}-01`, `00-${TRACE_ID.toUpperCase()}-${PARENT}-01`]) {
      exporter.reset();
      const r = await api.post(`/v1/sessions/${s.id}/messages`, { content: 'hello' }, { traceparent: bad });
      expect(r.status).toBe(202);
      await api.waitForRun(r.body.run.id, 'completed');
      const send = named('keel.send')[0]!;
      expect(parentOf(send)).toBeUndefined();
      expect(send.spanContext().traceId).not.toBe(TRACE_ID);
      expect(named('invoke_agent')[0]!.spanContext().traceId).toBe(send.spanContext().traceId);
    }
  });

  it('the AI SDK chat endpoint takes the traceparent too', async () => {
    srv = await startTestServer();
    const api = srv.api();
    const s = await api.session();
    const r = await api.post(
      `/v1/sessions/${s.id}/chat`,
      { messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] },
      { traceparent: `00-${TRACE_ID}-${PARENT}-01` },
    );
    expect(r.status).toBe(200);
    const [run] = await srv.runtime.runs.list({ sessionId: s.id });
    await srv.runtime.runs.wait(run!.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(named('invoke_agent')[0]!.spanContext().traceId).toBe(TRACE_ID);
  });
});

describe('without an SDK', () => {
  it('nothing records, nothing is made per event, and a caller-given traceparent is still stored with the run', async () => {
    trace.disable();
    const rt = start([toolAgent(toolScript)]);
    const session = await rt.sessions.create();
    const carrier = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
    const { run } = await rt.sessions.send(session.id, 'go', { trace: carrier });
    expect((run.options as { trace?: unknown }).trace).toEqual(carrier);
    const { run: plain } = await rt.sessions.send(session.id, 'again', { ifBusy: 'enqueue' });
    expect((plain.options as { trace?: unknown }).trace).toBeUndefined();
    await rt.runs.wait(plain.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(RunSpans.start(run, { recordContent: false })).toBeUndefined();
    expect(spans()).toHaveLength(0);
  });
});

describe('traceparent parsing', () => {
  const id = '4bf92f3577b34da6a3ce929d0e0e4736';
  const span = '00f067aa0ba902b7';
  it('reads valid headers strictly and ignores bad ones', () => {
    expect(parseTraceparent(`00-${id}-${span}-01`)).toMatchObject({
      traceId: id,
      spanId: span,
      traceFlags: 1,
      isRemote: true,
    });
    expect(parseTraceparent(`00-${id}-${span}-00`)).toMatchObject({ traceFlags: 0 });
    // A later version may carry more fields; version 00 may not.
    expect(parseTraceparent(`01-${id}-${span}-01-extra`)).toMatchObject({ traceId: id });
    for (const bad of [
      undefined,
      '',
      'garbage',
      `00-${id}-${span}-01-extra`,
      `ff-${id}-${span}-01`,
      `00-${'0'.repeat(32)}-${span}-01`,
      `00-${id}-${'0'.repeat(16)}-01`,
      `00-${id.toUpperCase()}-${span}-01`,
      `00-${id}-${span}-1`,
      `00-${id.slice(1)}-${span}-01`,
      `00_${id}_${span}_01`,
    ]) {
      expect(parseTraceparent(bad), String(bad)).toBeUndefined();
    }
  });

  it('keeps a valid tracestate and formats back', () => {
    const sc = parseTraceparent(`00-${id}-${span}-01`, 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE')!;
    expect(formatTraceparent(sc)).toEqual({
      traceparent: `00-${id}-${span}-01`,
      tracestate: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
    });
    expect(formatTraceparent(parseTraceparent(`00-${id}-${span}-01`, '')!)).toEqual({
      traceparent: `00-${id}-${span}-01`,
    });
  });

  it('a request without an active span takes its headers, when valid', () => {
    trace.disable();
    expect(traceOfRequest(`00-${id}-${span}-01`, undefined)).toEqual({ traceparent: `00-${id}-${span}-01` });
    expect(traceOfRequest('nope', 'a=b')).toBeUndefined();
    expect(traceOfRequest(undefined, undefined)).toBeUndefined();
  });
});
