/**
 * callModel against the REAL provider packages (@ai-sdk/openai Chat Completions and Responses,
 * @ai-sdk/anthropic Messages), talking HTTP to a local server that replays each provider's
 * documented streaming wire format. What is verified: what Keel sends, how the stream is
 * normalized, and how every failure mode is classified.
 */
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import {
  APICallError,
  type JSONSchema7,
  type LanguageModelV4,
  type LanguageModelV4FunctionTool,
} from '@ai-sdk/provider';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { callModel, type ModelCallOptions, type ModelCallResult, type ModelDelta } from '../../src/model/call.ts';
import { ModelCallError } from '../../src/model/errors.ts';
import { toProviderPrompt } from '../../src/model/provider-prompt.ts';
import type { Usage } from '../../src/model/usage.ts';
import {
  httpError,
  sse,
  startWireServer,
  type RecordedRequest,
  type SseEvent,
  type WireServer,
} from '../support/wire-server.ts';

const SYSTEM = 'You are a terse assistant.';
const USER_TEXT = 'What is the weather in Paris?';
const TEXT_CHUNKS = ['Hello', ', wor', 'ld!'];
const TOOL_SCHEMA: JSONSchema7 = {
  type: 'object',
  properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const TOOL: LanguageModelV4FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city',
  inputSchema: TOOL_SCHEMA,
};
const TOOL_INPUT = { city: 'Paris', unit: 'celsius' };
const TOOL_ARG_CHUNKS = ['{"city"', ':"Paris",', '"unit":"celsius"}'];
const CREATED = 1_735_000_000;
/** Every format below reports these numbers in its own shape (Anthropic has no reasoning count). */
const USAGE = { input: 120, output: 30, cached: 100, reasoning: 8 };

const baseOptions: ModelCallOptions = {
  prompt: toProviderPrompt(SYSTEM, [{ id: 'u1', role: 'user', content: [{ type: 'text', text: USER_TEXT }] }]),
  maxOutputTokens: 256,
};

// ---------------------------------------------------------------------------------------------
// Wire formats
// ---------------------------------------------------------------------------------------------

interface WireFormat {
  name: string;
  path: string;
  model(baseURL: string): LanguageModelV4;
  /** A complete text response streamed as `chunks`. */
  text(chunks: string[]): SseEvent[];
  /** A complete response with one get_weather call whose arguments stream as `argChunks`. */
  toolCall(argChunks: string[]): SseEvent[];
  /** The opening of a text response up to (and including) the deltas: no completion signal. */
  textPrefix(chunks: string[]): SseEvent[];
  /** The provider's in-stream error event for a transient server-side failure. */
  streamError(): SseEvent;
  /** A 200 stream that fails before any output: the provider's preamble, then `streamError()`. */
  errorBeforeOutput(): SseEvent[];
  errors: {
    rateLimit: unknown;
    overflow: unknown;
    badRequest: unknown;
    unauthorized: unknown;
    server: { status: number; body: unknown };
  };
  expected: {
    usage: Usage;
    textFinish: [string, string | undefined];
    toolFinish: [string, string | undefined];
    responseId: string;
    responseModelId: string;
    toolCallId: string;
    streamErrorStatus: number;
  };
  /** What every request must carry: endpoint, auth, stream flag, system prompt, user message. */
  checkRequest(req: RecordedRequest): void;
  /** The tool definition as it must appear in the request body. */
  checkTools(body: Record<string, unknown>): void;
}

// --- OpenAI Chat Completions -----------------------------------------------------------------

const CHAT_ID = 'chatcmpl-Keel0001';
const OPENAI_MODEL = 'gpt-4o-mini-2024-07-18';

function chatChunk(delta: Record<string, unknown>, finishReason: string | null = null): SseEvent {
  return {
    data: {
      id: CHAT_ID,
      object: 'chat.completion.chunk',
      created: CREATED,
      model: OPENAI_MODEL,
      system_fingerprint: 'fp_keel',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      usage: null,
    },
  };
}

