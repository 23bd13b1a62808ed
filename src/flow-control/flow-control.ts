/**
 * Provider flow control (docs/flow-control.md): `FlowControl`, the limits of one runtime held in the
 * store across every process on it, and `wrap`, the model whose every request waits for them.
 */
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import type { Clock } from '../core/clock.ts';
import { classifyModelError } from '../model/errors.ts';
import type { LimitStoreOps } from '../store/index.ts';
import { Gate, type Grant, type Waiter } from './gate.ts';
import {
  estimateTokens,
  limitKeyFor,
  rankOf,
  type ModelLimit,
  type ModelLimits,
  type Priority,
} from './model-limits.ts';

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
