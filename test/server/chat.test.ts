/**
 * The AI SDK chat endpoints, driven by the `ai` package's own chat client (`AbstractChat` with
 * `DefaultChatTransport`, exactly what `useChat` uses) against a real server.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type ChatInit,
  type ChatState,
  type ChatStatus,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { agentsFromConfig, type LoadedConfig } from '../../src/config/index.ts';
import { tool } from '../../src/core/index.ts';
import { ScriptedModel, type ScriptedResponse } from '../../src/model/index.ts';
import { createApiKey } from '../../src/server/auth.ts';
import { startServer, type RunningServer } from '../../src/server/serve.ts';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/index.ts';

// ---------------------------------------------------------------------------------------------
// The agent: a scripted model that reads the last user message as a command.

const TEXT = {
  hello: 'Echo: hello. Nice to meet you, how can I help?',
  weatherAsk: 'Let me check the weather.',
  weatherTell: 'It is 18 degrees in Paris.',
  report: 'Sending a report needs your approval.',
  slow: 'one two three four five six seven eight nine ten',
};

const textOf = (content: ReadonlyArray<{ type: string; text?: string }>) =>
  content.map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');

let flakyCalls = 0;

function script(call: LanguageModelV4CallOptions): ScriptedResponse {
  const last = call.prompt.at(-1)!;
  const pace = { chunkDelayMs: 2 };
  if (last.role === 'tool') {
    const r = last.content.find((p) => p.type === 'tool-result')!;
    const output = JSON.stringify(r.output);
    if (r.toolName === 'get_weather') return { ...pace, text: TEXT.weatherTell };
    if (r.toolName === 'send_report')
      return { ...pace, text: output.includes('"sent":true') ? 'The report was sent.' : 'The report was not sent.' };
    return { ...pace, text: `You chose ${output.includes('blue') ? 'blue' : 'something else'}.` };
  }
  const text = last.role === 'user' ? textOf(last.content) : '';
  switch (text) {
    case 'weather':
      return {
        ...pace,
        reasoning: 'The user wants the weather.',
        text: TEXT.weatherAsk,
        toolCalls: [{ name: 'get_weather', input: { city: 'paris' } }],
      };
    case 'report':
    case 'report gated':
      return {
        ...pace,
        text: TEXT.report,
        toolCalls: [
          { name: 'send_report', input: { to: text === 'report' ? 'team@example.com' : 'gated@example.com' } },
        ],
      };
    case 'ask':
      return {
        ...pace,
        toolCalls: [
          {
            name: 'ask_user',
            input: { questions: [{ id: 'color', question: 'Which color?', choices: ['red', 'blue'] }] },
          },
        ],
      };
    case 'slow':
      return { ...pace, text: TEXT.slow };
    case 'fail':
      return { error: { kind: 'bad_request', message: 'scripted refusal' } };
    case 'flaky':
      // The first attempt breaks off after two words and is retried.
      return flakyCalls++ === 0
        ? {
            ...pace,
            text: 'this attempt is abandoned midway',
            error: { kind: 'server', afterChunks: 2, retryAfterMs: 1 },
          }
        : { ...pace, text: 'The second attempt wins.' };
    default:
      return { ...pace, text: `Echo: ${text}. Nice to meet you, how can I help?` };
  }
}

/** Holds the `slow` answer after its third text delta until the test opens it. */
class Gate {
  open!: () => void;
  readonly opened = new Promise<void>((resolve) => (this.open = resolve));
}
let slowGate = new Gate();
/** Holds `send_report` to gated@example.com until the test opens it. */
let reportGate = new Gate();

