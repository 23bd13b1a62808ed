/**
 * The gate of one limit key in this process: its waiters in order (priority, then arrival), the
 * head of which alone asks the store; and what a waiter gets when the limits let it through (`Grant`).
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../core/clock.ts';
import type { LimitStoreOps } from '../store/index.ts';
import { decideLimit } from './decide-limit.ts';
import { windowWithMargin, type ModelLimit } from './model-limits.ts';

/** One request waiting at a gate for its limits. */
export interface Waiter {
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

/** What a gate needs of the flow control it belongs to (FlowControl). */
export interface GateOwner {
  readonly store: LimitStoreOps;
  readonly clock: Clock;
  readonly pollMs: number;
  readonly slotLeaseMs: number;
  grant(key: string, id: string, limit: ModelLimit, w: Waiter): Grant;
}

/**
 * One limit key in this process: its waiters in order (priority, then arrival), the head of which
 * alone asks the store (one acquisition in flight per key per process).
 */
export class Gate {
  private readonly queue: Waiter[] = [];
  private pumping = false;
  private wake: (() => void) | undefined;
  private seq = 0;
  readonly waiterId = randomUUID();
  readonly key: string;
  private readonly limit: ModelLimit;
  private readonly fc: GateOwner;

  constructor(key: string, limit: ModelLimit, fc: GateOwner) {
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
