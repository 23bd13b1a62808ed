/**
 * Keel as an MCP server at /mcp, driven by the MCP SDK's own Client over streamable HTTP, on both
 * backends (issue 41): agents as tools, a call as a Keel run (continued by session_id), progress,
 * a run that waits (without elicitation: a result that says so; with it: the client is asked),
 * tasks backed by runs (polled, cancelled, across a restart), sessions, transcripts and runs as
 * resources, tenants and refusals.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  ErrorCode,
  McpError,
  type ElicitRequest,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, startTestServer, type Api, type Json, type TestServer } from '../support/server-helpers.ts';

type Elicit = (request: ElicitRequest) => ElicitResult | Promise<ElicitResult>;

/** A connected SDK client with the key; with `elicit`, it declares form elicitation and answers with it. */
async function connect(srv: TestServer, secret: string | undefined, o: { elicit?: Elicit } = {}): Promise<Client> {
  const client = new Client(
    { name: 'keel-test', version: '1.0.0' },
    o.elicit ? { capabilities: { elicitation: { form: {} } } } : {},
  );
  if (o.elicit) {
    const elicit = o.elicit;
    client.setRequestHandler(ElicitRequestSchema, (r) => elicit(r));
  }
  const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), {
    requestInit: secret ? { headers: { authorization: `Bearer ${secret}` } } : {},
  });
  await client.connect(transport);
  return client;
}

const textOf = (r: Json): string => r.content.map((c: Json) => c.text).join('');

