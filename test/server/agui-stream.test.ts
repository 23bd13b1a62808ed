/**
 * The AG-UI stream encoder on its own: a live stream (text in several deltas) and one rebuilt from
 * the log (the durable messages, whole) give every event the same id; a client resuming after any
 * event it received gets exactly the rest, mid-message too, whether the rest comes as deltas or
 * from the log; what it gets is a valid AG-UI stream (every message, tool call, step and run
 * ended once, in order). Also a retried model call, a call lost with its worker, a run that
 * waits for an approval (two AG-UI runs) and for the client's tools.
 */
import { EventType, type Event } from '@ag-ui/core';
import { EventSchema } from '@ag-ui/core/schemas';
import { describe, expect, it } from 'vitest';
import type { FeedItem } from '../../src/session/index.ts';
import { AguiStreamEncoder, type AguiOut } from '../../src/server/protocols/agui/agui-stream.ts';
import { FEED_RUN, script } from '../support/feed-script.ts';

const RUN = FEED_RUN;

const rebuilt = (items: FeedItem[]) => items.filter((i) => i.kind === 'event');

function encode(items: FeedItem[], after = -1): AguiOut[] {
  const enc = new AguiStreamEncoder({ threadId: 's1', runId: 'agui-run', keelRunId: RUN, after });
  return [...enc.start(), ...items.flatMap((i) => enc.item(i))];
}

/** The events with consecutive text deltas of one message joined (live they come in pieces, rebuilt whole). */
function joined(events: AguiOut[]): AguiOut[] {
  return events.reduce<AguiOut[]>((out, e) => {
    const last = out.at(-1);
    if (
      e.event.type === EventType.TEXT_MESSAGE_CONTENT &&
      last?.event.type === EventType.TEXT_MESSAGE_CONTENT &&
      last.event.messageId === e.event.messageId
    )
      out[out.length - 1] = { id: e.id, event: { ...e.event, delta: last.event.delta + e.event.delta } };
    else out.push(e);
    return out;
  }, []);
}

/** Checks what an AG-UI client checks: everything opened is closed once, in order, before its run ends. */
function expectValid(events: AguiOut[]): void {
  const messages = new Set<string>();
  const calls = new Set<string>();
  const steps = new Set<string>();
  let running = false;
  events.forEach(({ event: e }, n) => {
    const at = `event ${n} ${e.type}`;
    expect(EventSchema.safeParse(e).success, at).toBe(true);
    if (e.type === EventType.RUN_STARTED) {
      expect(running, at).toBe(false);
      running = true;
      return;
    }
    expect(running, at).toBe(true);
    switch (e.type) {
      case EventType.TEXT_MESSAGE_START:
        expect(messages.has(e.messageId), at).toBe(false);
        messages.add(e.messageId);
        break;
      case EventType.TEXT_MESSAGE_CONTENT:
        expect(messages.has(e.messageId), at).toBe(true);
        break;
      case EventType.TEXT_MESSAGE_END:
        expect(messages.delete(e.messageId), at).toBe(true);
        break;
      case EventType.TOOL_CALL_START:
        calls.add(e.toolCallId);
        break;
      case EventType.TOOL_CALL_ARGS:
        expect(calls.has(e.toolCallId), at).toBe(true);
        break;
      case EventType.TOOL_CALL_END:
        expect(calls.delete(e.toolCallId), at).toBe(true);
        break;
      case EventType.STEP_STARTED:
        expect(steps.has(e.stepName), at).toBe(false);
        steps.add(e.stepName);
        break;
      case EventType.STEP_FINISHED:
        expect(steps.delete(e.stepName), at).toBe(true);
        break;
      case EventType.RUN_FINISHED:
      case EventType.RUN_ERROR:
        expect([...messages, ...calls, ...steps], at).toEqual([]);
        running = false;
        break;
    }
  });
  expect(running).toBe(false);
}

const increasing = (events: AguiOut[]) => events.every((e, i) => i === 0 || e.id > events[i - 1]!.id);
const text = (events: AguiOut[], messageId?: string) =>
  events
    .flatMap(({ event: e }) =>
      e.type === EventType.TEXT_MESSAGE_CONTENT && (messageId === undefined || e.messageId === messageId)
        ? [e.delta]
        : [],
    )
    .join('');
const shape = (events: AguiOut[]) => joined(events).map((e) => `${e.id} ${e.event.type}`);
const types = (events: AguiOut[]) => events.map((e) => e.event.type);