/** With stream_options.include_usage, usage arrives last, in a chunk with no choices. */
const chatUsage: SseEvent = {
  data: {
    id: CHAT_ID,
    object: 'chat.completion.chunk',
    created: CREATED,
    model: OPENAI_MODEL,
    system_fingerprint: 'fp_keel',
    choices: [],
    usage: {
      prompt_tokens: USAGE.input,
      completion_tokens: USAGE.output,
      total_tokens: USAGE.input + USAGE.output,
      prompt_tokens_details: { cached_tokens: USAGE.cached, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: USAGE.reasoning,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
      },
    },
  },
};
const DONE: SseEvent = { data: '[DONE]' };

const openaiErrors = {
  rateLimit: {
    error: {
      message:
        'Rate limit reached for gpt-4o-mini in organization org-keel on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 2s.',
      type: 'requests',
      param: null,
      code: 'rate_limit_exceeded',
    },
  },
  overflow: {
    error: {
      message:
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  },
  badRequest: {
    error: {
      message: 'Unrecognized request argument supplied: frobnicate',
      type: 'invalid_request_error',
      param: null,
      code: null,
    },
  },
  unauthorized: {
    error: {
      message:
        'Incorrect API key provided: test. You can find your API key at https://platform.openai.com/account/api-keys.',
      type: 'invalid_request_error',
      param: null,
      code: 'invalid_api_key',
    },
  },
  server: {
    status: 500,
    body: {
      error: {
        message: 'The server had an error while processing your request. Sorry about that!',
        type: 'server_error',
        param: null,
        code: null,
      },
    },
  },
};

function chatTextPrefix(chunks: string[]): SseEvent[] {
  return [
    chatChunk({ role: 'assistant', content: '', refusal: null }),
    ...chunks.map((c) => chatChunk({ content: c })),
  ];
}

const openaiChat: WireFormat = {
  name: 'OpenAI Chat Completions',
  path: '/v1/chat/completions',
  model: (baseURL) => createOpenAI({ baseURL, apiKey: 'test' }).chat('gpt-4o-mini'),
  textPrefix: chatTextPrefix,
  text: (chunks) => [...chatTextPrefix(chunks), chatChunk({}, 'stop'), chatUsage, DONE],
  toolCall: (argChunks) => [
    chatChunk({
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [
        { index: 0, id: 'call_Keel0001', type: 'function', function: { name: 'get_weather', arguments: '' } },
      ],
    }),
    ...argChunks.map((a) => chatChunk({ tool_calls: [{ index: 0, function: { arguments: a } }] })),
    chatChunk({}, 'tool_calls'),
    chatUsage,
    DONE,
  ],
  streamError: () => ({ data: openaiErrors.server.body }),
  errorBeforeOutput: () => [
    chatChunk({ role: 'assistant', content: '', refusal: null }),
    { data: openaiErrors.server.body },
  ],
  errors: openaiErrors,
  expected: {
    usage: {
      inputTokens: USAGE.input,
      outputTokens: USAGE.output,
      cachedInputTokens: USAGE.cached,
      reasoningTokens: USAGE.reasoning,
    },
    textFinish: ['stop', 'stop'],
    toolFinish: ['tool-calls', 'tool_calls'],
    responseId: CHAT_ID,
    responseModelId: OPENAI_MODEL,
    toolCallId: 'call_Keel0001',
    streamErrorStatus: 500,
  },
  checkRequest(req) {
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/v1/chat/completions');
    expect(req.headers.authorization).toBe('Bearer test');
    expect(req.headers['content-type']).toMatch(/^application\/json/);
    expect(req.body).toMatchObject({
      model: 'gpt-4o-mini',
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 256,
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: USER_TEXT },
      ],
    });
  },
  checkTools(body) {
    expect(body.tools).toEqual([
      {
        type: 'function',
        function: expect.objectContaining({
          name: 'get_weather',
          description: 'Current weather for a city',
          parameters: TOOL_SCHEMA,
        }),
      },
    ]);
  },
};

