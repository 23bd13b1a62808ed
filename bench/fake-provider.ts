/**
 * A fake provider that enforces a real rate limit, as a provider's API does: at most `requests`
 * requests started in any sliding window of `windowMs`, and at most `concurrency` in flight. A
 * request over either limit is answered 429 with `retry-after-ms` (thrown as the AI SDK's
 * APICallError, as a provider's HTTP 429 is). Counts what it saw: calls, 429s, the peak of
 * requests in flight. Used by bench/flow-control.ts and test/flow-control.
 */
import {
  APICallError,
  type LanguageModelV4,
  type LanguageModelV4CallOptions,
  type LanguageModelV4StreamPart,
  type LanguageModelV4StreamResult,
} from '@ai-sdk/provider';

export interface FakeProviderOptions {
  provider?: string;
  modelId?: string;
  /** Requests allowed per window (undefined: no rate limit). */
  requests?: number;
  windowMs?: number;
  /** Requests allowed in flight (undefined: no limit). */
  concurrency?: number;
  /** How long each answer takes. */
  latencyMs?: number;
  /** Usage reported per answer. */
  inputTokens?: number;
  outputTokens?: number;
}

export class FakeProvider implements LanguageModelV4 {
  readonly specificationVersion = 'v4' as const;
  readonly provider: string;
  readonly modelId: string;
  readonly supportedUrls = {};
  private readonly o: FakeProviderOptions;
  private readonly starts: number[] = [];
  inFlight = 0;
  maxInFlight = 0;
  calls = 0;
  served = 0;
  rejected = 0;
  /** Times of the served requests (their start). */
  readonly servedAt: number[] = [];
  /** The last user message's text of each served request, in order. */
  readonly prompts: string[] = [];
  /** Answers the next `n` requests 429 with this retry-after (tests). */
  fail429: { n: number; retryAfterMs: number } | undefined;

  constructor(o: FakeProviderOptions = {}) {
    this.o = o;
    this.provider = o.provider ?? 'fake';
    this.modelId = o.modelId ?? 'limited-1';
  }

  private refuse(retryAfterMs: number, why: string): never {
    this.rejected++;
    throw new APICallError({
      message: `Rate limit exceeded (${why})`,
      url: `fake://${this.modelId}`,
      requestBodyValues: {},
      statusCode: 429,
      responseHeaders: { 'retry-after-ms': String(Math.max(1, Math.ceil(retryAfterMs))) },
      responseBody: JSON.stringify({ error: { message: 'Rate limit exceeded', type: 'rate_limit_error' } }),
      isRetryable: true,
    });
  }

  doGenerate(): never {
    throw new Error('FakeProvider streams only');
  }

  async doStream(options: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
    this.calls++;
    const now = performance.now();
    const windowMs = this.o.windowMs ?? 60_000;
    while (this.starts.length > 0 && this.starts[0]! <= now - windowMs) this.starts.shift();
    if (this.o.requests !== undefined && this.starts.length >= this.o.requests)
      this.refuse(this.starts[0]! + windowMs - now, 'requests');
    if (this.o.concurrency !== undefined && this.inFlight >= this.o.concurrency) this.refuse(100, 'concurrency');
    if (this.fail429 && this.fail429.n > 0) {
      this.fail429.n--;
      this.refuse(this.fail429.retryAfterMs, 'forced');
    }
    this.starts.push(now);
    const last = [...options.prompt].reverse().find((m) => m.role === 'user');
    this.prompts.push(
      last && Array.isArray(last.content) ? last.content.map((p) => ('text' in p ? p.text : '')).join('') : '',
    );
    this.servedAt.push(Date.now());
    this.served++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    let done = false;
    const finish = () => {
      if (!done) {
        done = true;
        this.inFlight--;
      }
    };
    const latency = this.o.latencyMs ?? 0;
    const signal = options.abortSignal;
    const parts: LanguageModelV4StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'text-start', id: 't0' },
      { type: 'text-delta', id: 't0', delta: 'ok' },
      { type: 'text-end', id: 't0' },
      {
        type: 'finish',
        usage: {
          inputTokens: {
            total: this.o.inputTokens ?? 10,
            noCache: undefined,
            cacheRead: undefined,
            cacheWrite: undefined,
          },
          outputTokens: { total: this.o.outputTokens ?? 5, text: undefined, reasoning: undefined },
        },
        finishReason: { unified: 'stop', raw: 'stop' },
      },
    ];
    let i = 0;
    const stream = new ReadableStream<LanguageModelV4StreamPart>({
      async pull(controller) {
        if (i === 0 && latency > 0) {
          await new Promise<void>((resolve, reject) => {
            const t = setTimeout(resolve, latency);
            signal?.addEventListener(
              'abort',
              () => {
                clearTimeout(t);
                reject(signal.reason);
              },
              { once: true },
            );
          }).catch((e: unknown) => {
            finish();
            throw e;
          });
        }
        const part = parts[i++];
        if (part === undefined) {
          finish();
          controller.close();
        } else controller.enqueue(part);
      },
      cancel() {
        finish();
      },
    });
    return { stream };
  }
}
