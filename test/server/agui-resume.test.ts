/**
 * AG-UI's missing piece, Keel's extension (docs/protocols.md): every event has an id, and a client
 * that reconnects with `Last-Event-ID` (posting the same input again, or GET /agui/{agent}/runs/{id})
 * gets the rest of the run, nothing twice. @ag-ui/client has no reconnect, so these tests read the
 * SSE themselves: streams cut mid-message again and again, and a server restart mid-run, against the
 * run's whole stream read afterwards, on both backends.
 */
import { randomUUID } from 'node:crypto';
import { EventType, type BaseEvent } from '@ag-ui/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, startTestServer, type Json, type TestServer } from '../support/server-helpers.ts';

interface Received {
  id: number;
  event: BaseEvent & Json;
}

const WORDS = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

/** The events of an SSE response, until it ends, drops, or `stop` says enough (then it disconnects). */
async function read(
  res: Response,
  stop?: (e: Received, all: Received[]) => boolean,
  out: Received[] = [],
): Promise<Received[]> {
  expect(
    res.status,
    await res
      .clone()
      .text()
      .catch(() => ''),
  ).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return out;
      buffer += decoder.decode(value, { stream: true });
      for (let k = buffer.indexOf('\n\n'); k >= 0; k = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, k);
        buffer = buffer.slice(k + 2);
        const id = /^id: (\d+)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (data === undefined) continue;
        expect(id, data).toBeDefined();
        const e = { id: Number(id), event: JSON.parse(data) as Received['event'] };
        out.push(e);
        if (stop?.(e, out)) {
          await reader.cancel();
          return out;
        }
      }
    }
  } catch {
    // The connection dropped (the server went away).
    return out;
  }
}