// --- OpenAI Responses ---------------------------------------------------------------------

const RESP_ID = 'resp_Keel0001';
const MSG_ID = 'msg_Keel0001';
const FC_ID = 'fc_Keel0001';

/** Builds Responses API events with increasing sequence numbers; `event:` names mirror `type`. */
function responsesEvents(
  build: (ev: (type: string, body: Record<string, unknown>) => SseEvent) => SseEvent[],
): SseEvent[] {
  let seq = 0;
  return build((type, body) => ({ event: type, data: { type, sequence_number: seq++, ...body } }));
}

function responseObject(status: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: RESP_ID,
    object: 'response',
    created_at: CREATED,
    status,
    error: null,
    incomplete_details: null,
    model: OPENAI_MODEL,
    output: [],
    parallel_tool_calls: true,
    store: true,
    usage: null,
    ...extra,
  };
}

const responsesUsage = {
  input_tokens: USAGE.input,
  input_tokens_details: { cached_tokens: USAGE.cached },
  output_tokens: USAGE.output,
  output_tokens_details: { reasoning_tokens: USAGE.reasoning },
  total_tokens: USAGE.input + USAGE.output,
};

function responsesTextPrefix(
  ev: (type: string, body: Record<string, unknown>) => SseEvent,
  chunks: string[],
): SseEvent[] {
  return [
    ev('response.created', { response: responseObject('in_progress') }),
    ev('response.in_progress', { response: responseObject('in_progress') }),
    ev('response.output_item.added', {
      output_index: 0,
      item: { id: MSG_ID, type: 'message', status: 'in_progress', role: 'assistant', content: [] },
    }),
    ev('response.content_part.added', {
      item_id: MSG_ID,
      output_index: 0,
      content_index: 0,
      part: { type: 'output_text', text: '', annotations: [] },
    }),
    ...chunks.map((delta) =>
      ev('response.output_text.delta', { item_id: MSG_ID, output_index: 0, content_index: 0, delta, logprobs: [] }),
    ),
  ];
}

