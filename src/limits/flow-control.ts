import { randomUUID } from 'node:crypto';
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { classifyModelError } from '../model/errors.ts';
import type { Clock } from '../runs/clock.ts';
import type { LimitStoreOps } from '../store/index.ts';
import { decideLimit } from '../flow-control/decide-limit.ts';

/** A model's limits (per model id, or per provider with `provider:*`, or `*`). */
export interface ModelLimit {
  /** Requests in flight at once, across every worker and process on the store. */
  concurrency?: number;
  /** Requests started per window (a minute by default). */
  requestsPerMinute?: number;
  /** Tokens (input estimate + max output, settled to the actual usage) per window. */
  tokensPerMinute?: number;
  /** The window's length (default 60 000 ms): shorter windows for tests and benchmarks. */
  windowMs?: number;
}

/** Keys: `provider:modelId` (e.g. `openai:gpt-4.1`), `provider:*`, or `*`. */
export type ModelLimits = Record<string, ModelLimit>;

/** Who goes first when several wait: `interactive` (0) before `batch` (100); a number: lower first. */
export type Priority = 'interactive' | 'batch' | number;

export const rankOf = (p: Priority | undefined): number =>
  p === undefined || p === 'interactive' ? 0 : p === 'batch' ? 100 : p;

export interface FlowControlOptions {
  /** A wait longer than this lets go of the worker slot (the run waits outside, keeping its lease). Default 1000 ms. */
  holdSlotMs?: number;
  /** A slot's lease, renewed while the call runs: a crashed holder's slot frees after it. Default 30 000 ms. */
  slotLeaseMs?: number;
  /** Longest pause between two tries while waiting (a release in another process is seen within it). Default 100 ms. */
  pollMs?: number;
  /** Pause after a 429 that says no retry-after. Default 1000 ms. */
  defaultPauseMs?: number;
}

export interface FlowControlObserver {
  /** A request waited this long for its limits (only when it waited). */
  waited?(key: string, seconds: number): void;
  /** A provider answered 429. */
  rateLimited?(key: string): void;
}

/** What a limited call needs to know about the run making it (from the runs layer). */
export interface CallContext {
  priority?: Priority;
  /** Waits for `p` without holding a worker slot. */
  waitOutside?<T>(p: Promise<T>): Promise<T>;
}

/** The limit key that applies to a model, or undefined: the most specific configured key wins. */
export function limitKeyFor(limits: ModelLimits, provider: string, modelId: string): string | undefined {
  const base = provider.split('.')[0]!;
  for (const k of [`${provider}:${modelId}`, `${base}:${modelId}`, `${provider}:*`, `${base}:*`, '*'])
    if (limits[k]) return k;
  return undefined;
}

/** A rough token estimate of a request: its prompt's characters / 4, plus its max output. */
export function estimateTokens(options: LanguageModelV4CallOptions, defaultMaxOutput = 1024): number {
  let chars = 0;
  for (const m of options.prompt) {
    if (typeof m.content === 'string') chars += m.content.length;
    else
      for (const p of m.content as unknown as Array<Record<string, unknown>>)
        chars += JSON.stringify(p.text ?? p.input ?? p.output ?? '').length;
  }
  for (const t of options.tools ?? []) chars += JSON.stringify(t).length;
  return Math.ceil(chars / 4) + (options.maxOutputTokens ?? defaultMaxOutput);
}

/**
 * The window the store counts in: the configured one plus a margin of 2% (20 ms to 1 s) for the
 * time between a grant and the provider's receipt of the request, so that a provider counting by
 * arrival never sees one request too many in its window.
 */
export const windowWithMargin = (windowMs: number): number =>
  windowMs + Math.min(1000, Math.max(20, Math.round(windowMs * 0.02)));

interface Waiter {
  rank: number;
  since: number;
  seq: number;
  tokens: number;
  resolve: (grant: Grant) => void;
  reject: (e: unknown) => void;
  signal: AbortSignal;
  onAbort: () => void;
}

/** A granted request: release once it ends, settle with its actual tokens. */
export interface Grant {
  readonly key: string;
  readonly id: string;
  settle(tokens: number): void;
  release(): void;
}

/**
 * One limit key in this process: its waiters in order (priority, then arrival), the head of which
 * alone asks the store (one acquisition in flight per key per process).
 */
class Gate {
  private readonly queue: Waiter[] = [];
  private pumping = false;
  private wake: (() => void) | undefined;
  private seq = 0;
  readonly waiterId = randomUUID();
  readonly key: string;
  private readonly limit: ModelLimit;
  private readonly fc: FlowControl;

  constructor(key: string, limit: ModelLimit, fc: FlowControl) {
    this.key = key;
    this.limit = limit;
    this.fc = fc;
  }