/** Consecutive text deltas of one message as one (live they come in pieces; rebuilt from the log, whole). */
function joined(events: Received[]): Received[] {
  return events.reduce<Received[]>((out, e) => {
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
const key = (e: Received) =>
  `${e.id} ${e.event.type}${e.event.type === EventType.TEXT_MESSAGE_CONTENT ? ` ${e.event.delta}` : ''}`;
const increasing = (events: Received[]) => events.every((e, i) => i === 0 || e.id > events[i - 1]!.id);
const text = (events: Received[]) =>
  events.flatMap((e) => (e.event.type === EventType.TEXT_MESSAGE_CONTENT ? [e.event.delta as string] : [])).join('');
const contents = (events: Received[]) => events.filter((e) => e.event.type === EventType.TEXT_MESSAGE_CONTENT);

/** What an AG-UI client checks: everything opened is closed once, in order, before its run ends. */
function expectValid(events: Received[]): void {
  const open = new Set<string>();
  let running = false;
  for (const { event: e } of events) {
    const what = `${e.type} ${String(e.messageId ?? e.toolCallId ?? e.stepName ?? '')}`;
    if (e.type === EventType.RUN_STARTED) {
      expect(running, what).toBe(false);
      running = true;
      continue;
    }
    expect(running, what).toBe(true);
    const [kind, id] = e.type.startsWith('TEXT_MESSAGE')
      ? ['message', e.messageId]
      : e.type.startsWith('TOOL_CALL') && e.type !== 'TOOL_CALL_RESULT'
        ? ['call', e.toolCallId]
        : e.type.startsWith('STEP')
          ? ['step', e.stepName]
          : [undefined, undefined];
    if (kind === undefined) {
      if (e.type === EventType.RUN_FINISHED || e.type === EventType.RUN_ERROR) {
        expect([...open], what).toEqual([]);
        running = false;
      }
      continue;
    }
    const k = `${kind} ${id}`;
    if (/_(START|STARTED)$/.test(e.type)) {
      expect(open.has(k), what).toBe(false);
      open.add(k);
    } else if (/_(END|FINISHED)$/.test(e.type)) expect(open.delete(k), what).toBe(true);
    else expect(open.has(k), what).toBe(true);
  }
  expect(running).toBe(false);
}

describe.each(BACKENDS)('AG-UI streams resume by Last-Event-ID (%s)', (backend) => {
  let srv: TestServer;
  let auth: Record<string, string>;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    auth = { authorization: `Bearer ${srv.secrets[0]}` };
  });
  afterAll(async () => {
    await srv?.close();
  });

  const post = (input: unknown, lastEventId?: number) =>
    fetch(`${srv.url}/agui/helper`, {
      method: 'POST',
      headers: {
        ...auth,
        'content-type': 'application/json',
        accept: 'text/event-stream',
        ...(lastEventId !== undefined ? { 'last-event-id': String(lastEventId) } : {}),
      },
      body: JSON.stringify(input),
    });
  const attach = (runId: string, lastEventId?: number, secret = srv.secrets[0]) =>
    fetch(`${srv.url}/agui/helper/runs/${runId}`, {
      headers: {
        authorization: `Bearer ${secret}`,
        ...(lastEventId !== undefined ? { 'last-event-id': String(lastEventId) } : {}),
      },
    });
  const inputOf = (content: string) => ({
    threadId: randomUUID(),
    runId: randomUUID(),
    messages: [{ id: randomUUID(), role: 'user', content }],
    tools: [],
    context: [],
    state: {},
    forwardedProps: {},
  });
  const keelRunOf = (events: Received[]) =>
    events.find((e) => e.event.type === EventType.CUSTOM && e.event.name === 'keel.run')!.event.value.runId as string;

  it('a stream cut mid-message, again and again: the parts are the whole stream, nothing lost or repeated', async () => {
    const input = inputOf(`slow:${WORDS}`);
    // The first connection goes away after the second piece of text.
    const parts = [await read(await post(input), (_, all) => contents(all).length === 2)];
    const runId = keelRunOf(parts[0]!);
    // Reconnect by posting the same input with the last id (the same message starts nothing new), cut again...
    parts.push(await read(await post(input, parts.at(-1)!.at(-1)!.id), (_, all) => contents(all).length === 3));
    // ... and re-attach by the run's id, to the end.
    parts.push(await read(await attach(runId, parts.at(-1)!.at(-1)!.id)));
    const got = parts.flat();
    expect(got.at(-1)!.event.type).toBe('RUN_FINISHED');

    // The run's whole stream, rebuilt from the log now that it ended.
    const whole = await read(await attach(runId));
    expect(increasing(got)).toBe(true);
    expect(increasing(whole)).toBe(true);
    expect(joined(got).map(key)).toEqual(joined(whole).map(key));
    expect(text(got)).toBe(WORDS);
    // The first cut came mid-message: the text resumed where the client was.
    expect(contents(parts[0]!).length).toBe(2);
    expect(WORDS.startsWith(text(parts[0]!))).toBe(true);
    expect(text(parts[0]!).length).toBeLessThan(WORDS.length);

    // From any id the client had: exactly the rest.
    for (const cut of [whole[3]!, contents(whole)[0]!, whole.at(-2)!]) {
      const rest = await read(await attach(runId, cut.id));
      const had = got.filter((e) => e.id <= cut.id);
      expect(joined([...had, ...rest]).map(key)).toEqual(joined(whole).map(key));
    }
    // A user message was sent once, however often the input came.
    const events = await srv.api(srv.secrets[0]).allEvents(input.threadId);
    expect(events.filter((e) => e.type === 'user/message')).toHaveLength(1);
    expect((await attach(runId, undefined, srv.secrets[1])).status).toBe(404);
    expect((await attach(runId, 'x' as unknown as number)).status).toBe(400);
  });

  it('across a server restart: the client re-attaches with its last id and gets the rest', async () => {
    const input = inputOf('danger:restart');
    // The first AG-UI run ends with the interrupt; the client keeps the last id it saw.
    const first = await read(await post(input));
    const finished = first.at(-1)!;
    expect(finished.event).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'interrupt' } });
    const runId = keelRunOf(first);
    const toolCallId = finished.event.outcome.interrupts[0].id as string;

    // The server goes away while the run waits, and comes back on the same port and store.
    await srv.restart();
    // Re-attached with the last id: nothing more until the run goes on.
    expect(await read(await attach(runId, finished.id))).toEqual([]);
    // The answer (a new AG-UI run of the same thread), read until the first text, then the connection drops.
    const answer = {
      ...input,
      runId: randomUUID(),
      messages: [
        ...input.messages,
        {
          id: `${runId}.1`,
          role: 'assistant',
          toolCalls: [{ id: toolCallId, type: 'function', function: { name: 'danger', arguments: '{}' } }],
        },
      ],
      resume: [{ interruptId: toolCallId, status: 'resolved', payload: { approved: true } }],
    };
    const second = await read(await post(answer), (e) => e.event.type === EventType.TOOL_CALL_RESULT);
    expect(second[0]!.event).toMatchObject({ type: 'RUN_STARTED', runId: answer.runId });
    // Posting the same answer again with the last id: the decision is not made twice; the rest comes.
    const third = await read(await post(answer, second.at(-1)!.id));
    const got = [...first, ...second, ...third];
    expect(got.at(-1)!.event.type).toBe('RUN_FINISHED');

    const whole = await read(await attach(runId));
    expect(increasing(got)).toBe(true);
    expect(joined(got).map(key)).toEqual(joined(whole).map(key));
    expect(text(got)).toBe('done');
    expect(srv.dangerRuns.filter((d) => d.target === 'restart')).toHaveLength(1);
    expectValid(got);
  });

  it('a restart mid-message: the client re-attaches with its last id and gets the rest', async () => {
    // The server restarts while the answer streams: the client's connection drops mid-message.
    const long = Array.from({ length: 120 }, (_, i) => `w${i}`).join(' ');
    const input = inputOf(`slow:${long}`);
    const before: Received[] = [];
    const reading = read(await post(input), undefined, before);
    for (const deadline = Date.now() + 10_000; contents(before).length < 3 && Date.now() < deadline;)
      await new Promise((r) => setTimeout(r, 5));
    await srv.restart();
    await reading;
    const runId = keelRunOf(before);
    const after = await read(await attach(runId, before.at(-1)!.id));
    const got = [...before, ...after];
    expect(got.at(-1)!.event.type).toBe('RUN_FINISHED');
    expect(increasing(got)).toBe(true);
    expectValid(got);

    // Against the run's whole stream, rebuilt from the log: every event of it, the final message whole.
    const whole = await read(await attach(runId));
    expectValid(whole);
    const ids = new Set(got.map((e) => `${e.id} ${e.event.type}`));
    expect(whole.filter((e) => !ids.has(`${e.id} ${e.event.type}`))).toEqual([]);
    const answer = whole.find((e) => e.event.type === EventType.TEXT_MESSAGE_START)!.event.messageId;
    const of = (events: Received[]) => text(events.filter((e) => e.event.messageId === answer));
    expect(of(whole)).toBe(long);
    expect(of(got)).toBe(long);
    // What only the client saw, if the restart cut the model call (it is made again): that call's
    // text, ended where it was cut.
    const extra = got.filter(
      (e) => !new Set(whole.map((w) => `${w.id} ${w.event.type}`)).has(`${e.id} ${e.event.type}`),
    );
    expect(extra.every((e) => e.event.type.startsWith('TEXT_MESSAGE') || e.event.type.startsWith('STEP'))).toBe(true);
    expect(long.startsWith(text(extra))).toBe(true);
  });
});