function gatedModel(inner: ScriptedModel): LanguageModelV4 {
  return {
    specificationVersion: 'v4',
    provider: inner.provider,
    modelId: inner.modelId,
    supportedUrls: {},
    doGenerate: (o) => inner.doGenerate(o),
    async doStream(o) {
      const r = await inner.doStream(o);
      const last = o.prompt.at(-1);
      if (last?.role !== 'user' || textOf(last.content) !== 'slow') return r;
      const gate = slowGate;
      let n = 0;
      const held = new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
        async transform(part, controller) {
          if (part.type === 'text-delta' && ++n === 4) {
            // Held until the gate opens, or the call is aborted (a cancelled run).
            await new Promise<void>((resolve, reject) => {
              const signal = o.abortSignal;
              if (signal?.aborted) return reject(signal.reason as Error);
              signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
              void gate.opened.then(resolve);
            });
          }
          controller.enqueue(part);
        },
      });
      return { ...r, stream: r.stream.pipeThrough(held) };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The client: the AI SDK's chat with a plain array state (what useChat keeps in React state).

class ArrayState implements ChatState<UIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  pushMessage = (m: UIMessage) => {
    this.messages = [...this.messages, m];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (i: number, m: UIMessage) => {
    this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)];
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

class Chat extends AbstractChat<UIMessage> {
  constructor(init: Omit<ChatInit<UIMessage>, 'messages'>) {
    super({ ...init, state: new ArrayState() });
  }
}

/** Records the UI message chunks of every response, and can cut a response off mid-stream. */
class Wire {
  readonly requests: Array<{ method: string; url: string; status: number; chunks: UIMessageChunk[] }> = [];
  /** Cut the next POST response right after the `count`-th chunk of this type (a dropped connection). */
  dropAfter: { type: UIMessageChunk['type']; count: number } | undefined;

  fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    const record = {
      method: init?.method ?? 'GET',
      url: String(input),
      status: res.status,
      chunks: [] as UIMessageChunk[],
    };
    this.requests.push(record);
    if (!res.body || !res.ok) return res;
    const drop = record.method === 'POST' ? this.dropAfter : undefined;
    if (drop) this.dropAfter = undefined;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = '';
    let seen = 0;
    let cut = false;
    // Complete SSE events, passed on one per read: the client has read every one of them before
    // the cut (a pull only comes when the previous chunk was taken).
    const ready: Uint8Array[] = [];
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          for (;;) {
            const next = ready.shift();
            if (next) return controller.enqueue(next);
            if (cut) {
              void reader.cancel().catch(() => {});
              // What a lost connection looks like to fetch's body reader.
              return controller.error(new TypeError('network error: connection lost'));
            }
            const { done, value } = await reader.read();
            if (done) return controller.close();
            buffer += decoder.decode(value, { stream: true });
            for (let end = buffer.indexOf('\n\n'); end !== -1 && !cut; end = buffer.indexOf('\n\n')) {
              const event = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              ready.push(encoder.encode(`${event}\n\n`));
              const data = event.startsWith('data: ') ? event.slice(6) : undefined;
              if (!data || data === '[DONE]') continue;
              const chunk = JSON.parse(data) as UIMessageChunk;
              record.chunks.push(chunk);
              if (chunk.type === drop?.type && ++seen >= drop.count) cut = true;
            }
          }
        },
        cancel: (reason) => reader.cancel(reason),
      },
      { highWaterMark: 0 },
    );
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// ---------------------------------------------------------------------------------------------

let dir: string;
let store: SqliteStore;
let server: RunningServer;
let url: string;

function chatConfig(): LoadedConfig {
  const getWeather = tool({
    name: 'get_weather',
    description: 'Current temperature of a city in °C',
    input: z.object({ city: z.string() }),
    execute: ({ city }) => ({ city, celsius: 18 }),
  });
  const sendReport = tool({
    name: 'send_report',
    description: 'Sends a report (after approval)',
    input: z.object({ to: z.string() }),
    execute: async ({ to }) => {
      if (to === 'gated@example.com') await reportGate.opened;
      return { sent: true, to };
    },
  });
  const { agents, compaction } = agentsFromConfig(
    {
      agents: [
        {
          name: 'chat',
          model: gatedModel(new ScriptedModel([script], { loop: true, modelId: 'chat-script' })),
          tools: [getWeather, sendReport, 'ask_user'],
          approvals: { send_report: 'always' },
        },
      ],
    },
    'chat-test',
    process.cwd(),
  );
  return { source: null, agents, compaction, demo: false };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-chat-'));
  store = openSqliteStore({ path: join(dir, 'keel.db') });
  server = await startServer({
    store,
    config: chatConfig(),
    port: 0,
    host: '127.0.0.1',
    version: '0.0.0-test',
    leaseMs: 10_000,
  });
  url = server.url;
});