  enqueue(rank: number, tokens: number, signal: AbortSignal): Promise<Grant> {
    return new Promise<Grant>((resolve, reject) => {
      const w: Waiter = {
        rank,
        since: this.fc.clock.now(),
        seq: this.seq++,
        tokens,
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.queue.indexOf(w);
          if (i >= 0) this.queue.splice(i, 1);
          if (this.queue.length === 0) void this.fc.store.limits.leaveQueue(this.key, this.waiterId).catch(() => {});
          reject(signal.reason);
        },
      };
      if (signal.aborted) return reject(signal.reason);
      signal.addEventListener('abort', w.onAbort, { once: true });
      // In order of rank, then arrival.
      let i = this.queue.length;
      while (i > 0 && this.queue[i - 1]!.rank > rank) i--;
      this.queue.splice(i, 0, w);
      this.poke();
    });
  }

  /** Something may have changed (a release here, a new waiter): the pump tries now. */
  poke(): void {
    if (this.wake) {
      const w = this.wake;
      this.wake = undefined;
      w();
    }
    if (!this.pumping) void this.pump();
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.queue.length > 0) {
        const head = this.queue[0]!;
        const now = this.fc.clock.now();
        const id = randomUUID();
        let grant;
        try {
          grant = await this.fc.store.limits.acquire(
            {
              key: this.key,
              id,
              waiter: this.waiterId,
              rank: head.rank,
              since: head.since,
              now,
              ...(this.limit.concurrency !== undefined ? { concurrency: this.limit.concurrency } : {}),
              ...(this.limit.requestsPerMinute !== undefined
                ? { requestsPerWindow: this.limit.requestsPerMinute }
                : {}),
              ...(this.limit.tokensPerMinute !== undefined ? { tokensPerWindow: this.limit.tokensPerMinute } : {}),
              tokens: head.tokens,
              windowMs: windowWithMargin(this.limit.windowMs ?? 60_000),
              slotLeaseMs: this.fc.slotLeaseMs,
              waiterLeaseMs: Math.max(1000, this.fc.pollMs * 10),
            },
            decideLimit,
          );
        } catch (e) {
          process.emitWarning(`keel flow control ${this.key}: ${(e as Error).message}`);
          grant = { granted: false as const, reason: 'queued' as const, retryAt: now + this.fc.pollMs * 5 };
        }
        if (this.queue[0] !== head) {
          // The head gave up meanwhile: a slot it took goes back.
          if (grant.granted) void this.fc.store.limits.release(this.key, id).catch(() => {});
          continue;
        }
        if (grant.granted) {
          this.queue.shift();
          head.signal.removeEventListener('abort', head.onAbort);
          head.resolve(this.fc.grant(this.key, id, this.limit, head));
          continue;
        }
        const delay = Math.max(1, Math.min(grant.retryAt - this.fc.clock.now(), this.fc.pollMs));
        await new Promise<void>((resolve) => {
          const t = setTimeout(() => {
            this.wake = undefined;
            resolve();
          }, delay);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
      }
    } finally {
      this.pumping = false;
    }
  }
}

/**
 * Provider flow control for one runtime: limits by key, held in the store (so that they hold across
 * every process on it), with waiting in order and a global pause on 429.
 */
export class FlowControl {
  readonly slotLeaseMs: number;
  readonly pollMs: number;
  readonly holdSlotMs: number;
  readonly defaultPauseMs: number;
  private readonly gates = new Map<string, Gate>();
  private readonly observers = new Set<FlowControlObserver>();
  /** The models `wrap` made: wrapped again, a call would wait for its limits twice. */
  private readonly wrapped = new WeakSet<LanguageModelV4>();

  readonly store: LimitStoreOps;
  readonly limits: ModelLimits;
  readonly clock: Clock;

  constructor(store: LimitStoreOps, limits: ModelLimits, clock: Clock, options: FlowControlOptions = {}) {
    this.store = store;
    this.limits = limits;
    this.clock = clock;
    this.slotLeaseMs = options.slotLeaseMs ?? 30_000;
    this.pollMs = options.pollMs ?? 100;
    this.holdSlotMs = options.holdSlotMs ?? 1000;
    this.defaultPauseMs = options.defaultPauseMs ?? 1000;
  }

  observe(o: FlowControlObserver): () => void {
    this.observers.add(o);
    return () => void this.observers.delete(o);
  }

  keyFor(model: LanguageModelV4): string | undefined {
    return limitKeyFor(this.limits, model.provider, model.modelId);
  }

  private gate(key: string): Gate {
    let g = this.gates.get(key);
    if (!g) this.gates.set(key, (g = new Gate(key, this.limits[key]!, this)));
    return g;
  }

