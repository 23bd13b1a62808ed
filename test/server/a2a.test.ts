/**
 * A2A 1.0 over JSON-RPC, driven by `@a2a-js/sdk`'s own client on both backends (issue 41): agent
 * cards found by the client factory, a message's task (a Keel run) with its answer as an artifact,
 * a streamed send, a context continued, input-required (a question, an approval) answered by the
 * next message, cancel; API keys and tenants; refusals as the protocol's errors.
 */
import { Role, type Task } from '@a2a-js/sdk';
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  type Client,
} from '@a2a-js/sdk/client';
import {
  ContentTypeNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
  type JsonRpcA2AError,
} from '@a2a-js/sdk/errors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  a2aClient,
  artifactText,
  asTask,
  collect,
  fetchWithKey,
  kinds,
  rebuild,
  sendRequest,
  TaskState,
} from '../support/a2a-client.ts';
import { BACKENDS, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';

/** The text of the task's status message (what input-required asks). */
const statusText = (t: Task) =>
  (t.status?.message?.parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');

describe.each(BACKENDS)('A2A with the @a2a-js/sdk client (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let client: Client;
  let other: Client;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    client = await a2aClient(srv.url, 'helper', srv.secrets[0]);
    other = await a2aClient(srv.url, 'helper', srv.secrets[1]);
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('serves agent cards: the default agent’s at /.well-known, each agent’s under /a2a/{agent}; they take the key', async () => {
    const card = await client.getAgentCard();
    expect(card).toMatchObject({
      name: 'helper',
      version: '1',
      supportedInterfaces: [{ url: `${srv.url}/a2a/helper`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      capabilities: { streaming: true, pushNotifications: true },
      securityRequirements: [{ schemes: { keel_api_key: { list: [] } } }],
    });
    expect(card.securitySchemes.keel_api_key!.scheme).toMatchObject({
      $case: 'httpAuthSecurityScheme',
      value: { scheme: 'Bearer' },
    });
    expect(card.skills.map((s) => s.name)).toEqual(['helper', 'danger', 'gate']);
    const root = await acme.get('/.well-known/agent-card.json');
    expect(root.status).toBe(200);
    expect(root.body.supportedInterfaces[0].url).toBe(`${srv.url}/a2a/helper`);
    const terse = await a2aClient(srv.url, 'terse', srv.secrets[0]);
    expect((await terse.getAgentCard()).name).toBe('terse');
    expect((await acme.get('/a2a/ghost/.well-known/agent-card.json')).status).toBe(404);
    // Without a trailing slash the SDK looks one level up, where no agent is named.
    expect((await acme.get('/a2a/.well-known/agent-card.json')).status).toBe(404);
    // No key, or a wrong one: refused at the HTTP layer, the card as well as the methods.
    await expect(a2aClient(srv.url, 'helper')).rejects.toThrow(/401/);
    await expect(a2aClient(srv.url, 'helper', 'keel_wrong')).rejects.toThrow(/401/);
    // The methods too: a client whose transport sends no key is refused.
    const keyless = await new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [new JsonRpcTransportFactory()],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetchWithKey(srv.secrets[0]) }),
      }),
    ).createFromUrl(`${srv.url}/a2a/helper/`);
    await expect(keyless.sendMessage(sendRequest('hi'))).rejects.toThrow(/401/);
  });

  it('a message makes a task (a Keel run, in a new context: a session) that completes with its answer as an artifact', async () => {
    const task = asTask(await client.sendMessage(sendRequest('hello')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(task)).toBe('echo: hello');
    expect(task.history.map((m) => [m.role, m.parts[0]?.content])).toEqual([
      [Role.ROLE_USER, { $case: 'text', value: 'hello' }],
    ]);
    // An ordinary run of an ordinary session.
    const run = (await acme.get(`/v1/runs/${task.id}`)).body;
    expect(run).toMatchObject({ status: 'completed', session_id: task.contextId, agent: { name: 'helper' } });
    expect((await client.getTask({ tenant: '', id: task.id })).artifacts).toEqual(task.artifacts);
    // historyLength 0: no history.
    expect((await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).history).toEqual([]);

    // The message id is the send's idempotency key: the same message again (a retry) is the same task.
    const request = sendRequest('once');
    const once = asTask(await client.sendMessage(request));
    expect(asTask(await client.sendMessage(request)).id).toBe(once.id);
    expect((await acme.get(`/v1/sessions/${once.contextId}/runs`)).body.data).toHaveLength(1);
    const reused = sendRequest('another text');
    reused.message!.messageId = request.message!.messageId;
    await expect(client.sendMessage(reused)).rejects.toBeInstanceOf(RequestMalformedError);

    // returnImmediately: at once, then the task goes on.
    const queued = asTask(
      await client.sendMessage(sendRequest('block:now', { configuration: { returnImmediately: true } })),
    );
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(queued.status?.state);
    srv.gates.open('now');
    await acme.waitForRun(queued.id, 'completed');
    expect(artifactText(await client.getTask({ tenant: '', id: queued.id }))).toBe('done');
  });

  it('streams a send: the task, working, the answer in chunks, completed; the chunks are the logged answer', async () => {
    const words = Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ');
    const events = await collect(client.sendMessageStream(sendRequest(`slow:${words}`)));
    const k = kinds(events);
    expect(k[0]).toBe('task:SUBMITTED');
    expect(k[1]).toBe('status:WORKING');
    expect(k.at(-1)).toBe('status:COMPLETED');
    expect(k.slice(2, -1).every((x) => x === 'artifactUpdate')).toBe(true);
    const chunks = events.flatMap((e) => (e.payload?.$case === 'artifactUpdate' ? [e.payload.value] : []));
    expect(chunks[0]).toMatchObject({ append: false, lastChunk: false });
    expect(chunks.at(-1)).toMatchObject({ lastChunk: true });
    expect(chunks.length).toBeGreaterThan(2);
    const task = events[0]!.payload!.value as Task;
    const text = [...rebuild(events).values()].join('');
    expect(text).toBe(words);
    const logged = (await acme.allEvents(task.contextId)).filter((e) => e.type === 'assistant/message');
    expect(logged.map((e) => e.data.message.content[0].text)).toEqual([text]);
  });

  it('a message with a context id continues that context (session): a new task there', async () => {
    const first = asTask(await client.sendMessage(sendRequest('first')));
    const second = asTask(await client.sendMessage(sendRequest('second', { contextId: first.contextId })));
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).not.toBe(first.id);
    expect(artifactText(second)).toBe('echo: second');
    const runs = (await acme.get(`/v1/sessions/${first.contextId}/runs`)).body.data.map((r: { id: string }) => r.id);
    expect(runs).toEqual([first.id, second.id]);
    const e = await client.sendMessage(sendRequest('x', { contextId: 'nope' })).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RequestMalformedError);
  });

  it('input-required for a question is answered by the next message on the task: its text is the answer', async () => {
    const asked = asTask(await client.sendMessage(sendRequest('ask')));
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(statusText(asked)).toBe('Which color? (red, blue)');
    expect(asked.status?.message?.parts[1]?.content).toMatchObject({
      $case: 'data',
      value: { pending: [{ tool: 'ask_user', kind: 'question' }] },
    });
    // GetTask says the same, from the log.
    expect(statusText(await client.getTask({ tenant: '', id: asked.id }))).toBe('Which color? (red, blue)');
    const done = asTask(await client.sendMessage(sendRequest('red', { taskId: asked.id })));
    expect(done.id).toBe(asked.id);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(done)).toBe('done');
    // The history: the message, the question (once answered), the answer.
    expect(done.history.map((m) => m.role)).toEqual([Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER]);
    const answers = (await acme.allEvents(asked.contextId)).filter((e) => e.type === 'user/answer');
    expect(answers.map((e) => e.data.answer)).toEqual(['red']);
    // A finished task takes no more messages: its context does.
    const e = await client.sendMessage(sendRequest('more', { taskId: asked.id })).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UnsupportedOperationError);
  });

  it('input-required for an approval: "deny: reason" or a data part {approved}; a streamed answer goes on with the task', async () => {
    const waiting = asTask(await client.sendMessage(sendRequest('danger:one')));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(statusText(waiting)).toBe(
      'Approve danger({"target":"one"})? Answer "approve" or "deny" (or "deny: <reason>").',
    );
    const unclear = await client.sendMessage(sendRequest('maybe', { taskId: waiting.id })).catch((x: unknown) => x);
    expect(unclear).toBeInstanceOf(RequestMalformedError);
    const denied = asTask(await client.sendMessage(sendRequest('deny: not today', { taskId: waiting.id })));
    expect(denied.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(srv.dangerRuns).not.toContainEqual({ target: 'one' });
    const decisions = (await acme.allEvents(waiting.contextId)).filter((e) => e.type === 'tool/decision');
    expect(decisions.map((e) => [e.data.approved, e.data.reason])).toEqual([[false, 'not today']]);

    // Approved with a data part, streamed: the task as it stands, then what follows.
    const again = asTask(await client.sendMessage(sendRequest('danger:two')));
    const events = await collect(
      client.sendMessageStream(sendRequest([{ data: { approved: true } }], { taskId: again.id })),
    );
    // The first event is the task as it stands (working, or done already: the run is quick); no
    // state is said twice.
    const k = kinds(events);
    expect(k[0]).toMatch(/^task:(WORKING|COMPLETED)$/);
    expect(k.at(-1)).toMatch(/:COMPLETED$/);
    expect(k.filter((x) => x === 'status:WORKING')).toEqual([]);
    expect([...rebuild(events).values()]).toEqual(['done']);
    expect(srv.dangerRuns).toContainEqual({ target: 'two' });
  });

  it('cancels a task; a finished one is not cancelable', async () => {
    const t = asTask(
      await client.sendMessage(sendRequest('block:cancel', { configuration: { returnImmediately: true } })),
    );
    await srv.gates.entered('cancel');
    const cancelled = await client.cancelTask({ tenant: '', id: t.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await acme.get(`/v1/runs/${t.id}`)).body.status).toBe('cancelled');
    await expect(client.cancelTask({ tenant: '', id: t.id, metadata: undefined })).rejects.toBeInstanceOf(
      TaskNotCancelableError,
    );
    await expect(client.resubscribeTask({ tenant: '', id: t.id }).next()).rejects.toBeInstanceOf(
      UnsupportedOperationError,
    );
  });

  it('another tenant’s tasks are not found; bad params and what is not served are JSON-RPC errors with A2A codes', async () => {
    const mine = asTask(await client.sendMessage(sendRequest('mine')));
    const notFound = async (p: Promise<unknown>) => {
      const e = (await p.catch((x: unknown) => x)) as JsonRpcA2AError;
      expect(e).toBeInstanceOf(TaskNotFoundError);
      expect(e.envelopeCode).toBe(-32001);
    };
    await notFound(other.getTask({ tenant: '', id: mine.id }));
    await notFound(other.cancelTask({ tenant: '', id: mine.id, metadata: undefined }));
    await notFound(other.resubscribeTask({ tenant: '', id: mine.id }).next());
    await notFound(other.sendMessage(sendRequest('x', { taskId: mine.id })));
    await notFound(other.listTaskPushNotificationConfig({ tenant: '', taskId: mine.id, pageSize: 0, pageToken: '' }));
    await notFound(client.getTask({ tenant: '', id: 'no-such-task' }));
    // Another tenant's context is no context of this one.
    await expect(other.sendMessage(sendRequest('x', { contextId: mine.contextId }))).rejects.toBeInstanceOf(
      RequestMalformedError,
    );
    // A task of another agent is not this agent's.
    const terse = await a2aClient(srv.url, 'terse', srv.secrets[0]);
    await notFound(terse.getTask({ tenant: '', id: mine.id }));

    const invalid = (await client.getTask({ tenant: '', id: '' }).catch((x: unknown) => x)) as JsonRpcA2AError;
    expect(invalid).toBeInstanceOf(RequestMalformedError);
    expect(invalid.envelopeCode).toBe(-32602);
    await expect(client.getTask({ tenant: 'globex', id: mine.id })).rejects.toBeInstanceOf(RequestMalformedError);
    await expect(client.sendMessage(sendRequest([{ data: { x: 1 } }]))).rejects.toBeInstanceOf(
      ContentTypeNotSupportedError,
    );
    await expect(
      client.sendMessage(sendRequest('x', { configuration: { acceptedOutputModes: ['image/png'] } })),
    ).rejects.toBeInstanceOf(ContentTypeNotSupportedError);
    const unsupported = (await client
      .listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', statusTimestampAfter: undefined })
      .catch((x: unknown) => x)) as JsonRpcA2AError;
    expect(unsupported).toBeInstanceOf(UnsupportedOperationError);
    expect(unsupported.envelopeCode).toBe(-32004);
    // A context with a task in progress takes no second one.
    const busy = asTask(await client.sendMessage(sendRequest('ask')));
    await expect(client.sendMessage(sendRequest('x', { contextId: busy.contextId }))).rejects.toBeInstanceOf(
      UnsupportedOperationError,
    );
  });
});