describe.each(BACKENDS)('MCP server at /mcp with the MCP SDK client (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let client: Client;
  let other: Client;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    client = await connect(srv, srv.secrets[0]);
    other = await connect(srv, srv.secrets[1]);
  });
  afterAll(async () => {
    await client?.close();
    await other?.close();
    await srv?.close();
  });

  it('lists the agents as tools, each with its versions, task support and output schema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['helper', 'terse']);
    const terse = tools.find((t) => t.name === 'terse')!;
    expect(terse.inputSchema).toMatchObject({
      required: ['message'],
      properties: { message: { type: 'string' }, session_id: { type: 'string' }, version: { enum: ['2'] } },
    });
    expect(terse.execution).toEqual({ taskSupport: 'optional' });
    expect(terse.outputSchema).toMatchObject({ type: 'object', required: expect.arrayContaining(['run_id']) });
    expect(client.getServerCapabilities()).toMatchObject({ tools: {}, resources: {}, tasks: { list: {}, cancel: {} } });
  });

  it('a call is a Keel run with its final answer; session_id continues its session', async () => {
    const first = (await client.callTool({ name: 'helper', arguments: { message: 'hello' } })) as Json;
    expect(first.isError).toBeFalsy();
    expect(textOf(first)).toBe('echo: hello');
    expect(first.structuredContent).toMatchObject({ status: 'completed', answer: 'echo: hello', agent: 'helper@1' });
    const { run_id: runId, session_id: sessionId } = first.structuredContent;
    // An ordinary run and session of the key's tenant.
    expect((await acme.get(`/v1/runs/${runId}`)).body).toMatchObject({ session_id: sessionId, status: 'completed' });
    expect((await acme.get(`/v1/sessions/${sessionId}`)).body.metadata).toEqual({ via: 'mcp' });

    const second = (await client.callTool({
      name: 'helper',
      arguments: { message: 'again', session_id: sessionId },
    })) as Json;
    expect(textOf(second)).toBe('echo: again');
    expect(second.structuredContent.session_id).toBe(sessionId);
    expect(second.structuredContent.run_id).not.toBe(runId);
    const transcript = JSON.stringify((await acme.get(`/v1/sessions/${sessionId}/transcript`)).body);
    expect(transcript).toContain('echo: hello');
    expect(transcript).toContain('echo: again');

    const terse = (await client.callTool({ name: 'terse', arguments: { message: 'x', version: '2' } })) as Json;
    expect(terse.structuredContent).toMatchObject({ answer: 'ok', agent: 'terse@2' });
  });

  it('a long call reports progress: the run, then its text as it streams', async () => {
    const seen: Array<{ progress: number; message?: string }> = [];
    const r = (await client.callTool(
      { name: 'helper', arguments: { message: 'slow:one two three four five six' } },
      CallToolResultSchema,
      { onprogress: (p) => seen.push(p), resetTimeoutOnProgress: true },
    )) as Json;
    expect(textOf(r)).toBe('one two three four five six');
    expect(seen[0]!.message).toBe(`run ${r.structuredContent.run_id} in session ${r.structuredContent.session_id}`);
    expect(seen.map((p) => p.message)).toContain('step 1');
    // Each delta is one notification: together they are the answer.
    const deltas = seen.slice(seen.findIndex((p) => p.message === 'step 1') + 1).map((p) => p.message);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('one two three four five six');
    expect(seen.every((p, i) => i === 0 || p.progress > seen[i - 1]!.progress)).toBe(true);
  });

  it('a client that gives up on a call does not cancel its run', async () => {
    const gaveUp = new AbortController();
    const seen: Array<{ message?: string }> = [];
    const call = client
      .callTool({ name: 'helper', arguments: { message: 'block:abandoned' } }, CallToolResultSchema, {
        signal: gaveUp.signal,
        onprogress: (p) => seen.push(p),
      })
      .catch((e) => e);
    await srv.gates.entered('abandoned');
    // The first progress notification named the run.
    const first = await acme.until('the first progress notification', async () => seen[0]);
    const runId = /^run (\S+) /.exec(first.message!)![1]!;
    gaveUp.abort();
    expect(await call).toBeInstanceOf(Error);
    expect((await acme.get(`/v1/runs/${runId}`)).body.status).toBe('running');
    srv.gates.open('abandoned');
    expect((await acme.waitForRun(runId, 'completed')).status).toBe('completed');
  });

  it('a run that waits for an approval: without elicitation, the result says what it waits for and how to answer', async () => {
    const r = (await client.callTool({ name: 'helper', arguments: { message: 'danger:nowhere' } })) as Json;
    expect(r.isError).toBeFalsy();
    const out = r.structuredContent;
    expect(out).toMatchObject({ status: 'waiting_approval', answer: null });
    expect(out.waiting).toEqual([
      { tool_call_id: expect.any(String), kind: 'approval', tool: 'danger', input: { target: 'nowhere' } },
    ]);
    expect(textOf(r)).toContain(`POST /v1/runs/${out.run_id}/approvals/${out.waiting[0].tool_call_id}`);
    expect(textOf(r)).toContain(`keel://runs/${out.run_id}`);
    // Answered elsewhere (Keel's API), the run ends; its resource has the answer.
    await acme.post(`/v1/runs/${out.run_id}/approvals/${out.waiting[0].tool_call_id}`, { decision: 'approve' });
    await acme.waitForRun(out.run_id, 'completed');
    const read = await client.readResource({ uri: `keel://runs/${out.run_id}` });
    expect(JSON.parse((read.contents[0] as Json).text)).toMatchObject({ status: 'completed', answer: 'done' });
  });

  it('with elicitation, the client is asked the run’s approvals and questions, and the call ends with the answer', async () => {
    const asked: ElicitRequest['params'][] = [];
    const elicit: Elicit = (r): ElicitResult => {
      asked.push(r.params);
      if ('requestedSchema' in r.params && 'color' in r.params.requestedSchema.properties)
        return { action: 'accept', content: { color: 'blue' } };
      return { action: 'accept', content: { approve: !r.params.message.includes('"target":"no"') } };
    };
    const asking = await connect(srv, srv.secrets[0], { elicit });
    try {
      const approved = (await asking.callTool({ name: 'helper', arguments: { message: 'danger:yes' } })) as Json;
      expect(textOf(approved)).toBe('done');
      expect(srv.dangerRuns).toContainEqual({ target: 'yes' });
      expect(asked[0]).toMatchObject({ mode: 'form', requestedSchema: { required: ['approve'] } });
      expect(asked[0]!.message).toContain('danger {"target":"yes"}');

      const denied = (await asking.callTool({ name: 'helper', arguments: { message: 'danger:no' } })) as Json;
      expect(denied.structuredContent.status).toBe('completed');
      expect(srv.dangerRuns).not.toContainEqual({ target: 'no' });

      const answered = (await asking.callTool({ name: 'helper', arguments: { message: 'ask' } })) as Json;
      expect(textOf(answered)).toBe('done');
      expect(asked.at(-1)).toMatchObject({
        requestedSchema: { properties: { color: { type: 'string', enum: ['red', 'blue'], title: 'Which color?' } } },
      });
      const events = await acme.allEvents(answered.structuredContent.session_id);
      expect(events.find((e) => e.type === 'user/answer')?.data.answer).toEqual({ color: 'blue' });
    } finally {
      await asking.close();
    }
  });

  it('a question the client dismisses stays open: the call ends saying what the run waits for', async () => {
    const asking = await connect(srv, srv.secrets[0], { elicit: () => ({ action: 'cancel' }) });
    try {
      const r = (await asking.callTool({ name: 'helper', arguments: { message: 'ask' } })) as Json;
      expect(r.structuredContent).toMatchObject({ status: 'waiting_for_user' });
      expect(r.structuredContent.waiting[0]).toMatchObject({ kind: 'input', tool: 'ask_user' });
      expect((await acme.get(`/v1/runs/${r.structuredContent.run_id}`)).body.status).toBe('waiting_for_user');
    } finally {
      await asking.close();
    }
  });

  it('refuses bad arguments and unknown tools in the protocol’s shapes; another tenant’s session is not found', async () => {
    const bad = (await client.callTool({ name: 'helper', arguments: { message: 5 } })) as Json;
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/^Input validation error: message: /);
    const extra = (await client.callTool({ name: 'helper', arguments: { message: 'x', model: 'y' } })) as Json;
    expect(extra.isError).toBe(true);
    const version = (await client.callTool({ name: 'terse', arguments: { message: 'x', version: '9' } })) as Json;
    expect(textOf(version)).toContain('terse has no version 9');

    const unknown = await client.callTool({ name: 'ghost', arguments: { message: 'x' } }).catch((e) => e);
    expect(unknown).toBeInstanceOf(McpError);
    expect(unknown.code).toBe(ErrorCode.InvalidParams);
    expect(unknown.message).toContain('Unknown tool: ghost');

    const mine = (await client.callTool({ name: 'helper', arguments: { message: 'mine' } })) as Json;
    const theirs = (await other.callTool({
      name: 'helper',
      arguments: { message: 'peek', session_id: mine.structuredContent.session_id },
    })) as Json;
    expect(theirs.isError).toBe(true);
    expect(textOf(theirs)).toBe(`session ${mine.structuredContent.session_id} does not exist`);
  });

  it('refuses a request without a valid key, before any MCP', async () => {
    for (const secret of [undefined, 'keel_wrong']) {
      const e = await connect(srv, secret).catch((x) => x);
      expect(e).toBeInstanceOf(Error);
      expect(e.code).toBe(401);
    }
    const res = await fetch(`${srv.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(await res.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000 } });

    // A page of another origin may not use the endpoint, even with a key; GET offers no stream.
    const headers = {
      authorization: `Bearer ${srv.secrets[0]}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const foreign = await fetch(`${srv.url}/mcp`, {
      method: 'POST',
      headers: { ...headers, origin: 'http://evil.example' },
      body,
    });
    expect(foreign.status).toBe(403);
    const own = await fetch(`${srv.url}/mcp`, { method: 'POST', headers: { ...headers, origin: srv.url }, body });
    expect(own.status).toBe(200);
    await own.body?.cancel();
    const get = await fetch(`${srv.url}/mcp`, { headers: { ...headers, accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('sessions, transcripts and runs are resources of the tenant', async () => {
    const r = (await client.callTool({ name: 'helper', arguments: { message: 'remember me' } })) as Json;
    const { session_id: sessionId, run_id: runId } = r.structuredContent;
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toEqual([
      'keel://sessions/{session_id}',
      'keel://sessions/{session_id}/transcript',
      'keel://runs/{run_id}',
    ]);
    const listed = await client.listResources();
    expect(listed.resources.map((x) => x.uri)).toContain(`keel://sessions/${sessionId}`);
    expect(listed.resources.find((x) => x.uri === `keel://sessions/${sessionId}`)).toMatchObject({
      title: 'remember me',
      mimeType: 'application/json',
    });
    // Another tenant lists none of them.
    expect((await other.listResources()).resources.map((x) => x.uri)).not.toContain(`keel://sessions/${sessionId}`);

    const session = await client.readResource({ uri: `keel://sessions/${sessionId}` });
    expect(JSON.parse((session.contents[0] as Json).text)).toMatchObject({
      id: sessionId,
      transcript_uri: `keel://sessions/${sessionId}/transcript`,
      runs: [{ id: runId, status: 'completed', uri: `keel://runs/${runId}` }],
    });
    const transcript = await client.readResource({ uri: `keel://sessions/${sessionId}/transcript` });
    expect(transcript.contents.map((c) => c.mimeType)).toEqual(['application/json', 'text/plain']);
    expect(JSON.parse((transcript.contents[0] as Json).text).items.map((i: Json) => i.text)).toEqual([
      'remember me',
      'echo: remember me',
    ]);
    expect((transcript.contents[1] as Json).text).toBe('user: remember me\n\nassistant: echo: remember me');

    for (const uri of [
      `keel://sessions/${sessionId}`,
      `keel://sessions/${sessionId}/transcript`,
      `keel://runs/${runId}`,
    ]) {
      const e = await other.readResource({ uri }).catch((x) => x);
      expect(e, uri).toBeInstanceOf(McpError);
      expect(e.code).toBe(-32002);
    }
    expect((await client.readResource({ uri: 'keel://nothing/here' }).catch((x) => x)).code).toBe(-32002);
  });
});

describe.each(BACKENDS)('MCP tasks backed by Keel runs (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let client: Client;
  let other: Client;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    client = await connect(srv, srv.secrets[0]);
    other = await connect(srv, srv.secrets[1]);
  });
  afterAll(async () => {
    await client?.close();
    await other?.close();
    await srv?.close();
  });

  /** A task-augmented tools/call: the task it returns. */
  const createTask = async (c: Client, message: string) =>
    (
      await c.request(
        { method: 'tools/call', params: { name: 'helper', arguments: { message } } },
        CreateTaskResultSchema,
        { task: { ttl: 60_000 } },
      )
    ).task;

  const pollUntil = async (c: Client, taskId: string, status: string) => {
    for (const deadline = Date.now() + 20_000; ;) {
      const t = await c.experimental.tasks.getTask(taskId);
      if (t.status === status) return t;
      if (Date.now() > deadline) throw new Error(`task ${taskId} is ${t.status}, not ${status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  it('a task-augmented call returns the run as a task; the SDK polls it to its result', async () => {
    const messages: Json[] = [];
    for await (const m of client.experimental.tasks.callToolStream(
      { name: 'helper', arguments: { message: 'tasked' } },
      CallToolResultSchema,
      { task: {} },
    ))
      messages.push(m);
    expect(messages[0].type).toBe('taskCreated');
    const taskId = messages[0].task.taskId;
    expect(messages[0].task).toMatchObject({ ttl: null, pollInterval: 500 });
    // The task is the run.
    expect((await acme.get(`/v1/runs/${taskId}`)).status).toBe(200);
    const last = messages.at(-1);
    expect(last.type).toBe('result');
    expect(textOf(last.result)).toBe('echo: tasked');
    expect(last.result.structuredContent.run_id).toBe(taskId);
    expect(last.result._meta['io.modelcontextprotocol/related-task']).toEqual({ taskId });
  });

  it('a task that waits for an approval survives a restart, is answered, and has its result', async () => {
    const task = await createTask(client, 'danger:durable');
    const waiting = await pollUntil(client, task.taskId, 'input_required');
    expect(waiting.statusMessage).toContain(`POST /v1/runs/${task.taskId}/approvals/`);

    await srv.restart();
    // The old server closed the client's pooled connections. Client and server share this process,
    // and the restart can end before the client's socket pool has read those closes: a POST down
    // one of them fails (`other side closed`). A turn of the event loop lets the pool see them.
    await new Promise((r) => setTimeout(r, 50));
    // The same client, the same task, another server process.
    const after = await client.experimental.tasks.getTask(task.taskId);
    expect(after.status).toBe('input_required');
    expect((await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toContain(task.taskId);
    expect((await other.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).not.toContain(task.taskId);

    const run = (await acme.get(`/v1/runs/${task.taskId}`)).body;
    await acme.post(`/v1/runs/${task.taskId}/approvals/${run.waiting.requests[0].tool_call_id}`, {
      decision: 'approve',
    });
    // tasks/result waits for the end of the run.
    const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)) as Json;
    expect(textOf(result)).toBe('done');
    expect((await client.experimental.tasks.getTask(task.taskId)).status).toBe('completed');
    expect(srv.dangerRuns).toContainEqual({ target: 'durable' });
  });

  it('tasks/cancel cancels the run; another tenant’s task is not found', async () => {
    const task = await createTask(client, 'block:never');
    const e = await other.experimental.tasks.getTask(task.taskId).catch((x) => x);
    expect(e).toBeInstanceOf(McpError);
    expect(e.code).toBe(ErrorCode.InvalidParams);
    expect(await other.experimental.tasks.cancelTask(task.taskId).catch((x) => x)).toBeInstanceOf(McpError);

    const cancelled = await client.experimental.tasks.cancelTask(task.taskId);
    expect(cancelled.status).toBe('cancelled');
    expect((await acme.get(`/v1/runs/${task.taskId}`)).body.status).toBe('cancelled');
    const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)) as Json;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(`run ${task.taskId} was cancelled`);
    // A task that ended cannot be cancelled again.
    expect(await client.experimental.tasks.cancelTask(task.taskId).catch((x) => x)).toBeInstanceOf(McpError);
  });

  it('with elicitation, tasks/result asks the run’s approval and returns the answer', async () => {
    const asking = await connect(srv, srv.secrets[0], {
      elicit: (r) => {
        expect(r.params._meta?.['io.modelcontextprotocol/related-task']).toMatchObject({ taskId: expect.any(String) });
        return { action: 'accept', content: { approve: true } };
      },
    });
    try {
      const messages: Json[] = [];
      for await (const m of asking.experimental.tasks.callToolStream(
        { name: 'helper', arguments: { message: 'danger:tasked' } },
        CallToolResultSchema,
        { task: {} },
      ))
        messages.push(m);
      expect(messages.map((m) => m.type)).toContain('taskCreated');
      expect(messages.some((m) => m.type === 'taskStatus' && m.task.status === 'input_required')).toBe(true);
      expect(textOf(messages.at(-1).result)).toBe('done');
      expect(srv.dangerRuns).toContainEqual({ target: 'tasked' });
    } finally {
      await asking.close();
    }
  });

  it('bad arguments of a task-augmented call are a protocol error', async () => {
    const e = await client
      .request({ method: 'tools/call', params: { name: 'helper', arguments: {} } }, CreateTaskResultSchema, {
        task: {},
      })
      .catch((x) => x);
    expect(e).toBeInstanceOf(McpError);
    expect(e.code).toBe(ErrorCode.InvalidParams);
    expect(e.message).toContain('Input validation error');
  });
});
