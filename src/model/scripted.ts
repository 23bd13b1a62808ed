import {
  APICallError,
  type LanguageModelV4,
  type LanguageModelV4CallOptions,
  type LanguageModelV4Content,
  type LanguageModelV4GenerateResult,
  type LanguageModelV4StreamPart,
  type LanguageModelV4StreamResult,
  type LanguageModelV4Usage,
} from '@ai-sdk/provider';
import { z } from 'zod';
import type { JsonValue } from './messages.ts';

/**
 * A deterministic model for tests and demos. It implements the AI SDK LanguageModelV4
 * interface, so everything downstream of it runs exactly as with a real provider.
 * The script format is plain JSON (see `scriptSchema`), so scripts can live in files.
 */
export interface ScriptedToolCall {
  id?: string;
  name: string;
  /** An object is sent as JSON; a string is sent verbatim (to script malformed input). */
  input: JsonValue;
}

export interface ScriptedError {
  kind: 'rate_limit' | 'overloaded' | 'server' | 'context_overflow' | 'bad_request' | 'network';
  message?: string;
  /** Sent as a retry-after-ms header. */
  retryAfterMs?: number;
  /** Fail mid-stream after this many text chunks instead of before the response. */
  afterChunks?: number;
}

export interface ScriptedResponse {
  text?: string;
  /** Explicit text deltas; by default `text` is streamed word by word. */
  chunks?: string[];
  reasoning?: string;
  /** Makes the reasoning opaque: carried as provider metadata, as Anthropic signatures are. */
  reasoningSignature?: string;
  toolCalls?: ScriptedToolCall[];
  usage?: { input?: number; output?: number; cached?: number; reasoning?: number };
  finishReason?: 'stop' | 'length' | 'content-filter' | 'tool-calls' | 'error' | 'other';
  /** Milliseconds before the first part, and between parts. */
  delayMs?: number;
  chunkDelayMs?: number;
  responseId?: string;
  error?: ScriptedError;
}

export type ScriptEntry = ScriptedResponse | ((call: LanguageModelV4CallOptions, index: number) => ScriptedResponse);

const json: z.ZodType<JsonValue> = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.number(), z.string(), z.array(json), z.record(z.string(), json)]),
);

export const scriptSchema = z.array(
  z.strictObject({
    text: z.string().optional(),
    chunks: z.array(z.string()).optional(),
    reasoning: z.string().optional(),
    reasoningSignature: z.string().optional(),
    toolCalls: z.array(z.strictObject({ id: z.string().optional(), name: z.string().min(1), input: json })).optional(),
    usage: z
      .strictObject({
        input: z.number().int().nonnegative().optional(),
        output: z.number().int().nonnegative().optional(),
        cached: z.number().int().nonnegative().optional(),
        reasoning: z.number().int().nonnegative().optional(),
      })
      .optional(),
    finishReason: z.enum(['stop', 'length', 'content-filter', 'tool-calls', 'error', 'other']).optional(),
    delayMs: z.number().nonnegative().optional(),
    chunkDelayMs: z.number().nonnegative().optional(),
    responseId: z.string().optional(),
    error: z
      .strictObject({
        kind: z.enum(['rate_limit', 'overloaded', 'server', 'context_overflow', 'bad_request', 'network']),
        message: z.string().optional(),
        retryAfterMs: z.number().nonnegative().optional(),
        afterChunks: z.number().int().nonnegative().optional(),
      })
      .optional(),
  }),
);

export interface ScriptedModelOptions {
  provider?: string;
  modelId?: string;
  /** Start over when the script runs out, instead of failing. */
  loop?: boolean;
  /** Keep every call in `calls` (default true; a long benchmark turns it off). */
  recordCalls?: boolean;
}

export class ScriptExhaustedError extends Error {
  constructor(calls: number) {
    super(`scripted model: the script has no response left for call #${calls + 1}`);
    this.name = 'ScriptExhaustedError';
  }
}