afterAll(async () => {
  slowGate.open();
  reportGate.open();
  await server?.close({ graceMs: 200 });
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function newSession(): Promise<string> {
  const res = await fetch(`${url}/v1/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

function chatFor(
  sessionId: string,
  wire = new Wire(),
  extra: Omit<ChatInit<UIMessage>, 'messages' | 'transport' | 'id'> = {},
) {
  const transport = new DefaultChatTransport<UIMessage>({
    api: `${url}/v1/sessions/${sessionId}/chat`,
    fetch: wire.fetch,
  });
  return new Chat({ id: sessionId, transport, ...extra });
}

const assistantText = (m: UIMessage | undefined) =>
  (m?.parts ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('');
const toolParts = (m: UIMessage | undefined) =>
  (m?.parts ?? []).filter((p) => p.type.startsWith('tool-')) as Array<
    Record<string, unknown> & { type: string; toolCallId: string; state: string }
  >;

async function activeRun(sessionId: string) {
  return server.runtime.store.runs.active(sessionId);
}

describe('POST /v1/sessions/{id}/chat', () => {
  it('streams the assistant text of a new message as a UI message stream', async () => {
    const sessionId = await newSession();
    const wire = new Wire();
    const chat = chatFor(sessionId, wire);
    await chat.sendMessage({ text: 'hello' });

    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const reply = chat.messages[1]!;
    expect(assistantText(reply)).toBe(TEXT.hello);

    // The wire: the protocol header, then start … finish, the text in several deltas.
    const [post] = wire.requests;
    expect(post!.status).toBe(200);
    const chunks = post!.chunks;
    expect(chunks[0]).toMatchObject({ type: 'start', messageId: reply.id });
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    const deltas = chunks.filter((c) => c.type === 'text-delta');
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.map((d) => d.delta).join('')).toBe(TEXT.hello);
    expect(chunks.filter((c) => c.type === 'text-start')).toHaveLength(1);
    expect(chunks.filter((c) => c.type === 'text-end')).toHaveLength(1);

    // The message is the run: its id is the run id, and the run completed.
    const run = await server.runtime.runs.get(reply.id);
    expect(run.sessionId).toBe(sessionId);
    expect(run.status).toBe('completed');
    expect(reply.metadata).toMatchObject({ runId: run.id, sessionId, status: 'completed' });

    // A second message in the same chat is the next run, and the next assistant message.
    await chat.sendMessage({ text: 'again' });
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(assistantText(chat.messages[3])).toBe('Echo: again. Nice to meet you, how can I help?');
    expect(chat.messages[3]!.id).not.toBe(reply.id);
  });

  it('sends the protocol header, and answers errors as problem+json', async () => {
    const sessionId = await newSession();
    const body = (text: string) =>
      JSON.stringify({
        id: sessionId,
        trigger: 'submit-message',
        messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }],
      });
    const res = await fetch(`${url}/v1/sessions/${sessionId}/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body('hello'),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const sse = await res.text();
    expect(sse.trim().endsWith('data: [DONE]')).toBe(true);

    const missing = await fetch(`${url}/v1/sessions/nope/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body('hello'),
    });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');

    const invalid = await fetch(`${url}/v1/sessions/${sessionId}/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [] }),
    });
    expect(invalid.status).toBe(400);
    expect(((await invalid.json()) as { type: string }).type).toMatch(/\/validation$/);

    // Nothing waits for an answer: an assistant message has nothing to continue.
    const stray = await fetch(`${url}/v1/sessions/${sessionId}/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ id: 'a1', role: 'assistant', parts: [] }] }),
    });
    expect(stray.status).toBe(409);
  });

  it('a message posted again (a retry after a lost answer) is the same message and run, streamed again: never a second run', async () => {
    const sessionId = await newSession();
    const body = (text: string) =>
      JSON.stringify({
        id: sessionId,
        trigger: 'submit-message',
        messages: [{ id: 'client-msg-1', role: 'user', parts: [{ type: 'text', text }] }],
      });
    const post = (text: string) =>
      fetch(`${url}/v1/sessions/${sessionId}/chat`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: body(text),
      });
    const messageIdOf = (sse: string) => /"type":"start","messageId":"([^"]+)"/.exec(sse)?.[1];
    const first = await (await post('only once')).text();
    expect(first.trim().endsWith('data: [DONE]')).toBe(true);
    for (let i = 0; i < 2; i++) {
      const again = await post('only once');
      expect(again.status).toBe(200);
      const sse = await again.text();
      expect(sse.trim().endsWith('data: [DONE]')).toBe(true);
      expect(messageIdOf(sse)).toBe(messageIdOf(first));
    }
    expect(await server.runtime.runs.list({ sessionId })).toHaveLength(1);
    const users = (await server.runtime.sessions.events(sessionId, { after: 0, limit: 1000 })).filter(
      (e) => e.type === 'user/message',
    );
    expect(users).toHaveLength(1);
    // The same id with other content is not the same message.
    const other = await post('something else');
    expect(other.status).toBe(422);
    expect(((await other.json()) as { type: string }).type).toMatch(/\/idempotency_mismatch$/);
  });

  it('sends text and file parts as the user message', async () => {
    const sessionId = await newSession();
    const chat = chatFor(sessionId);
    await chat.sendMessage({
      text: 'hello',
      files: [
        { type: 'file', mediaType: 'text/plain', filename: 'a.txt', url: 'data:text/plain;base64,aGVsbG8=' },
        { type: 'file', mediaType: 'text/plain', url: 'data:text/plain,hi%20there' },
        { type: 'file', mediaType: 'image/png', url: 'https://example.com/cat.png' },
      ],
    });
    expect(chat.error).toBeUndefined();
    const events = await server.runtime.sessions.events(sessionId, { after: 0, limit: 100 });
    const sent = events.find((e) => e.type === 'user/message');
    expect(sent?.type === 'user/message' && sent.data.message.content).toEqual([
      { type: 'file', mediaType: 'text/plain', data: 'aGVsbG8=', filename: 'a.txt' },
      { type: 'file', mediaType: 'text/plain', data: Buffer.from('hi there').toString('base64') },
      { type: 'file', mediaType: 'image/png', data: 'https://example.com/cat.png' },
      { type: 'text', text: 'hello' },
    ]);
  });

  it('shows a tool call and its output as a tool part', async () => {
    const sessionId = await newSession();
    const chat = chatFor(sessionId);
    await chat.sendMessage({ text: 'weather' });

    expect(chat.error).toBeUndefined();
    expect(chat.messages).toHaveLength(2);
    const reply = chat.messages[1]!;
    const [call] = toolParts(reply);
    expect(call).toMatchObject({
      type: 'tool-get_weather',
      state: 'output-available',
      input: { city: 'paris' },
      output: { city: 'paris', celsius: 18 },
    });
    // Two steps: the call, then the answer that used its result.
    expect(reply.parts.filter((p) => p.type === 'step-start')).toHaveLength(2);
    expect(reply.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual([
      TEXT.weatherAsk,
      TEXT.weatherTell,
    ]);
    expect(reply.parts.map((p) => p.type)).toEqual([
      'step-start',
      'reasoning',
      'text',
      'tool-get_weather',
      'step-start',
      'text',
    ]);
    expect(reply.parts[1]).toMatchObject({ type: 'reasoning', text: 'The user wants the weather.', state: 'done' });
  });

  it('surfaces an approval request; addToolApprovalResponse approves it and the run continues in the same message', async () => {
    const sessionId = await newSession();
    const chat = chatFor(sessionId);
    await chat.sendMessage({ text: 'report' });

    expect(chat.error).toBeUndefined();
    const reply = chat.messages[1]!;
    const [pending] = toolParts(reply);
    expect(pending).toMatchObject({
      type: 'tool-send_report',
      state: 'approval-requested',
      input: { to: 'team@example.com' },
      approval: { id: pending!.toolCallId },
    });
    expect(assistantText(reply)).toBe(TEXT.report);
    expect(reply.metadata).toMatchObject({ status: 'waiting_approval' });
    const run = await server.runtime.runs.get(reply.id);
    expect(run.status).toBe('waiting_approval');

    // A new message while the run waits is refused (if_busy: reject), as problem+json.
    await chat.sendMessage({ text: 'hello' });
    expect(chat.status).toBe('error');
    expect(chat.error?.message).toMatch(/active run/);
    chat.clearError();
    // Take the refused message back, as an app would.
    chat.messages = chat.messages.slice(0, 2);

    await chat.addToolApprovalResponse({ id: pending!.toolCallId, approved: true });
    await chat.sendMessage();

    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    expect(chat.messages).toHaveLength(2);
    const done = chat.messages[1]!;
    expect(done.id).toBe(reply.id);
    expect(toolParts(done)).toEqual([
      expect.objectContaining({
        type: 'tool-send_report',
        state: 'output-available',
        output: { sent: true, to: 'team@example.com' },
        approval: expect.objectContaining({ id: pending!.toolCallId, approved: true }),
      }),
    ]);
    expect(assistantText(done)).toBe(`${TEXT.report}The report was sent.`);
    expect((await server.runtime.runs.get(run.id)).status).toBe('completed');
  });

  it('continues by itself with sendAutomaticallyWhen (a denial)', async () => {
    const sessionId = await newSession();
    const chat = chatFor(sessionId, new Wire(), {
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await chat.sendMessage({ text: 'report' });
    const [pending] = toolParts(chat.messages[1]);
    expect(pending).toMatchObject({ state: 'approval-requested' });
    const runId = chat.messages[1]!.id;

    await chat.addToolApprovalResponse({ id: pending!.toolCallId, approved: false, reason: 'not today' });
    await vi.waitFor(
      async () => {
        expect((await server.runtime.runs.get(runId)).status).toBe('completed');
        expect(chat.status).toBe('ready');
        expect(assistantText(chat.messages[1])).toBe(`${TEXT.report}The report was not sent.`);
      },
      { timeout: 20_000, interval: 20 },
    );
    expect(chat.messages).toHaveLength(2);
    expect(toolParts(chat.messages[1])).toEqual([
      expect.objectContaining({
        state: 'output-denied',
        approval: expect.objectContaining({ approved: false, reason: 'not today' }),
      }),
    ]);
  });

  it('answers an ask_user question with addToolOutput', async () => {
    const sessionId = await newSession();
    const chat = chatFor(sessionId);
    await chat.sendMessage({ text: 'ask' });
    const [question] = toolParts(chat.messages[1]);
    expect(question).toMatchObject({
      type: 'tool-ask_user',
      state: 'input-available',
      input: { questions: [{ id: 'color' }] },
    });
    expect((await server.runtime.runs.get(chat.messages[1]!.id)).status).toBe('waiting_for_user');

    await chat.addToolOutput({ tool: 'ask_user', toolCallId: question!.toolCallId, output: { color: 'blue' } });
    await chat.sendMessage();

    expect(chat.error).toBeUndefined();
    expect(chat.messages).toHaveLength(2);
    expect(toolParts(chat.messages[1])).toEqual([
      expect.objectContaining({ state: 'output-available', output: { color: 'blue' } }),
    ]);
    expect(assistantText(chat.messages[1])).toBe('You chose blue.');
  });

  it('keeps what streamed when the run is cancelled mid-message, and finishes', async () => {
    slowGate = new Gate();
    const sessionId = await newSession();
    const wire = new Wire();
    const chat = chatFor(sessionId, wire);
    const sending = chat.sendMessage({ text: 'slow' });
    await vi.waitFor(() => expect(assistantText(chat.messages[1])).toBe('one two three '), {
      timeout: 20_000,
      interval: 10,
    });
    const res = await fetch(`${url}/v1/runs/${chat.messages[1]!.id}/cancel`, { method: 'POST' });
    expect(res.status).toBe(200);
    await sending;
    slowGate.open();

    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    expect(chat.messages).toHaveLength(2);
    expect(assistantText(chat.messages[1])).toBe('one two three ');
    expect(chat.messages[1]!.metadata).toMatchObject({ status: 'cancelled' });
    expect(wire.requests[0]!.chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'other' });
  });

  it('takes back what an abandoned model call streamed (a retry) with reset-step', async () => {
    const sessionId = await newSession();
    const wire = new Wire();
    const chat = chatFor(sessionId, wire);
    await chat.sendMessage({ text: 'flaky' });

    expect(chat.error).toBeUndefined();
    expect(flakyCalls).toBe(2);
    const types = wire.requests[0]!.chunks.map((c) => c.type);
    expect(types.indexOf('reset-step')).toBeGreaterThan(types.indexOf('text-delta'));
    expect(chat.messages[1]!.parts.map((p) => p.type)).toEqual(['step-start', 'text']);
    expect(assistantText(chat.messages[1])).toBe('The second attempt wins.');
  });

  it('ends with an error when the run fails', async () => {
    const sessionId = await newSession();
    const chat = chatFor(sessionId);
    await chat.sendMessage({ text: 'fail' });
    expect(chat.status).toBe('error');
    expect(chat.error?.message).toMatch(/scripted refusal/);
  });
});

describe('GET /v1/sessions/{id}/chat/stream (resume)', () => {
  it('answers 204 when no run is active', async () => {
    const sessionId = await newSession();
    for (const path of ['chat/stream', `chat/${sessionId}/stream`]) {
      const res = await fetch(`${url}/v1/sessions/${sessionId}/${path}`);
      expect(res.status).toBe(204);
    }
    const chat = chatFor(sessionId);
    await chat.resumeStream();
    expect(chat.status).toBe('ready');
    expect(chat.messages).toEqual([]);
    expect((await fetch(`${url}/v1/sessions/nope/chat/stream`)).status).toBe(404);
  });

  it('after a dropped connection, resumeStream() rebuilds the one assistant message with the whole text', async () => {
    slowGate = new Gate();
    const sessionId = await newSession();
    const wire = new Wire();
    const chat = chatFor(sessionId, wire);
    wire.dropAfter = { type: 'text-delta', count: 2 };
    await chat.sendMessage({ text: 'slow' });

    // The connection broke mid-message: the chat has part of it and says so.
    expect(chat.status).toBe('error');
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const partial = chat.messages[1]!;
    expect(assistantText(partial)).toBe('one two ');
    // The run goes on without the client (held mid-message by the gate).
    const run = await activeRun(sessionId);
    expect(run?.id).toBe(partial.id);

    const resumed = chat.resumeStream();
    // The replay brings the message streaming now, deltas included, before anything new comes.
    await vi.waitFor(() => expect(assistantText(chat.messages.at(-1))).toBe('one two three '), {
      timeout: 20_000,
      interval: 10,
    });
    slowGate.open();
    await resumed;

    expect(chat.error).toBeUndefined();
    expect(chat.status).toBe('ready');
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(chat.messages[1]!.id).toBe(partial.id);
    expect(assistantText(chat.messages[1])).toBe(TEXT.slow);
    expect(chat.messages[1]!.parts.filter((p) => p.type === 'text')).toHaveLength(1);

    // The transport used its default reconnect URL: ${api}/${chatId}/stream.
    const get = wire.requests.find((r) => r.method === 'GET')!;
    expect(get.url).toBe(`${url}/v1/sessions/${sessionId}/chat/${sessionId}/stream`);
    expect(get.chunks[0]).toMatchObject({ type: 'start', messageId: partial.id });
    expect(get.chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    expect((await server.runtime.runs.get(partial.id)).status).toBe('completed');
  });

  it('after a connection dropped during the continuation of an approval, the replay has the approval and the rest', async () => {
    reportGate = new Gate();
    const sessionId = await newSession();
    const wire = new Wire();
    const chat = chatFor(sessionId, wire);
    await chat.sendMessage({ text: 'report gated' });
    const [pending] = toolParts(chat.messages[1]);
    await chat.addToolApprovalResponse({ id: pending!.toolCallId, approved: true });
    wire.dropAfter = { type: 'tool-approval-response', count: 1 };
    await chat.sendMessage();
    // The approval was taken (the tool runs, held by the gate), then the connection broke.
    expect(chat.status).toBe('error');
    expect(['queued', 'running']).toContain((await activeRun(sessionId))?.status);

    const resumed = chat.resumeStream();
    // The replay (from the run's start) has come to the decision before the tool is let go.
    const replay = () => wire.requests.find((r) => r.method === 'GET')?.chunks.map((c) => c.type) ?? [];
    await vi.waitFor(() => expect(replay()).toContain('tool-approval-response'), { timeout: 20_000, interval: 10 });
    reportGate.open();
    await resumed;

    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const done = chat.messages[1]!;
    expect(done.parts.map((p) => p.type)).toEqual(['step-start', 'text', 'tool-send_report', 'step-start', 'text']);
    expect(toolParts(done)[0]).toMatchObject({
      state: 'output-available',
      output: { sent: true, to: 'gated@example.com' },
      approval: { id: pending!.toolCallId, approved: true },
    });
    expect(assistantText(done)).toBe(`${TEXT.report}The report was sent.`);
    const tools = replay().filter((t) => t.startsWith('tool-') && t !== 'tool-input-start' && t !== 'tool-input-delta');
    expect(tools).toEqual([
      'tool-input-available',
      'tool-approval-request',
      'tool-approval-response',
      'tool-output-available',
    ]);
  });

  it('replays a waiting run whole (a reload of a page that waits for an approval)', async () => {
    const sessionId = await newSession();
    await chatFor(sessionId).sendMessage({ text: 'report' });

    const fresh = chatFor(sessionId);
    await fresh.resumeStream();
    expect(fresh.error).toBeUndefined();
    expect(fresh.messages).toHaveLength(1);
    const [pending] = toolParts(fresh.messages[0]);
    expect(pending).toMatchObject({ type: 'tool-send_report', state: 'approval-requested' });
    expect(assistantText(fresh.messages[0])).toBe(TEXT.report);

    // …and the reloaded chat can approve it.
    await fresh.addToolApprovalResponse({ id: pending!.toolCallId, approved: true });
    await fresh.sendMessage();
    expect(fresh.error).toBeUndefined();
    expect(assistantText(fresh.messages[0])).toBe(`${TEXT.report}The report was sent.`);
  });
});

describe('tenancy', () => {
  it('serves a chat only to the tenant of its session', async () => {
    const tdir = mkdtempSync(join(tmpdir(), 'keel-chat-auth-'));
    const tstore = openSqliteStore({ path: join(tdir, 'keel.db') });
    const a = await createApiKey(tstore, { tenant: 'a' });
    const b = await createApiKey(tstore, { tenant: 'b' });
    const tserver = await startServer({
      store: tstore,
      config: chatConfig(),
      port: 0,
      host: '127.0.0.1',
      version: '0.0.0-test',
      leaseMs: 10_000,
    });
    try {
      const auth = (secret: string) => ({ authorization: `Bearer ${secret}` });
      const created = await fetch(`${tserver.url}/v1/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth(a.secret) },
        body: '{}',
      });
      const sessionId = ((await created.json()) as { id: string }).id;
      const api = `${tserver.url}/v1/sessions/${sessionId}/chat`;

      const mine = new Chat({
        id: sessionId,
        transport: new DefaultChatTransport<UIMessage>({ api, headers: auth(a.secret) }),
      });
      await mine.sendMessage({ text: 'hello' });
      expect(mine.error).toBeUndefined();
      expect(assistantText(mine.messages[1])).toBe(TEXT.hello);

      const theirs = new Chat({
        id: sessionId,
        transport: new DefaultChatTransport<UIMessage>({ api, headers: auth(b.secret) }),
      });
      await theirs.sendMessage({ text: 'hello' });
      expect(theirs.status).toBe('error');
      expect((await fetch(`${api}/stream`, { headers: auth(b.secret) })).status).toBe(404);
      expect((await fetch(`${api}/stream`)).status).toBe(401);
      expect((await fetch(`${api}/stream`, { headers: auth(a.secret) })).status).toBe(204);
    } finally {
      await tserver.close({ graceMs: 200 });
      await tstore.close();
      rmSync(tdir, { recursive: true, force: true });
    }
  });
});

describe('OpenAPI', () => {
  it('documents the chat paths', async () => {
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    expect(doc.paths['/v1/sessions/{id}/chat']?.post).toBeDefined();
    expect(doc.paths['/v1/sessions/{id}/chat/stream']?.get).toBeDefined();
    expect(doc.paths['/v1/sessions/{id}/chat/{chat_id}/stream']?.get).toBeDefined();
  });
});
