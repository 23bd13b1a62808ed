/**
 * The one retention sweeper across every process on a store (ADR-0039): each process's sweeper
 * tries to take a lease row every `intervalMs`; the one that holds it sweeps, renewing the lease
 * between batches, and stops at the next batch once the lease went to another process (or it was
 * stopped). The sweep itself is Retention's (`sweep(between)`).
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '../store/index.ts';

/** A sweep stopped because this process no longer holds the lease (another one sweeps), or was stopped. */
class LeaseLost extends Error {}

const LEASE = 'retention';

export interface SweeperOptions {
  /** Between two sweeps; the first comes one interval after `start`. Default one hour. */
  intervalMs?: number;
  /** How long the lease holds without renewal. Default one minute. */
  leaseMs?: number;
}

export interface SweeperHooks<R> {
  /** One sweep; `between` runs between its batches (and throws once the lease is lost). */
  sweep(between: () => Promise<void>): Promise<R>;
  swept(report: R): void;
  failed(message: string): void;
}

export class RetentionSweeper<R> {
  private readonly store: Pick<Store, 'retention'>;
  private readonly options: SweeperOptions;
  private readonly hooks: SweeperHooks<R>;
  private readonly holder = `retention-${randomUUID()}`;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = true;
  private leaseRenewedAt = 0;

  constructor(store: Pick<Store, 'retention'>, options: SweeperOptions, hooks: SweeperHooks<R>) {
    this.store = store;
    this.options = options;
    this.hooks = hooks;
  }

  private get intervalMs(): number {
    return this.options.intervalMs ?? 3_600_000;
  }

  private get leaseMs(): number {
    return this.options.leaseMs ?? 60_000;
  }

  /** Whether this process holds the lease now (taking or renewing it). */
  private async lead(): Promise<boolean> {
    const now = Date.now();
    const ok = await this.store.retention.lead(LEASE, this.holder, now, this.leaseMs);
    if (ok) this.leaseRenewedAt = now;
    return ok;
  }

  /** Starts sweeping every `intervalMs` while this process holds the lease. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    // The first sweep after an interval: a process that starts does not sweep at once (nor do tests).
    this.schedule(this.intervalMs);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().finally(() => {
        this.running = undefined;
        this.schedule(this.intervalMs);
      });
    }, ms);
    this.timer.unref?.();
  }

  /** One turn: a sweep if this process leads; undefined if it does not, or the sweep failed. */
  async tick(): Promise<R | undefined> {
    try {
      if (!(await this.lead())) return undefined;
      const report = await this.hooks.sweep(async () => {
        if (this.stopped) throw new LeaseLost('stopped');
        if (Date.now() - this.leaseRenewedAt > this.leaseMs / 3 && !(await this.lead()))
          throw new LeaseLost('the retention lease went to another process');
      });
      this.hooks.swept(report);
      return report;
    } catch (e) {
      if (!(e instanceof LeaseLost)) this.hooks.failed((e as Error).message);
      return undefined;
    }
  }

  /** Stops (the sweep under way stops at its next batch) and gives the lease up. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
    await this.store.retention.resign(LEASE, this.holder).catch(() => undefined);
  }
}