const openaiResponses: WireFormat = {
  name: 'OpenAI Responses',
  path: '/v1/responses',
  model: (baseURL) => createOpenAI({ baseURL, apiKey: 'test' })('gpt-4o-mini'),
  textPrefix: (chunks) => responsesEvents((ev) => responsesTextPrefix(ev, chunks)),
  text: (chunks) =>
    responsesEvents((ev) => {
      const text = chunks.join('');
      const part = { type: 'output_text', text, annotations: [] };
      const message = { id: MSG_ID, type: 'message', status: 'completed', role: 'assistant', content: [part] };
      return [
        ...responsesTextPrefix(ev, chunks),
        ev('response.output_text.done', { item_id: MSG_ID, output_index: 0, content_index: 0, text, logprobs: [] }),
        ev('response.content_part.done', { item_id: MSG_ID, output_index: 0, content_index: 0, part }),
        ev('response.output_item.done', { output_index: 0, item: message }),
        ev('response.completed', {
          response: responseObject('completed', { output: [message], usage: responsesUsage }),
        }),
      ];
    }),
  toolCall: (argChunks) =>
    responsesEvents((ev) => {
      const args = argChunks.join('');
      const call = {
        id: FC_ID,
        type: 'function_call',
        status: 'completed',
        arguments: args,
        call_id: 'call_Keel0001',
        name: 'get_weather',
      };
      return [
        ev('response.created', { response: responseObject('in_progress') }),
        ev('response.in_progress', { response: responseObject('in_progress') }),
        ev('response.output_item.added', { output_index: 0, item: { ...call, status: 'in_progress', arguments: '' } }),
        ...argChunks.map((delta) =>
          ev('response.function_call_arguments.delta', { item_id: FC_ID, output_index: 0, delta }),
        ),
        ev('response.function_call_arguments.done', { item_id: FC_ID, output_index: 0, arguments: args }),
        ev('response.output_item.done', { output_index: 0, item: call }),
        ev('response.completed', { response: responseObject('completed', { output: [call], usage: responsesUsage }) }),
      ];
    }),
  streamError: () => ({
    event: 'error',
    data: {
      type: 'error',
      code: 'server_error',
      message: 'An error occurred while processing your request. You can retry your request.',
      param: null,
      sequence_number: 99,
    },
  }),
  // Without response.in_progress on purpose: once it has seen one, the package waits only 50 ms
  // for an early error before handing the stream over, which would make this timing-dependent.
  errorBeforeOutput: () => [
    ...responsesEvents((ev) => [ev('response.created', { response: responseObject('in_progress') })]),
    openaiResponses.streamError(),
  ],
  errors: {
    ...openaiErrors,
    overflow: {
      error: {
        message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
        type: 'invalid_request_error',
        param: 'input',
        code: 'context_length_exceeded',
      },
    },
  },
  expected: {
    usage: {
      inputTokens: USAGE.input,
      outputTokens: USAGE.output,
      cachedInputTokens: USAGE.cached,
      reasoningTokens: USAGE.reasoning,
    },
    textFinish: ['stop', undefined],
    toolFinish: ['tool-calls', undefined],
    responseId: RESP_ID,
    responseModelId: OPENAI_MODEL,
    toolCallId: 'call_Keel0001',
    streamErrorStatus: 500,
  },
  checkRequest(req) {
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/v1/responses');
    expect(req.headers.authorization).toBe('Bearer test');
    expect(req.body).toMatchObject({
      model: 'gpt-4o-mini',
      stream: true,
      max_output_tokens: 256,
      input: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: [{ type: 'input_text', text: USER_TEXT }] },
      ],
    });
  },
  checkTools(body) {
    expect(body.tools).toEqual([
      expect.objectContaining({
        type: 'function',
        name: 'get_weather',
        description: 'Current weather for a city',
        parameters: TOOL_SCHEMA,
      }),
    ]);
  },
};

// --- Anthropic Messages -------------------------------------------------------------------

const ANTHROPIC_MSG_ID = 'msg_01KeelKeelKeelKeel';
const ANTHROPIC_MODEL = 'claude-sonnet-4-5-20250929';

function anth(type: string, body: Record<string, unknown> = {}): SseEvent {
  return { event: type, data: { type, ...body } };
}

/** Anthropic reports uncached input in input_tokens; cache reads and writes come on top. */
const anthropicStart = anth('message_start', {
  message: {
    id: ANTHROPIC_MSG_ID,
    type: 'message',
    role: 'assistant',
    model: ANTHROPIC_MODEL,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: {
      input_tokens: USAGE.input - USAGE.cached,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: USAGE.cached,
      output_tokens: 1,
      service_tier: 'standard',
    },
  },
});

function anthropicEnd(stopReason: string): SseEvent[] {
  return [
    anth('message_delta', {
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: USAGE.output },
    }),
    anth('message_stop'),
  ];
}