/**
 * Resuming after each event of `live` from each of `sources` gives exactly the rest: a valid
 * stream, the same events, the same text. From `lossy` sources (the log, without text that never
 * became durable): the source's own events after the client's position, with what closes what the
 * client had open that the source knows nothing of, and the whole text of every durable message.
 */
function expectResumable(live: AguiOut[], sources: FeedItem[][], lossy: FeedItem[][] = []): void {
  live.forEach((received, n) => {
    const had = live.slice(0, n + 1);
    for (const items of [...sources, ...lossy]) {
      const rest = encode(items, received.id);
      expect(rest.every((e) => e.id > received.id)).toBe(true);
      expectValid([...had, ...rest]);
      if (sources.includes(items)) {
        expect(shape([...had, ...rest])).toEqual(shape(live));
        expect(text([...had, ...rest])).toBe(text(live));
        continue;
      }
      const own = encode(items);
      const ids = new Set(own.map((e) => `${e.id} ${e.event.type}`));
      const closes = rest.filter((e) => !ids.has(`${e.id} ${e.event.type}`));
      expect(types(closes).every((t) => t === 'TEXT_MESSAGE_END' || t === 'STEP_FINISHED')).toBe(true);
      expect(shape(rest.filter((e) => !closes.includes(e)))).toEqual(shape(own.filter((e) => e.id > received.id)));
      for (const id of new Set(own.flatMap((e) => ('messageId' in e.event ? [e.event.messageId as string] : []))))
        if (text(own, id) !== '') expect(text([...had, ...rest], id)).toBe(text(own, id));
    }
  });
}