const STATUS: Record<ScriptedError['kind'], number> = {
  rate_limit: 429,
  overloaded: 529,
  server: 500,
  context_overflow: 400,
  bad_request: 400,
  network: 0,
};

const DEFAULT_MESSAGE: Record<ScriptedError['kind'], string> = {
  rate_limit: 'Rate limit exceeded',
  overloaded: 'Overloaded',
  server: 'Internal server error',
  context_overflow: 'prompt is too long: the input exceeds the maximum context length',
  bad_request: 'Invalid request',
  network: 'fetch failed',
};

function makeError(e: ScriptedError, modelId: string): Error {
  const message = e.message ?? DEFAULT_MESSAGE[e.kind];
  if (e.kind === 'network') {
    return new TypeError(message, { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
  }
  const status = STATUS[e.kind];
  return new APICallError({
    message,
    url: `scripted://${modelId}`,
    requestBodyValues: {},
    statusCode: status,
    responseHeaders: e.retryAfterMs !== undefined ? { 'retry-after-ms': String(e.retryAfterMs) } : {},
    responseBody: JSON.stringify({ error: { message } }),
    isRetryable: status === 429 || status >= 500,
  });
}

/** The error a provider streams mid-response (a plain object, as AI SDK providers emit). */
function streamError(e: ScriptedError): unknown {
  const message = e.message ?? DEFAULT_MESSAGE[e.kind];
  const status = STATUS[e.kind];
  return {
    message,
    type: e.kind === 'overloaded' ? 'overloaded_error' : e.kind,
    statusCode: status || undefined,
    isRetryable: status === 429 || status >= 500 || e.kind === 'network',
  };
}

function usageOf(r: ScriptedResponse): LanguageModelV4Usage {
  const input = r.usage?.input ?? 10;
  const output = r.usage?.output ?? 5;
  const cached = r.usage?.cached ?? 0;
  const reasoning = r.usage?.reasoning ?? 0;
  return {
    inputTokens: { total: input, noCache: input - cached, cacheRead: cached, cacheWrite: 0 },
    outputTokens: { total: output, text: output - reasoning, reasoning },
  };
}

function textChunks(r: ScriptedResponse): string[] {
  if (r.chunks) return r.chunks;
  if (!r.text) return [];
  return r.text.match(/\S+\s*|\s+/g) ?? [r.text];
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0) return signal?.aborted ? Promise.reject(abortError(signal)) : Promise.resolve();
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const onAbort = () => {
      clearTimeout(t);
      reject(abortError(signal!));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The operation was aborted.', 'AbortError');
}

export class ScriptedModel implements LanguageModelV4 {
  readonly specificationVersion = 'v4' as const;
  readonly provider: string;
  readonly modelId: string;
  readonly supportedUrls = {};
  /** Every call the model received, in order: what a test asserts the loop sent. */
  readonly calls: LanguageModelV4CallOptions[] = [];
  private readonly script: ScriptEntry[];
  private readonly loop: boolean;
  private next = 0;
  private callCount = 0;
  private readonly recordCalls: boolean;

  constructor(script: ScriptEntry[], options: ScriptedModelOptions = {}) {
    this.script = script;
    this.provider = options.provider ?? 'scripted';
    this.modelId = options.modelId ?? 'scripted-1';
    this.loop = options.loop ?? false;
    this.recordCalls = options.recordCalls ?? true;
  }

  /** Responses not yet used. */
  get remaining(): number {
    return this.loop ? Infinity : this.script.length - this.next;
  }

  private take(options: LanguageModelV4CallOptions): ScriptedResponse {
    const index = this.callCount++;
    if (this.recordCalls) this.calls.push(options);
    if (this.next >= this.script.length) {
      if (!this.loop || this.script.length === 0) throw new ScriptExhaustedError(index);
      this.next = 0;
    }
    const entry = this.script[this.next++]!;
    return typeof entry === 'function' ? entry(options, index) : entry;
  }

  private toolCallId(r: ScriptedResponse, i: number): string {
    return r.toolCalls?.[i]?.id ?? `call_${this.callCount}_${i}`;
  }

  async doGenerate(options: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> {
    const r = this.take(options);
    await delay(r.delayMs ?? 0, options.abortSignal);
    if (r.error) throw makeError(r.error, this.modelId);
    const content: LanguageModelV4Content[] = [];
    if (r.reasoning !== undefined) {
      content.push({
        type: 'reasoning',
        text: r.reasoning,
        ...(r.reasoningSignature ? { providerMetadata: { scripted: { signature: r.reasoningSignature } } } : {}),
      });
    }
    const text = textChunks(r).join('');
    if (text) content.push({ type: 'text', text });
    (r.toolCalls ?? []).forEach((c, i) =>
      content.push({
        type: 'tool-call',
        toolCallId: this.toolCallId(r, i),
        toolName: c.name,
        input: typeof c.input === 'string' ? c.input : JSON.stringify(c.input),
      }),
    );
    return {
      content,
      finishReason: { unified: r.finishReason ?? (r.toolCalls?.length ? 'tool-calls' : 'stop'), raw: undefined },
      usage: usageOf(r),
      response: { id: r.responseId ?? `resp_${this.callCount}`, modelId: this.modelId },
      warnings: [],
    };
  }

  async doStream(options: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
    const r = this.take(options);
    const signal = options.abortSignal;
    await delay(r.delayMs ?? 0, signal);
    if (r.error && r.error.afterChunks === undefined) throw makeError(r.error, this.modelId);

    const parts: LanguageModelV4StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'response-metadata', id: r.responseId ?? `resp_${this.callCount}`, modelId: this.modelId },
    ];
    if (r.reasoning !== undefined) {
      const providerMetadata = r.reasoningSignature ? { scripted: { signature: r.reasoningSignature } } : undefined;
      parts.push({ type: 'reasoning-start', id: 'r0' });
      parts.push({ type: 'reasoning-delta', id: 'r0', delta: r.reasoning });
      parts.push({ type: 'reasoning-end', id: 'r0', ...(providerMetadata ? { providerMetadata } : {}) });
    }
    const chunks = textChunks(r);
    const failAt = r.error?.afterChunks;
    if (chunks.length > 0 || failAt !== undefined) {
      parts.push({ type: 'text-start', id: 't0' });
      chunks.forEach((delta, i) => {
        if (i === failAt) parts.push({ type: 'error', error: streamError(r.error!) });
        parts.push({ type: 'text-delta', id: 't0', delta });
      });
      if (failAt !== undefined && failAt >= chunks.length) parts.push({ type: 'error', error: streamError(r.error!) });
      parts.push({ type: 'text-end', id: 't0' });
    }
    (r.toolCalls ?? []).forEach((c, i) => {
      const id = this.toolCallId(r, i);
      const input = typeof c.input === 'string' ? c.input : JSON.stringify(c.input);
      parts.push({ type: 'tool-input-start', id, toolName: c.name });
      parts.push({ type: 'tool-input-delta', id, delta: input });
      parts.push({ type: 'tool-input-end', id });
      parts.push({ type: 'tool-call', toolCallId: id, toolName: c.name, input });
    });
    parts.push({
      type: 'finish',
      usage: usageOf(r),
      finishReason: { unified: r.finishReason ?? (r.toolCalls?.length ? 'tool-calls' : 'stop'), raw: undefined },
    });

    const chunkDelay = r.chunkDelayMs ?? 0;
    let i = 0;
    const stream = new ReadableStream<LanguageModelV4StreamPart>({
      async pull(controller) {
        if (i > 0 && chunkDelay > 0) await delay(chunkDelay, signal);
        else if (signal?.aborted) throw abortError(signal);
        const part = parts[i++];
        if (part === undefined) controller.close();
        else {
          controller.enqueue(part);
          // A provider stream ends after an error part.
          if (part.type === 'error') controller.close();
        }
      },
    });
    return { stream };
  }
}