function anthropicTextPrefix(chunks: string[]): SseEvent[] {
  return [
    anthropicStart,
    anth('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    anth('ping'),
    ...chunks.map((text) => anth('content_block_delta', { index: 0, delta: { type: 'text_delta', text } })),
  ];
}

const anthropic: WireFormat = {
  name: 'Anthropic Messages',
  path: '/v1/messages',
  model: (baseURL) => createAnthropic({ baseURL, apiKey: 'test' })('claude-sonnet-4-5'),
  textPrefix: anthropicTextPrefix,
  text: (chunks) => [
    ...anthropicTextPrefix(chunks),
    anth('content_block_stop', { index: 0 }),
    ...anthropicEnd('end_turn'),
  ],
  toolCall: (argChunks) => [
    anthropicStart,
    anth('content_block_start', {
      index: 0,
      content_block: { type: 'tool_use', id: 'toolu_01Keel', name: 'get_weather', input: {} },
    }),
    anth('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '' } }),
    ...argChunks.map((partial_json) =>
      anth('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json } }),
    ),
    anth('content_block_stop', { index: 0 }),
    ...anthropicEnd('tool_use'),
  ],
  streamError: () => anth('error', { error: { type: 'overloaded_error', message: 'Overloaded' } }),
  // Anthropic can fail a 200 stream before message_start.
  errorBeforeOutput: () => [anthropic.streamError()],
  errors: {
    rateLimit: {
      type: 'error',
      error: {
        type: 'rate_limit_error',
        message: 'This request would exceed the rate limit for your organization of 50 requests per minute.',
      },
    },
    overflow: {
      type: 'error',
      error: { type: 'invalid_request_error', message: 'prompt is too long: 208315 tokens > 200000 maximum' },
    },
    badRequest: {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message:
          'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row',
      },
    },
    unauthorized: { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } },
    server: { status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } },
  },
  expected: {
    usage: {
      inputTokens: USAGE.input,
      outputTokens: USAGE.output,
      cachedInputTokens: USAGE.cached,
      reasoningTokens: 0,
    },
    textFinish: ['stop', 'end_turn'],
    toolFinish: ['tool-calls', 'tool_use'],
    responseId: ANTHROPIC_MSG_ID,
    responseModelId: ANTHROPIC_MODEL,
    toolCallId: 'toolu_01Keel',
    streamErrorStatus: 529,
  },
  checkRequest(req) {
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/v1/messages');
    expect(req.headers['x-api-key']).toBe('test');
    expect(req.headers['anthropic-version']).toBe('2023-06-01');
    expect(req.body).toMatchObject({
      model: 'claude-sonnet-4-5',
      stream: true,
      max_tokens: 256,
      system: [{ type: 'text', text: SYSTEM }],
      messages: [{ role: 'user', content: [{ type: 'text', text: USER_TEXT }] }],
    });
  },
  checkTools(body) {
    expect(body.tools).toEqual([
      expect.objectContaining({
        name: 'get_weather',
        description: 'Current weather for a city',
        input_schema: TOOL_SCHEMA,
      }),
    ]);
  },
};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

let server: WireServer;

beforeAll(async () => {
  server = await startWireServer();
});

afterAll(async () => {
  await server.close();
});

beforeEach(() => {
  server.reset();
});

interface Run {
  result: ModelCallResult;
  deltas: ModelDelta[];
}

async function run(fmt: WireFormat, options: Partial<ModelCallOptions> = {}): Promise<Run> {
  const deltas: ModelDelta[] = [];
  const result = await callModel(
    fmt.model(`${server.url}/v1`),
    { ...baseOptions, ...options },
    new AbortController().signal,
    (d) => deltas.push(d),
  );
  return { result, deltas };
}

