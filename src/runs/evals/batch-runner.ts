/**
 * The batch runner of a worker process (issue 40): claims the items of bulk reruns and
 * experiments (store.batches.claim: a lease and a fencing token, a batch's concurrency respected
 * across every process), keeps each lease while it runs, and ends each item exactly once with
 * its token. An item whose process died is claimed again when its lease expires: a step replay
 * is made again (it has no effects), a rerun is found again on the item and waited for.
 */
import { newId } from '../../core/index.ts';
import type { BatchItemRecord, BatchRecord, JsonObject } from '../../store/index.ts';
import { WakeUp } from '../wake-up.ts';
import { runBulkRerunItem } from './bulk-reruns.ts';
import type { EvalsHost } from './evals-host.ts';
import { runExperimentItem, type ItemEnd } from './experiments.ts';

export interface BatchRunnerOptions {
  leaseMs?: number;
  /** How often it looks for items when nothing woke it (default 500 ms). */
  pollMs?: number;
}

export class BatchRunner {
  private readonly host: EvalsHost;
  private readonly owner = `batches-${newId()}`;
  /** Items run at once by this process (its workers' concurrency: see `start`). */
  private slots = 0;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly wakeUp = new WakeUp();
  private readonly running = new Map<string, AbortController>();
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(host: EvalsHost, o: BatchRunnerOptions = {}) {
    this.host = host;
    this.leaseMs = o.leaseMs ?? 30_000;
    this.pollMs = o.pollMs ?? 500;
  }

  /** Starts claiming, `slots` items at once at most (a later call may raise it). */
  start(slots: number): void {
    this.slots = Math.max(this.slots, slots);
    this.loop ??= this.claimLoop();
  }

  wake(): void {
    this.wakeUp.wake();
  }

  /** Stops claiming and aborts the items it runs (their leases expire; another process takes them). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const c of this.running.values()) c.abort(new Error('the batch runner stopped'));
    this.wakeUp.wake();
    await this.loop;
  }

  private async claimLoop(): Promise<void> {
    const active = new Set<Promise<void>>();
    while (!this.stopped) {
      let claimed: BatchItemRecord | undefined;
      if (active.size < this.slots) {
        claimed = await this.host.store.batches.claim(this.owner, this.leaseMs, Date.now()).catch(() => undefined);
      }
      if (claimed) {
        const p: Promise<void> = this.runItem(claimed).finally(() => {
          active.delete(p);
          this.wakeUp.wake();
        });
        active.add(p);
        continue;
      }
      // Unref'd: the runner is never the reason a process keeps running (as the scheduler).
      await this.wakeUp.nap(this.pollMs, { unref: true });
    }
    await Promise.allSettled(active);
  }

  private async runItem(item: BatchItemRecord): Promise<void> {
    const ctl = new AbortController();
    this.running.set(item.id, ctl);
    const renew = setInterval(
      () => {
        void this.host.store.batches
          .renew(item.id, this.owner, item.fencingToken, Date.now() + this.leaseMs)
          .then((held) => {
            if (!held) ctl.abort(new Error('the item was claimed elsewhere'));
          })
          .catch(() => {});
      },
      Math.max(50, Math.floor(this.leaseMs / 3)),
    );
    renew.unref?.();
    try {
      const batch = await this.host.store.batches.get(item.batchId);
      if (!batch) return;
      let end: ItemEnd;
      try {
        end = await this.execute(batch, item, ctl.signal);
      } catch (e) {
        // Stopped or lost: nothing is written; the item's lease expires and it runs again elsewhere.
        if (ctl.signal.aborted) return;
        await this.host.store.batches.finish(
          item.id,
          item.fencingToken,
          { status: 'failed', result: null, scores: {}, error: errorOf(e) },
          Date.now(),
        );
        return;
      }
      await this.host.store.batches.finish(
        item.id,
        item.fencingToken,
        { status: 'done', result: end.result, scores: end.scores, error: null },
        Date.now(),
      );
    } catch {
      // The store failed: the lease expires and the item is claimed again.
    } finally {
      clearInterval(renew);
      this.running.delete(item.id);
    }
  }

  private execute(batch: BatchRecord, item: BatchItemRecord, signal: AbortSignal): Promise<ItemEnd> {
    switch (batch.kind) {
      case 'experiment':
        return runExperimentItem(this.host, batch, item, signal);
      case 'reruns':
        return runBulkRerunItem(this.host, batch, item, signal);
    }
  }
}

function errorOf(e: unknown): JsonObject {
  const err = e as Error & { code?: string; kind?: string };
  return {
    message: err instanceof Error ? err.message : String(e),
    ...(err?.code !== undefined ? { code: err.code } : {}),
    ...(err?.kind !== undefined ? { kind: err.kind } : {}),
  };
}
