/**
 * OpenAI Responses: the turn handed to the client, driven by the official `openai` SDK on both
 * backends (issue 41). Function tools the client declares are executed by the client: the response
 * ends with `function_call` items while the Keel run waits durably (across a server restart), and
 * the client's `function_call_output` items, sent with `previous_response_id`, continue the same
 * run as the next response. Keel's approvals are `mcp_approval_request` items answered by
 * `mcp_approval_response` items; a question is a message answered by the next user message. All
 * of it streamed too, and resumable with `starting_after`.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';

type Item = { type: string; [k: string]: unknown };
const itemsOf = (r: { output: unknown[] }) => r.output as Item[];

describe.each(BACKENDS)('OpenAI Responses hands the turn to the client (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let client: OpenAI;

  const tools: OpenAI.Responses.FunctionTool[] = [
    {
      type: 'function',
      name: 'get_location',
      description: 'Where the user is',
      parameters: { type: 'object', properties: { n: { type: 'number' } } },
      strict: false,
    },
    { type: 'function', name: 'get_time', description: 'The user’s clock', parameters: null, strict: false },
  ];

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }] });
    acme = srv.api(srv.secrets[0]);
    client = new OpenAI({ baseURL: `${srv.url}/openai/v1`, apiKey: srv.secrets[0], maxRetries: 0 });
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('function tools run in the client: the run waits (across a restart) for their outputs, then goes on as the next response', async () => {
    const first = await client.responses.create({ model: 'helper', input: 'call:get_location,get_time', tools });
    expect(first.status).toBe('completed');
    const calls = itemsOf(first).filter((i) => i.type === 'function_call');
    expect(calls.map((c) => [c.name, c.arguments])).toEqual([
      ['get_location', '{"n":0}'],
      ['get_time', '{"n":1}'],
    ]);
    expect(first.tools.map((t) => (t as { name: string }).name)).toEqual(['get_location', 'get_time']);
    // In Keel the run waits for them, durably.
    const run = (await acme.get(`/v1/runs/${first.id}`)).body;
    expect(run.status).toBe('waiting_for_signal');
    expect(run.waiting.requests.map((r: { client_tool: boolean }) => r.client_tool)).toEqual([true, true]);

    // Half the outputs is refused, and delivers nothing.
    const half = await client.responses
      .create({
        model: 'helper',
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: calls[0]!.call_id as string, output: 'Lisbon' }],
        tools,
      })
      .catch((e: unknown) => e);
    expect(half).toBeInstanceOf(OpenAI.BadRequestError);
    expect((half as InstanceType<typeof OpenAI.APIError>).message).toContain(calls[1]!.call_id as string);
    expect((await acme.get(`/v1/runs/${first.id}`)).body.waiting.requests.every((r: Item) => !r.decided)).toBe(true);

    await srv.restart();
    // A connection the old server closed may still be pooled: the SDK retries it, as it does by default.
    const retrying = new OpenAI({ baseURL: `${srv.url}/openai/v1`, apiKey: srv.secrets[0], maxRetries: 2 });
    const second = await retrying.responses.create({
      model: 'helper',
      previous_response_id: first.id,
      input: [
        { type: 'function_call_output', call_id: calls[0]!.call_id as string, output: 'Lisbon' },
        { type: 'function_call_output', call_id: calls[1]!.call_id as string, output: '09:00' },
      ],
      tools,
    });
    // The same run went on: the next response of it.
    expect(second).toMatchObject({
      id: `${first.id}.1`,
      status: 'completed',
      previous_response_id: first.id,
      output_text: 'got Lisbon | 09:00',
    });
    expect((await acme.get(`/v1/runs/${first.id}`)).body.status).toBe('completed');
    expect((await client.responses.retrieve(first.id)).output).toEqual(first.output);
    const given = await client.responses.inputItems.list(second.id);
    expect(given.data.map((i) => [i.type, (i as { output?: string }).output])).toEqual([
      ['function_call_output', 'Lisbon'],
      ['function_call_output', '09:00'],
    ]);
    // Given twice: the response waits for nothing any more.
    const again = await client.responses
      .create({
        model: 'helper',
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: calls[0]!.call_id as string, output: 'x' }],
      })
      .catch((e: unknown) => e);
    expect(again).toBeInstanceOf(OpenAI.BadRequestError);
    // A message after the continuation goes on in the conversation, as after any response.
    const third = await client.responses.create({ model: 'helper', input: 'thanks', previous_response_id: second.id });
    expect(third.output_text).toBe('echo: thanks');
    expect((await acme.get(`/v1/runs/${third.id}`)).body.session_id).toBe(run.session_id);
  });

  it('approvals are mcp_approval_request items, answered by mcp_approval_response items; a question by the next message', async () => {
    const asked = await client.responses.create({ model: 'helper', input: 'danger:prod' });
    const request = itemsOf(asked).find((i) => i.type === 'mcp_approval_request')!;
    expect(request).toMatchObject({ name: 'danger', arguments: '{"target":"prod"}', server_label: 'keel' });
    const approved = await client.responses.create({
      model: 'helper',
      previous_response_id: asked.id,
      input: [{ type: 'mcp_approval_response', approval_request_id: request.id as string, approve: true }],
    });
    expect(approved).toMatchObject({ id: `${asked.id}.1`, status: 'completed', output_text: 'done' });
    expect((await acme.get(`/v1/runs/${asked.id}/steps`)).text).toContain('did prod');

    const denied = await client.responses.create({ model: 'helper', input: 'danger:staging' });
    const req = itemsOf(denied).find((i) => i.type === 'mcp_approval_request')!;
    await client.responses.create({
      model: 'helper',
      previous_response_id: denied.id,
      input: [{ type: 'mcp_approval_response', approval_request_id: req.id as string, approve: false, reason: 'no' }],
    });
    const events = (await acme.get(`/v1/sessions/${(await acme.get(`/v1/runs/${denied.id}`)).body.session_id}/events`))
      .body.data as Array<{ type: string; data: { approved?: boolean; reason?: string } }>;
    expect(events.filter((e) => e.type === 'tool/decision').map((e) => e.data)).toContainEqual(
      expect.objectContaining({ approved: false, reason: 'no' }),
    );

    const question = await client.responses.create({ model: 'helper', input: 'ask' });
    expect(question.output_text).toBe('Which color? (red / blue)');
    const answered = await client.responses.create({
      model: 'helper',
      previous_response_id: question.id,
      input: 'blue',
    });
    expect(answered.output_text).toBe('done');
    const session = (await acme.get(`/v1/runs/${question.id}`)).body.session_id;
    const answers = ((await acme.get(`/v1/sessions/${session}/events`)).body.data as Array<{ type: string }>).filter(
      (e) => e.type === 'user/answer',
    );
    expect(answers).toMatchObject([{ data: { answer: { color: 'blue' } } }]);
  });

  it('streams the hand-off and the continuation; a continuation resumes with starting_after', async () => {
    type Ev = { type: string; sequence_number: number; item?: Item; delta?: string; response?: { id: string } };
    const collect = async (s: AsyncIterable<unknown>) => {
      const out: Ev[] = [];
      for await (const e of s) out.push(e as Ev);
      return out;
    };
    const first = await collect(
      await client.responses.create({ model: 'helper', input: 'call:get_time', tools, stream: true }),
    );
    expect(first.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const call = first.find((e) => e.type === 'response.output_item.done')!.item!;
    const id = first[0]!.response!.id;
    // Streamed again while the run waits for the client: the same events from the log, and it ends.
    const again = await collect(await client.responses.retrieve(id, { stream: true }));
    expect(again.map((e) => e.type)).toEqual(first.map((e) => e.type));
    expect(again.at(-1)!.sequence_number).toBe(first.at(-1)!.sequence_number);
    const second = await collect(
      await client.responses.create({
        model: 'helper',
        previous_response_id: id,
        input: [{ type: 'function_call_output', call_id: call.call_id as string, output: 'noon' }],
        stream: true,
      }),
    );
    expect(second[0]!.response!.id).toBe(`${id}.1`);
    expect(second.at(-1)!.type).toBe('response.completed');
    const text = second.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta);
    expect(text.join('')).toBe('got noon');
    // The continuation streamed again after its third event: exactly the rest (its text may come in other pieces).
    const after = second[2]!.sequence_number;
    const rest = await collect(await client.responses.retrieve(`${id}.1`, { stream: true, starting_after: after }));
    expect(rest.every((e) => e.sequence_number > after)).toBe(true);
    const textOf = (evs: Ev[]) =>
      evs
        .filter((e) => e.type === 'response.output_text.delta')
        .map((e) => e.delta)
        .join('');
    expect(textOf(rest)).toBe(textOf(second.slice(3)));
    expect(rest.at(-1)!.type).toBe('response.completed');
  });
});