  /** Waits for the key's limits to let one request of `tokens` through. */
  async acquire(
    key: string,
    o: { priority?: Priority; tokens: number; signal: AbortSignal; waitOutside?: CallContext['waitOutside'] },
  ): Promise<Grant> {
    const t0 = performance.now();
    const p = this.gate(key).enqueue(rankOf(o.priority), o.tokens, o.signal);
    let grant: Grant;
    if (o.waitOutside) {
      // A short wait keeps the worker slot; a long one lets another run use it meanwhile.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const quick = await Promise.race([
        p,
        new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), this.holdSlotMs))),
      ]).finally(() => clearTimeout(timer));
      grant = quick ?? (await o.waitOutside(p));
    } else {
      grant = await p;
    }
    const waited = (performance.now() - t0) / 1000;
    if (waited > 0.001) for (const ob of this.observers) ob.waited?.(key, waited);
    return grant;
  }

  /** @internal */
  grant(key: string, id: string, limit: ModelLimit, w: Waiter): Grant {
    let released = false;
    const renew =
      limit.concurrency !== undefined
        ? setInterval(
            () => void this.store.limits.renew(key, id, this.clock.now() + this.slotLeaseMs).catch(() => {}),
            Math.max(50, this.slotLeaseMs / 3),
          )
        : undefined;
    renew?.unref?.();
    return {
      key,
      id,
      settle: (tokens) => {
        if (limit.tokensPerMinute !== undefined && tokens !== w.tokens)
          void this.store.limits.settle(key, id, tokens).catch(() => {});
      },
      release: () => {
        if (released) return;
        released = true;
        clearInterval(renew);
        if (limit.concurrency === undefined) return void this.gates.get(key)?.poke();
        // Tried again on a failure (a busy store): else the slot stays taken until its lease ends.
        const free = async (attempt: number): Promise<void> => {
          try {
            await this.store.limits.release(key, id);
          } catch {
            if (attempt >= 3) return;
            await new Promise((r) => setTimeout(r, 50 * attempt));
            return free(attempt + 1);
          }
        };
        void free(1).finally(() => this.gates.get(key)?.poke());
      },
    };
  }

  /** A provider answered 429: the key pauses for everyone on the store. */
  async rateLimited(key: string, retryAfterMs: number | undefined): Promise<void> {
    for (const ob of this.observers) ob.rateLimited?.(key);
    await this.store.limits.pause(key, this.clock.now() + (retryAfterMs ?? this.defaultPauseMs)).catch(() => {});
  }

  /**
   * The model, limited: each stream waits for its key's limits (when a limit applies), reports 429s,
   * settles its tokens and frees its slot when it ends. A model no limit applies to, or one this
   * flow control limited already, is returned as is.
   */
  wrap(model: LanguageModelV4, context: () => CallContext | undefined): LanguageModelV4 {
    const key = this.keyFor(model);
    if (key === undefined || this.wrapped.has(model)) return model;
    const rateLimitedError = async (e: unknown) => {
      const err = classifyModelError(e, false);
      if (err.status === 429 || err.code === 'rate_limit_exceeded' || err.code === 'rate_limit_error')
        await this.rateLimited(key, err.retryAfterMs);
    };
    const limited: LanguageModelV4 = Object.create(model) as LanguageModelV4;
    Object.defineProperty(limited, 'doStream', {
      value: async (options: LanguageModelV4CallOptions) => {
        const ctx = context();
        const signal = options.abortSignal ?? new AbortController().signal;
        const tokens = estimateTokens(options);
        const grant = await this.acquire(key, {
          tokens,
          signal,
          ...(ctx?.priority !== undefined ? { priority: ctx.priority } : {}),
          ...(ctx?.waitOutside ? { waitOutside: ctx.waitOutside.bind(ctx) } : {}),
        });
        let result;
        try {
          result = await model.doStream(options);
        } catch (e) {
          grant.release();
          await rateLimitedError(e);
          throw e;
        }
        const reader = result.stream.getReader();
        // Passes the parts on; the slot frees when the stream ends, fails or is cancelled.
        const stream = new ReadableStream<LanguageModelV4StreamPart>({
          async pull(out) {
            let r;
            try {
              r = await reader.read();
            } catch (e) {
              grant.release();
              await rateLimitedError(e);
              throw e;
            }
            if (r.done) {
              grant.release();
              return out.close();
            }
            const part = r.value;
            if (part.type === 'finish') {
              const u = part.usage as { inputTokens?: { total?: number }; outputTokens?: { total?: number } };
              grant.settle((u.inputTokens?.total ?? 0) + (u.outputTokens?.total ?? 0));
            } else if (part.type === 'error') {
              await rateLimitedError(part.error);
            }
            out.enqueue(part);
          },
          async cancel(reason) {
            grant.release();
            await reader.cancel(reason);
          },
        });
        return { ...result, stream };
      },
    });
    this.wrapped.add(limited);
    return limited;
  }
}