async function failure(promise: Promise<unknown>): Promise<ModelCallError> {
  const error = await promise.then(
    () => {
      throw new Error('expected callModel to reject');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ModelCallError);
  return error as ModelCallError;
}

async function fails(
  fmt: WireFormat,
  onDelta?: (d: ModelDelta) => void,
  signal = new AbortController().signal,
): Promise<ModelCallError> {
  return failure(callModel(fmt.model(`${server.url}/v1`), baseOptions, signal, onDelta));
}

const textOf = (deltas: ModelDelta[]) => deltas.flatMap((d) => (d.kind === 'text' ? [d.delta] : []));

/** One request per call: callModel never retries and the providers must not either. */
function onlyRequest(fmt: WireFormat): RecordedRequest {
  expect(server.requests).toHaveLength(1);
  const req = server.requests[0]!;
  fmt.checkRequest(req);
  return req;
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

describe.each([openaiChat, openaiResponses, anthropic])('callModel over $name', (fmt) => {
  it('streams text deltas and normalizes the result', async () => {
    server.respond(sse(fmt.text(TEXT_CHUNKS)));
    const { result, deltas } = await run(fmt);

    expect(textOf(deltas)).toEqual(TEXT_CHUNKS);
    expect(deltas.every((d) => d.kind === 'text')).toBe(true);
    expect(result.content).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    expect(result.usage).toEqual(fmt.expected.usage);
    expect(result.finishReason).toBe(fmt.expected.textFinish[0]);
    expect(result.rawFinishReason).toBe(fmt.expected.textFinish[1]);
    expect(result.responseId).toBe(fmt.expected.responseId);
    expect(result.responseModelId).toBe(fmt.expected.responseModelId);
    expect(result.warnings).toEqual([]);
    expect(result.timing.firstChunkMs).toBeGreaterThanOrEqual(0);

    const req = onlyRequest(fmt);
    expect((req.body as Record<string, unknown>).tools).toBeUndefined();
  });

  it('assembles a streamed tool call and sends the tool schema', async () => {
    server.respond(sse(fmt.toolCall(TOOL_ARG_CHUNKS)));
    const { result, deltas } = await run(fmt, { tools: [TOOL] });

    expect(result.content).toEqual([
      { type: 'tool-call', toolCallId: fmt.expected.toolCallId, toolName: 'get_weather', input: TOOL_INPUT },
    ]);
    expect(result.finishReason).toBe(fmt.expected.toolFinish[0]);
    expect(result.rawFinishReason).toBe(fmt.expected.toolFinish[1]);
    expect(result.usage).toEqual(fmt.expected.usage);

    const inputDeltas = deltas.filter((d) => d.kind === 'tool-input');
    expect(inputDeltas.length).toBeGreaterThan(0);
    for (const d of inputDeltas)
      expect(d).toMatchObject({ toolCallId: fmt.expected.toolCallId, toolName: 'get_weather' });
    expect(inputDeltas.map((d) => d.delta).join('')).toBe(TOOL_ARG_CHUNKS.join(''));

    const req = onlyRequest(fmt);
    fmt.checkTools(req.body as Record<string, unknown>);
  });

  it('rejects a mid-stream error as transient, keeping the text received before it', async () => {
    server.respond(sse([...fmt.textPrefix(TEXT_CHUNKS), fmt.streamError()]));
    const seen: string[] = [];
    const e = await fails(fmt, (d) => d.kind === 'text' && seen.push(d.delta));

    expect(e.kind).toBe('transient');
    expect(e.status).toBe(fmt.expected.streamErrorStatus);
    expect(e.partial).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    expect(seen).toEqual(TEXT_CHUNKS);
    onlyRequest(fmt);
  });

  it('rejects a stream error before any output as transient with nothing partial', async () => {
    server.respond(sse(fmt.errorBeforeOutput()));
    const e = await fails(fmt);

    expect(e.kind).toBe('transient');
    expect(e.status).toBe(fmt.expected.streamErrorStatus);
    expect(e.partial).toEqual([]);
    // Both packages peek at the stream and throw from doStream itself when it fails before any output.
    expect(APICallError.isInstance(e.cause)).toBe(true);
    onlyRequest(fmt);
  });

  it.each([
    ['retry-after', '2', 2000],
    ['retry-after-ms', '150', 150],
  ])('classifies HTTP 429 with %s: %s as transient with retryAfterMs', async (header, value, ms) => {
    server.respond(httpError(429, fmt.errors.rateLimit, { [header]: value, 'x-request-id': 'req_keel' }));
    const e = await fails(fmt);

    expect(e.kind).toBe('transient');
    expect(e.status).toBe(429);
    expect(e.retryAfterMs).toBe(ms);
    expect(e.partial).toEqual([]);
    onlyRequest(fmt);
  });

  it('classifies an overloaded / 5xx response as transient', async () => {
    server.respond(httpError(fmt.errors.server.status, fmt.errors.server.body));
    const e = await fails(fmt);

    expect(e.kind).toBe('transient');
    expect(e.status).toBe(fmt.errors.server.status);
    expect(e.retryAfterMs).toBeUndefined();
    onlyRequest(fmt);
  });

  it('classifies HTTP 400 context overflow as context_overflow', async () => {
    server.respond(httpError(400, fmt.errors.overflow));
    const e = await fails(fmt);

    expect(e.kind).toBe('context_overflow');
    expect(e.status).toBe(400);
    onlyRequest(fmt);
  });

  it.each([
    [400, 'badRequest'],
    [401, 'unauthorized'],
  ] as const)('classifies a plain HTTP %i as fatal', async (status, which) => {
    server.respond(httpError(status, fmt.errors[which]));
    const e = await fails(fmt);

    expect(e.kind).toBe('fatal');
    expect(e.status).toBe(status);
    expect(e.message).toBe((fmt.errors[which] as { error: { message: string } }).error.message);
    onlyRequest(fmt);
  });

  it('aborts while the server hangs mid-stream: aborted, partial text kept, connection closed', async () => {
    server.respond(sse(fmt.textPrefix(TEXT_CHUNKS), { after: 'hang' }));
    const controller = new AbortController();
    let received = '';
    let allReceived!: () => void;
    const gotAll = new Promise<void>((r) => (allReceived = r));
    const pending = fails(
      fmt,
      (d) => {
        if (d.kind !== 'text') return;
        received += d.delta;
        if (received === TEXT_CHUNKS.join('')) allReceived();
      },
      controller.signal,
    );

    await gotAll;
    // callModel is now blocked reading a stream the server will never finish.
    controller.abort();
    const e = await pending;

    expect(e.kind).toBe('aborted');
    expect(e.partial).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    const req = onlyRequest(fmt);
    await req.closed;
    expect(req.closedByClient).toBe(true);
  });

  it('aborts on the first delta: stops reading at once and closes the connection', async () => {
    server.respond(sse(fmt.textPrefix(TEXT_CHUNKS), { after: 'hang' }));
    const controller = new AbortController();
    const e = await fails(fmt, (d) => d.kind === 'text' && controller.abort(), controller.signal);

    expect(e.kind).toBe('aborted');
    expect(e.partial).toEqual([{ type: 'text', text: TEXT_CHUNKS[0] }]);
    const req = onlyRequest(fmt);
    await req.closed;
    expect(req.closedByClient).toBe(true);
  });

  it('aborts before the first event arrives', async () => {
    server.respond(sse([], { after: 'hang' }));
    const controller = new AbortController();
    const pending = fails(fmt, undefined, controller.signal);
    await vi.waitFor(() => expect(server.requests).toHaveLength(1), { interval: 5 });
    await server.requests[0]!.allEventsWritten;
    controller.abort();
    const e = await pending;

    expect(e.kind).toBe('aborted');
    expect(e.partial).toEqual([]);
    await server.requests[0]!.closed;
    expect(server.requests[0]!.closedByClient).toBe(true);
  });

  it('rejects a dropped connection as transient, keeping the partial text', async () => {
    server.respond(sse(fmt.textPrefix(TEXT_CHUNKS), { after: 'drop' }));
    const e = await fails(fmt);

    expect(e.kind).toBe('transient');
    expect(e.partial).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    onlyRequest(fmt);
  });

  it('rejects a stream that ends cleanly without a completion signal as transient', async () => {
    server.respond(sse(fmt.textPrefix(TEXT_CHUNKS), { after: 'end' }));
    const e = await fails(fmt);

    expect(e.kind).toBe('transient');
    expect(e.partial).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    onlyRequest(fmt);
  });

  it('streams events that arrive with delays between them', async () => {
    const events = fmt.text(TEXT_CHUNKS).map((e, i) => (i > 0 ? { ...e, delayMs: 10 } : e));
    server.respond(sse(events));
    const { result, deltas } = await run(fmt);

    expect(textOf(deltas)).toEqual(TEXT_CHUNKS);
    expect(result.content).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    onlyRequest(fmt);
  });
});

describe('OpenAI Responses specifics', () => {
  const fmt = openaiResponses;

  it('rejects response.failed after some output as transient, keeping the partial text', async () => {
    const events = responsesEvents((ev) => [
      ...responsesTextPrefix(ev, TEXT_CHUNKS),
      ev('response.failed', {
        response: responseObject('failed', {
          error: { code: 'server_error', message: 'The model failed to generate a response.' },
          usage: responsesUsage,
        }),
      }),
    ]);
    server.respond(sse(events));
    const e = await fails(fmt);

    expect(e.kind).toBe('transient');
    expect(e.message).toBe('The model failed to generate a response.');
    expect(e.partial).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    onlyRequest(fmt);
  });

  it('maps response.incomplete (max_output_tokens) to finishReason length', async () => {
    const events = responsesEvents((ev) => [
      ...responsesTextPrefix(ev, TEXT_CHUNKS),
      ev('response.output_item.done', {
        output_index: 0,
        item: { id: MSG_ID, type: 'message', status: 'incomplete', role: 'assistant', content: [] },
      }),
      ev('response.incomplete', {
        response: responseObject('incomplete', {
          incomplete_details: { reason: 'max_output_tokens' },
          usage: responsesUsage,
        }),
      }),
    ]);
    server.respond(sse(events));
    const { result } = await run(fmt);

    expect(result.finishReason).toBe('length');
    expect(result.rawFinishReason).toBe('max_output_tokens');
    expect(result.content).toEqual([{ type: 'text', text: TEXT_CHUNKS.join('') }]);
    onlyRequest(fmt);
  });
});

describe('Anthropic specifics', () => {
  const fmt = anthropic;

  it('classifies "input length and `max_tokens` exceed context limit" as context_overflow', async () => {
    // Reachable without a huge prompt: the package defaults max_tokens to the model's maximum (64000 here).
    server.respond(
      httpError(400, {
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message:
            'input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, decrease input length or `max_tokens` and try again',
        },
      }),
    );
    const e = await failure(
      callModel(fmt.model(`${server.url}/v1`), { prompt: baseOptions.prompt }, new AbortController().signal),
    );

    expect(e.kind).toBe('context_overflow');
    expect(e.status).toBe(400);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]!.body).toMatchObject({ max_tokens: 64000 });
  });

  it('keeps thinking as reasoning with its signature, then text and a tool call, in stream order', async () => {
    const signature = 'EqQBCkYIBxgCKkBKeelSignature==';
    server.respond(
      sse([
        anthropicStart,
        anth('content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '' } }),
        anth('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'The user wants ' } }),
        anth('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'the weather.' } }),
        anth('content_block_delta', { index: 0, delta: { type: 'signature_delta', signature } }),
        anth('content_block_stop', { index: 0 }),
        anth('content_block_start', { index: 1, content_block: { type: 'text', text: '' } }),
        anth('content_block_delta', { index: 1, delta: { type: 'text_delta', text: 'Checking.' } }),
        anth('content_block_stop', { index: 1 }),
        anth('content_block_start', {
          index: 2,
          content_block: { type: 'tool_use', id: 'toolu_01Keel', name: 'get_weather', input: {} },
        }),
        anth('content_block_delta', {
          index: 2,
          delta: { type: 'input_json_delta', partial_json: JSON.stringify(TOOL_INPUT) },
        }),
        anth('content_block_stop', { index: 2 }),
        ...anthropicEnd('tool_use'),
      ]),
    );
    const { result, deltas } = await run(fmt, { tools: [TOOL] });

    expect(deltas.filter((d) => d.kind === 'reasoning').map((d) => d.delta)).toEqual([
      'The user wants ',
      'the weather.',
    ]);
    expect(result.content).toEqual([
      { type: 'reasoning', text: 'The user wants the weather.', providerMetadata: { anthropic: { signature } } },
      { type: 'text', text: 'Checking.' },
      { type: 'tool-call', toolCallId: 'toolu_01Keel', toolName: 'get_weather', input: TOOL_INPUT },
    ]);
    expect(result.finishReason).toBe('tool-calls');
    onlyRequest(fmt);
  });
});