describe('AguiStreamEncoder', () => {
  const items = script((s) =>
    s
      .status(null, 'queued')
      .status('queued', 'running')
      .ev('turn/start', { model: { provider: 'scripted', modelId: 'm' }, resumed: false })
      .call('m1', 'Hello, world', { deltas: ['Hello', ', wor', 'ld'], tools: [{ id: 'c1', name: 'lookup' }] })
      .ev('tool/result', {
        toolCallId: 'c1',
        toolName: 'lookup',
        output: { type: 'text', value: 'found' },
        toolMessageId: 't1',
        durationMs: 1,
      })
      .ev('step/end', { reason: 'tool-calls' })
      .call('m2', 'done.', { deltas: ['do', 'ne.'] })
      .ev('step/end', { reason: 'final' })
      .ev('turn/end', { reason: 'completed', steps: 2 })
      .status('running', 'completed'),
  );

  it('a run: its steps, text, tool calls and results; live and rebuilt streams give each event the same id', () => {
    const live = encode(items);
    const fromLog = encode(rebuilt(items));
    expect(increasing(live)).toBe(true);
    expect(increasing(fromLog)).toBe(true);
    expect(shape(live)).toEqual(shape(fromLog));
    expect(text(live)).toBe('Hello, worlddone.');
    expect(text(fromLog)).toBe('Hello, worlddone.');
    expectValid(live);
    expect(types(joined(live))).toEqual([
      'RUN_STARTED',
      'CUSTOM',
      'CUSTOM',
      'CUSTOM',
      'STEP_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'TOOL_CALL_START',
      'TOOL_CALL_ARGS',
      'TOOL_CALL_END',
      'TOOL_CALL_RESULT',
      'STEP_FINISHED',
      'STEP_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'STEP_FINISHED',
      'CUSTOM',
      'RUN_FINISHED',
    ]);
    expect(live[0]!.id).toBe(0);
    const start = live.find((e) => e.event.type === EventType.TEXT_MESSAGE_START)!.event as Event & {
      messageId: string;
      metadata: unknown;
    };
    expect(start).toMatchObject({ messageId: 'run1.1', role: 'assistant', metadata: { keel: { messageId: 'm1' } } });
    expect(live.find((e) => e.event.type === EventType.TOOL_CALL_START)!.event).toMatchObject({
      toolCallId: 'c1',
      toolCallName: 'lookup',
      parentMessageId: 'run1.1',
    });
    expect(live.find((e) => e.event.type === EventType.TOOL_CALL_RESULT)!.event).toMatchObject({
      messageId: 't1',
      toolCallId: 'c1',
      content: 'found',
    });
    expect(live.at(-1)!.event).toMatchObject({
      type: 'RUN_FINISHED',
      threadId: 's1',
      runId: 'agui-run',
      usage: [{ provider: 'scripted', model: 'm', inputTokens: 20, outputTokens: 10, totalTokens: 30 }],
    });
  });

  it('resuming after any event gives exactly the rest, mid-message included, live or from the log', () => {
    const live = encode(items);
    // The rest may come live, from the log, or with the message in flight as one delta.
    const oneDelta = items.map((i) =>
      i.kind === 'delta' && i.delta.messageId === 'm1' && i.delta.delta !== 'Hello'
        ? ({ ...i, delta: { ...i.delta, delta: '' } } as FeedItem)
        : i.kind === 'delta' && i.delta.messageId === 'm1'
          ? ({ ...i, delta: { ...i.delta, delta: 'Hello, world' } } as FeedItem)
          : i,
    );
    expectResumable(live, [items, rebuilt(items), oneDelta]);
    expect(encode(items, live.at(-1)!.id)).toEqual([]);
    // Mid-message: only the characters the client lacks.
    const second = live.filter((e) => e.event.type === EventType.TEXT_MESSAGE_CONTENT)[1]!;
    expect(encode(rebuilt(items), second.id)[0]!.event).toMatchObject({ type: 'TEXT_MESSAGE_CONTENT', delta: 'ld' });
  });

  it('a retried model call ends the text it began; the retry is a message of its own', () => {
    const retried = script((s) =>
      s
        .status(null, 'queued')
        .status('queued', 'running')
        .delta('x', 'Hal')
        .delta('m1', 'Hello')
        .ev('step/start', {})
        .ev('request/header', { messageId: 'x', attempt: 1 })
        .ev('model/retry', { attempt: 1, delayMs: 1, abandonedMessageId: 'x' })
        .ev('request/header', { messageId: 'm1', attempt: 2 })
        .message('m1', 'Hello')
        .ev('step/end', { reason: 'final' })
        .status('running', 'completed'),
    );
    const live = encode(retried);
    expectValid(live);
    expect(text(live, 'run1.1')).toBe('Hal');
    expect(text(live, 'run1.2')).toBe('Hello');
    const fromLog = encode(rebuilt(retried));
    expectValid(fromLog);
    expect(text(fromLog)).toBe('Hello');
    expectResumable(live, [retried], [rebuilt(retried)]);
  });

  it('a model call lost with its worker: its text and step end, and the call made again is a new message', () => {
    const lost = script((s) =>
      s
        .status(null, 'queued')
        .status('queued', 'running')
        .delta('x', 'Hello, wo')
        .ev('run/interrupted', { attempt: 1, step: 0, reason: 'lease_expired' })
        .call('m1', 'Hello, world', { deltas: ['Hello, world'] })
        .ev('step/end', { reason: 'final' })
        .status('running', 'completed'),
    );
    const live = encode(lost);
    expectValid(live);
    expect(text(live)).toBe('Hello, woHello, world');
    const fromLog = encode(rebuilt(lost));
    expectValid(fromLog);
    expect(text(fromLog)).toBe('Hello, world');
    // The log has nothing of the lost call: a client resuming from it gets the ends of what it had open.
    expectResumable(live, [lost], [rebuilt(lost)]);
    // And a crash between steps reserves an ordinal the same way, live or not.
    const between = script((s) =>
      s
        .status(null, 'queued')
        .status('queued', 'running')
        .call('m1', 'a', { deltas: ['a'] })
        .ev('step/end', { reason: 'final' })
        .ev('run/interrupted', { attempt: 1, step: 1, reason: 'lease_expired' })
        .call('m2', 'b', { deltas: ['b'] })
        .ev('step/end', { reason: 'final' })
        .status('running', 'completed'),
    );
    expect(shape(encode(between))).toEqual(shape(encode(rebuilt(between))));
    expectResumable(encode(between), [between, rebuilt(between)]);
  });

  it('an approval ends the AG-UI run with an interrupt; the next one starts where the run goes on', () => {
    const waits = script((s) =>
      s
        .status(null, 'queued')
        .status('queued', 'running')
        .call('m1', '', { tools: [{ id: 'c1', name: 'danger' }] })
        .ev('tool/approval', { toolCallId: 'c1', toolName: 'danger', input: { target: 'x' }, assistantMessageId: 'm1' })
        .ev('turn/end', { reason: 'suspended', steps: 1 })
        .status('running', 'waiting_approval')
        .ev('tool/decision', { toolCallId: 'c1', approved: true })
        .status('waiting_approval', 'queued')
        .status('queued', 'running')
        .ev('tool/result', {
          toolCallId: 'c1',
          toolName: 'danger',
          output: { type: 'text', value: 'did x' },
          toolMessageId: 't1',
          durationMs: 1,
        })
        .ev('step/end', { reason: 'tool-calls' })
        .call('m2', 'done', { deltas: ['done'] })
        .ev('step/end', { reason: 'final' })
        .status('running', 'completed'),
    );
    const live = encode(waits);
    expectValid(live);
    const finished = live.filter((e) => e.event.type === EventType.RUN_FINISHED);
    expect(finished.map((e) => e.event)).toMatchObject([
      {
        outcome: {
          type: 'interrupt',
          interrupts: [{ id: 'c1', reason: 'approval', toolCallId: 'c1', metadata: { keel: { toolName: 'danger' } } }],
        },
      },
      {},
    ]);
    expect(finished[1]!.event).not.toHaveProperty('outcome');
    expect(live.filter((e) => e.event.type === EventType.RUN_STARTED)).toHaveLength(2);
    expect(shape(live)).toEqual(shape(encode(rebuilt(waits))));
    expectResumable(live, [waits, rebuilt(waits)]);
    // The stream of a client that answered the interrupt starts after it.
    const rest = encode(waits, finished[0]!.id);
    expect(types(rest).slice(0, 3)).toEqual(['RUN_STARTED', 'CUSTOM', 'STEP_STARTED']);
  });

  it('a call of a client tool ends the AG-UI run naming it; after an approval, a run of its own says so', () => {
    const signal = (id: string) => ({
      toolCallId: id,
      toolName: 'lookup',
      input: {},
      kind: 'signal',
      wait: { kind: 'signal', name: `client_tool.${id}` },
    });
    const mixed = script((s) =>
      s
        .status(null, 'queued')
        .status('queued', 'running')
        .call('m1', '', {
          tools: [
            { id: 'a1', name: 'danger' },
            { id: 'c1', name: 'lookup' },
          ],
        })
        .ev('tool/approval', { toolCallId: 'a1', toolName: 'danger', input: {}, assistantMessageId: 'm1' })
        .ev('turn/end', {
          reason: 'suspended',
          steps: 1,
          pending: [{ toolCallId: 'a1', toolName: 'danger', input: {}, kind: 'approval' }, signal('c1')],
        })
        .status('running', 'waiting_approval')
        .ev('tool/decision', { toolCallId: 'a1', approved: true })
        .status('waiting_approval', 'waiting_for_signal')
        .ev('wait/resolved', { toolCallId: 'c1', kind: 'signal', by: 'signal', output: { type: 'text', value: '42' } })
        .status('waiting_for_signal', 'queued')
        .status('queued', 'running')
        .ev('tool/result', {
          toolCallId: 'a1',
          toolName: 'danger',
          output: { type: 'text', value: 'did' },
          toolMessageId: 't1',
          durationMs: 1,
        })
        .ev('tool/result', {
          toolCallId: 'c1',
          toolName: 'lookup',
          output: { type: 'text', value: '42' },
          toolMessageId: 't2',
          durationMs: 1,
        })
        .ev('step/end', { reason: 'tool-calls' })
        .call('m2', 'got 42', { deltas: ['got 42'] })
        .ev('step/end', { reason: 'final' })
        .status('running', 'completed'),
    );
    const live = encode(mixed);
    expectValid(live);
    expect(live.filter((e) => e.event.type === EventType.RUN_FINISHED).map((e) => e.event)).toMatchObject([
      { outcome: { type: 'interrupt', interrupts: [{ id: 'a1' }] } },
      { outcome: { type: 'success', pendingToolCallIds: ['c1'] } },
      {},
    ]);
    // The client's own output is not sent back to it; Keel's tool's result is.
    expect(live.flatMap((e) => (e.event.type === EventType.TOOL_CALL_RESULT ? [e.event.toolCallId] : []))).toEqual([
      'a1',
    ]);
    expectResumable(live, [mixed, rebuilt(mixed)]);
  });

  it('a failed run ends with RUN_ERROR, a cancelled one with the cancelled outcome', () => {
    const failed = script((s) =>
      s
        .status(null, 'queued')
        .status('queued', 'running')
        .status('running', 'failed', { error: { message: 'the model is gone' } }),
    );
    expect(encode(failed).at(-1)!.event).toMatchObject({
      type: 'RUN_ERROR',
      message: 'the model is gone',
      code: 'failed',
    });
    const cancelled = script((s) => s.status(null, 'queued').status('queued', 'cancelled'));
    expect(encode(cancelled).at(-1)!.event).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
    expectValid(encode(failed));
    expectValid(encode(cancelled));
  });
});
