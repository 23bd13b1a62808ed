/**
 * OpenAI Responses under /openai/v1, driven by the official `openai` SDK on both backends (issue
 * 41, first slice): create, a `previous_response_id` chain in one Keel session and a fork, `conversation`,
 * background then retrieve, cancel, input items; every response an ordinary Keel run; another
 * tenant's ids not found; what is not built refused with the SDK's typed errors.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, startTestServer, type Api, type TestServer } from '../support/server-helpers.ts';

describe.each(BACKENDS)('OpenAI Responses with the openai SDK (%s)', (backend) => {
  let srv: TestServer;
  let acme: Api;
  let client: OpenAI;
  let other: OpenAI;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
    acme = srv.api(srv.secrets[0]);
    client = new OpenAI({ baseURL: `${srv.url}/openai/v1`, apiKey: srv.secrets[0], maxRetries: 0 });
    other = new OpenAI({ baseURL: `${srv.url}/openai/v1`, apiKey: srv.secrets[1], maxRetries: 0 });
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('creates a response (a Keel run) and continues its conversation with previous_response_id', async () => {
    const first = await client.responses.create({ model: 'helper', input: 'hello' });
    expect(first).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'helper@1',
      previous_response_id: null,
    });
    expect(first.output_text).toBe('echo: hello');
    expect(first.usage?.total_tokens).toBeGreaterThan(0);

    const second = await client.responses.create({
      model: 'helper',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'again' }] }],
      previous_response_id: first.id,
    });
    expect(second.output_text).toBe('echo: again');
    expect(second.previous_response_id).toBe(first.id);
    // Both are ordinary runs of one Keel session.
    const [a, b] = await Promise.all([acme.get(`/v1/runs/${first.id}`), acme.get(`/v1/runs/${second.id}`)]);
    expect(b.body.session_id).toBe(a.body.session_id);
    expect((await client.responses.retrieve(second.id)).output_text).toBe('echo: again');
    const items = await client.responses.inputItems.list(second.id);
    expect(items.data.map((i) => (i as { content: Array<{ text: string }> }).content[0]!.text)).toEqual(['again']);

    // A conversation id is the session: a third message there.
    const third = await client.responses.create({
      model: 'helper',
      input: 'once more',
      conversation: a.body.session_id,
    });
    expect(third.output_text).toBe('echo: once more');
    // Continuing an earlier response forks the conversation after it; the original goes on untouched.
    const before = (await acme.get(`/v1/sessions/${a.body.session_id}`)).body.last_seq;
    const fork = await client.responses.create({ model: 'helper', input: 'branch', previous_response_id: first.id });
    expect(fork.output_text).toBe('echo: branch');
    expect(fork.conversation?.id).not.toBe(a.body.session_id);
    expect((await acme.get(`/v1/sessions/${a.body.session_id}`)).body.last_seq).toBe(before);
    const context = (await acme.get(`/v1/sessions/${fork.conversation!.id}/transcript`)).body;
    expect(JSON.stringify(context)).toContain('echo: hello');
    expect(JSON.stringify(context)).not.toContain('echo: again');
  });

  it('instructions are the response’s system prompt, recorded with its run', async () => {
    const r = await client.responses.create({ model: 'helper', input: 'hi', instructions: 'Answer in French.' });
    expect(r.instructions).toBe('Answer in French.');
    expect((await acme.get(`/v1/runs/${r.id}`)).body.agent_spec.system).toBe('Answer in French.');
    const steps = (await acme.get(`/v1/runs/${r.id}/steps`)).body.data;
    expect(steps[0].requests[0].system).toBe('Answer in French.');
  });

  it('background: returns at once; retrieve follows the run to its end; cancel ends one', async () => {
    const queued = await client.responses.create({ model: 'helper', input: 'block:bg', background: true });
    expect(['queued', 'in_progress']).toContain(queued.status);
    expect(queued.background).toBe(true);
    srv.gates.open('bg');
    let r = await client.responses.retrieve(queued.id);
    for (const deadline = Date.now() + 10_000; r.status !== 'completed' && Date.now() < deadline;) {
      await new Promise((res) => setTimeout(res, 25));
      r = await client.responses.retrieve(queued.id);
    }
    expect(r.status).toBe('completed');
    expect(r.output_text).toBe('done');

    const blocked = await client.responses.create({ model: 'helper', input: 'block:never', background: true });
    const cancelled = await client.responses.cancel(blocked.id);
    expect(cancelled.status).toBe('cancelled');
  });

  it('another tenant’s responses are not found; what is not built is refused with typed errors', async () => {
    const mine = await client.responses.create({ model: 'helper', input: 'mine' });
    await expect(other.responses.retrieve(mine.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(other.responses.cancel(mine.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(
      other.responses.create({ model: 'helper', input: 'x', previous_response_id: mine.id }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);

    const refused = async (body: Record<string, unknown>, param: string) => {
      const e = await client.responses.create({ model: 'helper', input: 'x', ...body } as never).catch((x) => x);
      expect(e, JSON.stringify(body)).toBeInstanceOf(OpenAI.BadRequestError);
      expect(e.param).toBe(param);
      expect(e.message).not.toBe('');
    };
    await refused({ store: false }, 'store');
    await refused({ instructions: [{ role: 'user', content: 'x' }] }, 'instructions');
    await refused({ tools: [{ type: 'web_search' }] }, 'tools[0]');
    await refused({ tools: [{ type: 'function', name: 'danger' }] }, 'tools[0].name');
    await refused({ model: 'ghost' }, 'model');
    await refused({ input: [{ type: 'reasoning', summary: [] }] }, 'input[0]');
    // Outputs answer a response that waits for them: without one, or for one that waits for none, refused.
    await refused({ input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] }, 'input');
    await refused(
      { input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }], previous_response_id: mine.id },
      'input',
    );
    await expect(client.responses.delete(mine.id)).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    const unauthenticated = new OpenAI({ baseURL: `${srv.url}/openai/v1`, apiKey: 'wrong', maxRetries: 0 });
    await expect(unauthenticated.responses.retrieve(mine.id)).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });
});

describe.each(BACKENDS)('OpenAI Responses streams with the openai SDK (%s)', (backend) => {
  let srv: TestServer;
  let client: OpenAI;

  beforeAll(async () => {
    srv = await startTestServer({ backend, keys: [{ tenant: 'acme' }] });
    client = new OpenAI({ baseURL: `${srv.url}/openai/v1`, apiKey: srv.secrets[0], maxRetries: 0 });
  });
  afterAll(async () => {
    await srv?.close();
  });

  type Ev = {
    type: string;
    sequence_number: number;
    delta?: string;
    response?: { status: string; output_text?: string };
  };
  const collect = async (stream: AsyncIterable<unknown>, stopAfter?: (e: Ev) => boolean) => {
    const out: Ev[] = [];
    for await (const e of stream) {
      out.push(e as Ev);
      if (stopAfter?.(e as Ev)) break;
    }
    return out;
  };
  /** Consecutive text deltas as one (live, text comes in several; rebuilt from the log, in one). */
  const merged = (events: Ev[]) =>
    events.reduce<Ev[]>((out, e) => {
      const last = out.at(-1);
      if (e.type === 'response.output_text.delta' && last?.type === e.type)
        out[out.length - 1] = { ...e, delta: `${last.delta}${e.delta}` };
      else out.push(e);
      return out;
    }, []);
  const increasing = (events: Ev[]) =>
    events.every((e, i) => i === 0 || e.sequence_number > events[i - 1]!.sequence_number);

  it('streams a response: created, the text, completed; numbers only grow', async () => {
    const events = await collect(await client.responses.create({ model: 'helper', input: 'hi there', stream: true }));
    expect(merged(events).map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(increasing(events)).toBe(true);
    expect(events.flatMap((e) => (e.delta ? [e.delta] : [])).join('')).toBe('echo: hi there');
    expect(events.at(-1)!.response).toMatchObject({ status: 'completed' });
  });

  it('a stream dropped mid-run resumes with starting_after: nothing lost, nothing repeated', async () => {
    const stream = await client.responses.create({ model: 'helper', input: 'block:s/resumed fine', stream: true });
    // The client goes away after the run started (its tool waits on the gate); the run goes on.
    const before = await collect(stream, (e) => e.type === 'response.in_progress');
    const id = (before[0]!.response as unknown as { id: string }).id;
    srv.gates.open('s');
    const rest = await collect(
      await client.responses.retrieve(id, { stream: true, starting_after: before.at(-1)!.sequence_number }),
    );
    const whole = await collect(await client.responses.retrieve(id, { stream: true }));
    // The two parts are the whole stream, event for event (text deltas joined: live they come in
    // pieces, rebuilt from the log in one, ending at the same number).
    const key = (e: Ev) => `${e.sequence_number} ${e.type} ${e.delta ?? ''}`;
    expect(merged([...before, ...rest]).map(key)).toEqual(merged(whole).map(key));
    expect(increasing(whole)).toBe(true);
    expect(rest.flatMap((e) => (e.delta ? [e.delta] : [])).join('')).toBe('done resumed fine');
    expect(whole.at(-1)!.type).toBe('response.completed');

    // A client that had part of a message's text gets only the rest of it.
    const delta = whole.find((e) => e.type === 'response.output_text.delta')!;
    const had = delta.sequence_number - 'done resumed fine'.length * 16 + 4 * 16; // the first 4 characters
    const tail = await collect(await client.responses.retrieve(id, { stream: true, starting_after: had }));
    expect(tail[0]).toMatchObject({ type: 'response.output_text.delta', delta: ' resumed fine' });
    expect(tail.map((e) => e.type).slice(1)).toEqual([
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const bad = await client.responses.retrieve(id, { stream: true, starting_after: -5 }).catch((e) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
  });
});
