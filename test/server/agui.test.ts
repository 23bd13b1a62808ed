/**
 * AG-UI at /agui/{agent}, driven by the protocol's own client (`HttpAgent` from @ag-ui/client) on
 * both backends (issue 41): a text run, a multi-turn thread (the history is the Keel session's; no
 * user message sent twice), an approval and a question as interrupts answered with `resume` (the
 * same Keel run goes on), tools the client executes (across a restart), a failed and a cancelled
 * run, refusals before the stream, tenants.
 * Every thread is an ordinary Keel session, every run an ordinary Keel run.
 */
import { randomUUID } from 'node:crypto';
import { HttpAgent, type AgentSubscriber, type RunAgentParameters } from '@ag-ui/client';
import { EventType, type BaseEvent, type Interrupt, type Message } from '@ag-ui/core';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { BACKENDS, startTestServer, type Api, type Json, type TestServer } from '../support/server-helpers.ts';

describe.each(BACKENDS)('AG-UI with @ag-ui/client (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let warn: MockInstance<typeof console.warn>;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    // The client warns when it strips what the protocol does not describe: Keel sends nothing of the kind.
    warn = vi.spyOn(console, 'warn');
    vi.spyOn(console, 'error').mockImplementation(() => {});
  });
  afterEach(() => {
    expect(warn.mock.calls.filter((c) => String(c[0]).includes('[ag-ui]'))).toEqual([]);
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await srv?.close();
  });

  const agentOf = (o: { secret?: string; threadId?: string; agent?: string; state?: unknown } = {}) =>
    new HttpAgent({
      url: `${srv.url}/agui/${o.agent ?? 'helper'}`,
      headers: { authorization: `Bearer ${o.secret ?? srv.secrets[0]}` },
      ...(o.threadId ? { threadId: o.threadId } : {}),
      ...(o.state !== undefined ? { initialState: o.state } : {}),
    });
  const say = (agent: HttpAgent, content: string, id = randomUUID()) => {
    agent.messages.push({ id, role: 'user', content });
    return id;
  };
  /** Runs the agent, with every event it saw and how its AG-UI run finished. */
  async function run(agent: HttpAgent, params: RunAgentParameters = {}) {
    const events: BaseEvent[] = [];
    let finished: Parameters<NonNullable<AgentSubscriber['onRunFinishedEvent']>>[0] | undefined;
    const result = await agent.runAgent(params, {
      onEvent: ({ event }) => {
        events.push(event);
      },
      onRunFinishedEvent: (p) => {
        finished = p;
      },
    });
    const keelRunIds = events.flatMap((e) =>
      e.type === EventType.CUSTOM && (e as Json).name === 'keel.run' ? [(e as Json).value.runId as string] : [],
    );
    return { events, result, finished, keelRunId: keelRunIds[0]!, keelRunIds };
  }
  const types = (events: BaseEvent[]) => events.map((e) => e.type);
  const texts = (messages: Message[]) => messages.map((m) => [m.role, m.content]);
  const userMessagesOf = async (sessionId: string) =>
    (await acme.allEvents(sessionId))
      .filter((e) => e.type === 'user/message')
      .map((e) => e.data.message.content.map((p: Json) => p.text).join(''));

  it('a text run: a Keel run in a new thread, streamed as AG-UI events', async () => {
    const agent = agentOf();
    say(agent, 'hello');
    const { events, result, finished, keelRunId } = await run(agent, {
      context: [{ description: 'The user', value: 'Ada, in Lisbon' }],
    });
    expect(texts(result.newMessages)).toEqual([['assistant', 'echo: hello']]);
    expect(types(events)[0]).toBe('RUN_STARTED');
    expect(types(events).at(-1)).toBe('RUN_FINISHED');
    expect(finished?.outcome).toBe('success');
    for (const t of ['STEP_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'STEP_FINISHED'])
      expect(types(events)).toContain(t);
    expect(events.at(-1)).toMatchObject({ threadId: agent.threadId, usage: [{ model: 'helper-1' }] });
    // An ordinary Keel session (the thread) and run.
    const keelRun = (await acme.get(`/v1/runs/${keelRunId}`)).body;
    expect(keelRun).toMatchObject({ status: 'completed', session_id: agent.threadId, agent: { name: 'helper' } });
    // The context joins the run's system prompt, after the agent's own.
    expect(keelRun.agent_spec.system).toBe(
      'You are a test helper.\n\nContext from the application:\n- The user: Ada, in Lisbon',
    );
    expect((await acme.get(`/v1/sessions/${agent.threadId}`)).status).toBe(200);
    expect(events.find((e) => e.type === EventType.CUSTOM && (e as Json).name === 'keel.status')).toBeDefined();
  });

  it('a multi-turn thread: the second run sees the history; no user message is sent twice', async () => {
    const agent = agentOf();
    const first = say(agent, 'hello');
    await run(agent);
    say(agent, 'again');
    const second = await run(agent);
    expect(texts(second.result.newMessages)).toEqual([['assistant', 'echo: again']]);
    expect(texts(agent.messages)).toEqual([
      ['user', 'hello'],
      ['assistant', 'echo: hello'],
      ['user', 'again'],
      ['assistant', 'echo: again'],
    ]);
    expect(await userMessagesOf(agent.threadId)).toEqual(['hello', 'again']);
    // The second run's model call had the whole thread: its own message and the turn before.
    const header = (await acme.allEvents(agent.threadId)).findLast((e) => e.type === 'request/header');
    expect(header.data.context.messages).toBe(3);

    // Nothing new: refused before any stream.
    await expect(agent.runAgent()).rejects.toMatchObject({ status: 400 });
    // The first request again (a client that lost its answer): the run it started, nothing sent.
    const again = agentOf({ threadId: agent.threadId });
    say(again, 'hello', first);
    const replay = await run(again);
    expect(texts(replay.result.newMessages)).toEqual([['assistant', 'echo: hello']]);
    expect(await userMessagesOf(agent.threadId)).toEqual(['hello', 'again']);
    // The same id with other content is another message: refused.
    const changed = agentOf({ threadId: agent.threadId });
    say(changed, 'hello, changed', first);
    await expect(changed.runAgent()).rejects.toMatchObject({ status: 422 });
  });

  it('an approval is an interrupt; answered with resume, the same Keel run goes on', async () => {
    const agent = agentOf();
    say(agent, 'danger:x');
    const asked = await run(agent);
    expect(asked.finished?.outcome).toBe('interrupt');
    const [interrupt] = agent.pendingInterrupts as [Interrupt];
    expect(interrupt).toMatchObject({
      reason: 'approval',
      toolCallId: interrupt.id,
      metadata: { keel: { toolName: 'danger', input: { target: 'x' } } },
    });
    expect(types(asked.events)).toContain('TOOL_CALL_START');
    expect((await acme.get(`/v1/runs/${asked.keelRunId}`)).body.status).toBe('waiting_approval');

    const answered = await run(agent, {
      resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }],
    });
    expect(answered.finished?.outcome).toBe('success');
    expect(answered.keelRunId).toBe(asked.keelRunId);
    expect(srv.dangerRuns).toContainEqual({ target: 'x' });
    expect(agent.pendingInterrupts).toEqual([]);
    expect(texts(agent.messages)).toEqual([
      ['user', 'danger:x'],
      ['assistant', undefined],
      ['tool', 'did x'],
      ['assistant', 'done'],
    ]);
    expect((agent.messages[1] as Json).toolCalls).toMatchObject([{ id: interrupt.id, function: { name: 'danger' } }]);
    expect((await acme.get(`/v1/runs/${asked.keelRunId}`)).body.status).toBe('completed');

    // Denied, with a reason the model sees.
    const other = agentOf();
    say(other, 'danger:y');
    await run(other);
    const [second] = other.pendingInterrupts as [Interrupt];
    await run(other, {
      resume: [{ interruptId: second.id, status: 'resolved', payload: { approved: false, reason: 'not today' } }],
    });
    expect(srv.dangerRuns).not.toContainEqual({ target: 'y' });
    expect(other.messages.find((m) => m.role === 'tool')?.content).toContain('not today');
  });

  it('a question is an interrupt answered with its answer', async () => {
    const agent = agentOf();
    say(agent, 'ask');
    await run(agent);
    const [question] = agent.pendingInterrupts as [Interrupt];
    expect(question).toMatchObject({
      reason: 'question',
      message: 'Which color?',
      responseSchema: { type: 'object', properties: { color: { enum: ['red', 'blue'] } } },
    });
    const answered = await run(agent, {
      resume: [{ interruptId: question.id, status: 'resolved', payload: { color: 'blue' } }],
    });
    expect(answered.finished?.outcome).toBe('success');
    expect(texts(agent.messages).slice(2)).toEqual([
      ['tool', '{"color":"blue"}'],
      ['assistant', 'done'],
    ]);
  });

  it('tools run in the client: a call ends the AG-UI run while the Keel run waits, across a restart; the outputs go on with it', async () => {
    const tools = [
      {
        name: 'lookup',
        description: 'Looks a number up',
        parameters: { type: 'object', properties: { n: { type: 'number' } } },
      },
    ];
    const agent = agentOf();
    say(agent, 'call:lookup,lookup');
    const called = await run(agent, { tools });
    expect(called.finished?.outcome).toBe('success');
    const pending = (called.finished as { pendingToolCallIds: string[] }).pendingToolCallIds;
    expect(pending).toHaveLength(2);
    expect(
      (agent.messages[1] as Json).toolCalls.map((t: Json) => [t.id, t.function.name, t.function.arguments]),
    ).toEqual([
      [pending[0], 'lookup', '{"n":0}'],
      [pending[1], 'lookup', '{"n":1}'],
    ]);
    expect((await acme.get(`/v1/runs/${called.keelRunId}`)).body.status).toBe('waiting_for_signal');

    // One output of two: refused, nothing delivered.
    agent.messages.push({ id: randomUUID(), role: 'tool', toolCallId: pending[0]!, content: 'forty-two' });
    await expect(agent.runAgent({ tools })).rejects.toMatchObject({ status: 400 });
    // The run waits durably: the server restarts, then both outputs come.
    await srv.restart();
    agent.messages.push({ id: randomUUID(), role: 'tool', toolCallId: pending[1]!, content: 'seven' });
    const answered = await run(agent, { tools });
    expect(answered.keelRunId).toBe(called.keelRunId);
    expect(texts(answered.result.newMessages)).toEqual([['assistant', 'got forty-two | seven']]);
    // The outputs are the client's own: not sent back.
    expect(types(answered.events)).not.toContain('TOOL_CALL_RESULT');
    expect((await acme.get(`/v1/runs/${called.keelRunId}`)).body.status).toBe('completed');
    // A tool the run did not start with cannot join it.
    const other = agentOf();
    say(other, 'call:lookup');
    const first = await run(other, { tools });
    const [id] = (first.finished as { pendingToolCallIds: string[] }).pendingToolCallIds;
    other.messages.push({ id: randomUUID(), role: 'tool', toolCallId: id!, content: '1' });
    await expect(other.runAgent({ tools: [...tools, { name: 'extra', description: 'new' }] })).rejects.toMatchObject({
      status: 400,
    });
  });

  it('a failed run ends with RUN_ERROR; a cancelled one with the cancelled outcome', async () => {
    const failing = agentOf();
    say(failing, 'fail:the model refused');
    const failed = await run(failing);
    expect(failed.events.at(-1)).toMatchObject({ type: 'RUN_ERROR', code: 'failed' });
    expect((failed.events.at(-1) as Json).message).toContain('the model refused');
    expect((await acme.get(`/v1/runs/${failed.keelRunId}`)).body.status).toBe('failed');

    const blocked = agentOf();
    say(blocked, 'block:agui-cancel');
    const running = run(blocked);
    await srv.gates.entered('agui-cancel');
    const keelRun = (await acme.get(`/v1/sessions/${blocked.threadId}/runs`)).body.data[0];
    expect((await acme.post(`/v1/runs/${keelRun.id}/cancel`)).status).toBe(200);
    const cancelled = await running;
    expect(cancelled.finished?.outcome).toBe('cancelled');
    expect(cancelled.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
  });

  it('what Keel cannot honour is refused before the stream, as a problem', async () => {
    const refused = async (agent: HttpAgent, params: RunAgentParameters, status: number, detail: RegExp) => {
      const e = await agent.runAgent(params).catch((x: unknown) => x);
      expect(e, String(detail)).toMatchObject({ status });
      // The client keeps a problem+json body as text.
      const problem = JSON.parse((e as { payload: string }).payload);
      expect(problem.detail).toMatch(detail);
    };
    const withState = agentOf({ state: { cart: [1] } });
    say(withState, 'hi');
    await refused(withState, {}, 400, /^state: Keel agents keep no shared state/);
    const withTools = agentOf();
    say(withTools, 'hi');
    // A client tool named as one of the agent's own.
    await refused(
      withTools,
      { tools: [{ name: 'danger', description: 'mine' }] },
      400,
      /^tools\[0\]\.name: agent helper/,
    );
    await refused(withTools, { forwardedProps: { x: 1 } }, 400, /^forwardedProps:/);
    const history = agentOf();
    history.messages.push({ id: randomUUID(), role: 'assistant', content: 'earlier' });
    say(history, 'hi');
    await refused(history, {}, 400, /^messages: a new thread starts with user messages/);
    const ghost = agentOf({ agent: 'ghost' });
    say(ghost, 'hi');
    await refused(ghost, {}, 404, /agent ghost/);
    const unauthenticated = agentOf({ secret: 'wrong' });
    say(unauthenticated, 'hi');
    await expect(unauthenticated.runAgent()).rejects.toMatchObject({ status: 401 });
    // Not the protocol's input at all: the field at fault.
    const r = await acme.post('/agui/helper', { threadId: 't', messages: [] });
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
    expect(r.body).toMatchObject({ field: 'runId' });
    // Refused requests start nothing: those threads were not even created.
    for (const a of [withState, withTools, history])
      expect((await acme.get(`/v1/sessions/${a.threadId}`)).status).toBe(404);
  });

  it('another tenant’s thread and runs are not found', async () => {
    const mine = agentOf();
    say(mine, 'mine');
    const { keelRunId } = await run(mine);
    const theirs = agentOf({ secret: srv.secrets[1], threadId: mine.threadId });
    say(theirs, 'let me in');
    await expect(theirs.runAgent()).rejects.toMatchObject({ status: 404 });
    expect(await userMessagesOf(mine.threadId)).toEqual(['mine']);
    const other = srv.api(srv.secrets[1]);
    expect((await other.get(`/agui/helper/runs/${keelRunId}`)).status).toBe(404);
    expect((await acme.get(`/agui/terse/runs/${keelRunId}`)).status).toBe(404);
  });
});

describe('AG-UI and the key’s request budget', () => {
  it('requests to /agui spend the same bucket as the key’s others', async () => {
    const srv = await startTestServer({ keys: [{ tenant: 'acme' }], rateLimitPerMinute: 2 });
    try {
      const get = (path: string) =>
        fetch(`${srv.url}${path}`, { headers: { authorization: `Bearer ${srv.secrets[0]}` } }).then((r) => r.status);
      expect(await get('/v1/sessions')).toBe(200);
      expect(await get('/agui/helper/runs/none')).toBe(404);
      expect(await get('/agui/helper/runs/none')).toBe(429);
    } finally {
      await srv.close();
    }
  });
});
