import { newId } from '../core/index.ts';
import { isStoreUnavailable, type DueCursor } from '../store/index.ts';
import { FieldValidationError } from './field-validation-error.ts';
import { Execution, type ExecutionEnv } from './execution.ts';
import type { RunLifecycle } from './lifecycle/run-lifecycle.ts';
import { CLAIM_POLICY, isWaiting } from './lifecycle/run-status.ts';
import type { Claimed } from './lifecycle/types.ts';
import type { OfferedSlot } from './worker-slot.ts';
import type { Waiting } from './lifecycle/waiting.ts';

export interface WorkerOptions {
  /** The lease owner's name; unique per worker. */
  id?: string;
  /** Runs executed at once, each with its own abort controller. */
  concurrency?: number;
  /** How often to look for work when nothing wakes the worker. */
  pollMs?: number;
  /** How often to time out runs whose wait or deadline has passed. */
  sweepMs?: number;
}

/** Due runs a sweep reads at a time (see `Worker.sweep`). */
const SWEEP_PAGE = 200;
/** Pages a sweep takes before it lets the worker claim again (the rest is swept in the next round). */
const SWEEP_PAGES = 5;

/**
 * While the database cannot be reached, the worker looks again after 100, 200, 400… ms, at most
 * OUTAGE_MAX_MS, each pause shortened by a random part of up to half (so that the workers of a
 * cluster do not all come back in the same instant), instead of every `pollMs` (ADR-0045).
 */
const OUTAGE_FIRST_MS = 100;
const OUTAGE_MAX_MS = 2000;

/** The pause before the worker looks again after `failures` rounds in a row that found the database unavailable. */
function outageBackoffMs(failures: number, random = Math.random()): number {
  const ms = Math.min(OUTAGE_MAX_MS, OUTAGE_FIRST_MS * 2 ** Math.max(0, failures - 1));
  return ms * (1 - random / 2);
}

/** A FieldValidationError naming the first option of a worker that is not valid (none is clamped or ignored). */
function checkWorkerOptions(o: WorkerOptions): void {
  const bad = (field: string, what: string) =>
    new FieldValidationError(field, `${what}, not ${String(o[field as keyof WorkerOptions])}`);
  if (o.id !== undefined && (typeof o.id !== 'string' || o.id.length === 0))
    throw bad('id', 'a non-empty string is required');
  if (o.concurrency !== undefined && !(Number.isInteger(o.concurrency) && o.concurrency >= 1))
    throw bad('concurrency', 'a whole number of runs, at least 1, is required');
  for (const field of ['pollMs', 'sweepMs'] as const) {
    const v = o[field];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0))
      throw bad(field, 'a finite number of milliseconds above 0 is required');
  }
}

export type { OfferedSlot } from './worker-slot.ts';

export interface WorkerHost {
  lifecycle: RunLifecycle;
  env(owner: string): ExecutionEnv;
  /** Resolves at the next local wake-up (a run was queued here), true, or after `ms`, false. */
  nap(ms: number): Promise<boolean>;
  wake(): void;
  track(e: Execution): void;
  untrack(e: Execution): void;
}

/**
 * Claims runs with a lease and executes them. Crash recovery is the same path as any claim: a
 * run whose lease expired is claimable again, and its new owner resumes it from its checkpoint.
 */
export class Worker {
  readonly id: string;
  private readonly host: WorkerHost;
  private readonly concurrency: number;
  private readonly pollMs: number;
  private readonly sweepMs: number;
  private readonly running = new Map<string, Execution>();
  private stopping = false;
  private readonly loopDone: Promise<void>;
  private lastSweep = 0;
  /** A slot was freed or taken since the worker last napped: it wakes itself, no work is announced. */
  private slotChanged = false;
  /** Slots offered for a claim in another transaction, not yet started or released (see `offerSlot`). */
  private offered = 0;
  /** Called when the last offered slot is started or released: `stop` waits for it. */
  private offersSettled: (() => void) | undefined;
  /** The worker's own claims in flight (up to the store's parallel transactions): their slots are taken too. */
  private claiming = 0;
  /** Rounds in a row that found the database unavailable (0: it answers). */
  private outageRounds = 0;
  /**
   * Until when the worker takes over no run whose lease expired (ADR-0045): a lease period after
   * it found the database back from an outage, so that the owners that could not renew during it
   * renew first. Their renewals match owner and token; a run whose owner is really gone is taken
   * over a lease period later than without the outage.
   */
  private recoverAfter = 0;
  /**
   * The worker's last look for work, or a turn end's claim, found nothing claimable, and no work
   * was announced to it since: a turn's end then claims nothing (ADR-0050), which spares an idle
   * worker's runs a probe that finds nothing. The worker's own look after the run still looks.
   */
  private nothingClaimable = false;

  constructor(host: WorkerHost, options: WorkerOptions = {}) {
    checkWorkerOptions(options);
    this.host = host;
    this.id = options.id ?? `worker-${newId()}`;
    this.concurrency = options.concurrency ?? 8;
    this.pollMs = options.pollMs ?? 250;
    this.sweepMs = options.sweepMs ?? 1000;
    this.loopDone = this.loop();
  }

  /** Runs this worker executes now and that hold a slot (not those only waiting for a child run). */
  get active(): number {
    let n = this.offered + this.claiming;
    for (const e of this.running.values()) if (e.holdsSlot) n++;
    return n;
  }

  private async loop(): Promise<void> {
    // Whether work was announced to this worker (a run queued or resumed here) since it last looked.
    let announced = false;
    while (!this.stopping) {
      try {
        // Unless work was announced, the counts by status are read before a claim's write
        // transaction: a poll, or the end of a run, mostly finds nothing to claim.
        const look = !announced;
        // An execution waiting for something outside its run (a child) holds no slot: a parent
        // waiting for its child must not keep the child from being claimed. Claims only when the
        // look (unless work was announced) finds something to claim, and a message did not take
        // the free slots meanwhile (see offerSlot).
        const free = () => !this.stopping && this.active < this.concurrency;
        if (free() && (!look || ((await this.mayClaim()) && free()))) {
          // Claims in lanes, as many as the store runs transactions side by side (a recovery of
          // many runs is bounded by claims' round trips, not by one at a time): each lane claims
          // until it finds nothing or the worker is full. A worker back from a database outage
          // leaves expired leases to their owners for a while (ADR-0045).
          const recover = Date.now() >= this.recoverAfter;
          const lanes = Math.min(this.concurrency - this.active, this.host.lifecycle.store.parallelTransactions ?? 1);
          const claimed = await Promise.allSettled(Array.from({ length: lanes }, () => this.claimLane(recover)));
          const failed = claimed.find((c) => c.status === 'rejected');
          if (failed) throw failed.reason;
        }
        if (Date.now() - this.lastSweep >= this.sweepMs) await this.sweep();
        if (this.outageRounds > 0) this.databaseBack();
      } catch (e) {
        if (isStoreUnavailable(e)) {
          // No expired lease is taken over until a lease period after the database is back: the
          // round that finds it back claims too, before it learns so (see databaseBack).
          this.recoverAfter = Number.POSITIVE_INFINITY;
          // Said once per outage; the worker backs off until the database answers again.
          if (this.outageRounds++ === 0)
            process.emitWarning(`keel worker ${this.id}: ${(e as Error).message}; looking again with backoff`);
        } else {
          if (this.outageRounds > 0) this.databaseBack();
          // A storage hiccup must not kill the worker; the next round tries again.
          process.emitWarning(`keel worker ${this.id}: ${(e as Error).message}`);
        }
      }
      if (this.stopping) break;
      this.slotChanged = false;
      const woken = await this.host.nap(this.outageRounds > 0 ? outageBackoffMs(this.outageRounds) : this.pollMs);
      announced = woken && !this.slotChanged;
      if (announced) this.nothingClaimable = false;
    }
  }

  /** The database answers again after an outage: runs whose lease expired wait one lease period more. */
  private databaseBack(): void {
    this.outageRounds = 0;
    this.recoverAfter = Date.now() + this.host.env(this.id).leaseMs;
  }

  /**
   * Claims runs one after another until none is claimable or the worker is full; each starts as
   * it is claimed. Its slot is taken while its claim is in flight: a message must not take it too.
   */
  private async claimLane(recover: boolean): Promise<void> {
    while (!this.stopping && this.active < this.concurrency) {
      this.claiming++;
      try {
        const claimed = await this.claim(recover);
        if (!claimed) return;
        this.spawn(claimed);
      } finally {
        this.claiming--;
      }
    }
  }

  /**
   * Claims the oldest claimable run in a transaction of its own, and tells the observers.
   * `recover` false: not a run whose lease expired (see recoverAfter).
   */
  private async claim(recover: boolean): Promise<Claimed | undefined> {
    // Committed, its event reaches live streams (the log publishes on commit).
    const claimed = await this.host.lifecycle.claim(this.id, this.host.env(this.id).leaseMs, { recover });
    this.nothingClaimable = !claimed;
    if (claimed) this.host.env(this.id).observers?.claimed(claimed.run, claimed.previous, claimed.claimedAt);
    return claimed;
  }

  /**
   * A free slot for a claim inside another transaction: the one that queues a run (ADR-0027). The
   * run starts here as soon as that commits, without a transaction, a wake-up and a look for work
   * of its own. Undefined when the worker is full or stopping.
   */
  offerSlot(): OfferedSlot | undefined {
    if (this.stopping || this.active >= this.concurrency) return undefined;
    return this.slotFor();
  }

  /**
   * The slot of a run whose turn ends, for the run claimed in that end's transaction (ADR-0050):
   * the ending run still counts until its execution is done, so the worker is not full of it.
   * Undefined when the worker is stopping, or when it last found nothing to claim (see
   * `nothingClaimable`).
   */
  handOver(): OfferedSlot | undefined {
    if (this.stopping || this.nothingClaimable) return undefined;
    const slot = this.slotFor();
    return {
      ...slot,
      claim: async (tx) => {
        const claimed = await slot.claim(tx);
        // Only if its transaction commits; a claim rolled back finds nothing new either way.
        if (!claimed) this.nothingClaimable = true;
        return claimed;
      },
      start: (claimed) => {
        this.nothingClaimable = false;
        slot.start(claimed);
      },
    };
  }

  /** A slot taken until the claim made for it starts a run or is released. */
  private slotFor(): OfferedSlot {
    this.offered++;
    let open = true;
    const close = () => {
      if (!open) return false;
      open = false;
      if (--this.offered === 0) this.offersSettled?.();
      return true;
    };
    return {
      claim: (tx) =>
        this.host.lifecycle.claimIn(tx, this.id, this.host.env(this.id).leaseMs, {
          recover: Date.now() >= this.recoverAfter,
        }),
      start: (claimed) => {
        if (!close()) return;
        this.host.env(this.id).observers?.claimed(claimed.run, claimed.previous, claimed.claimedAt);
        this.spawn(claimed);
      },
      release: () => {
        if (close()) this.slotWake();
      },
    };
  }

  /**
   * Whether a claim could find a run: one is ready or one runs (its lease may have expired). A read
   * of the counts by status, instead of a write transaction that finds nothing (after each run, say).
   * A run queued right after it is no more missed than one queued right after a claim: the local
   * wake-up or the next poll takes it.
   */
  private async mayClaim(): Promise<boolean> {
    const counts = await this.host.lifecycle.store.runs.countByStatus();
    const may = CLAIM_POLICY.ready.some((s) => counts[s] > 0) || CLAIM_POLICY.recoverable.some((s) => counts[s] > 0);
    if (!may) this.nothingClaimable = true;
    return may;
  }

  /** Looks for work again at once: a slot was freed (or taken back), which says nothing about whether there is any. */
  private slotWake(): void {
    this.slotChanged = true;
    this.host.wake();
  }

  private spawn(claimed: Claimed): void {
    const { run, firstStart, boundary } = claimed;
    const execution = new Execution(this.host.env(this.id), run, { firstStart, ...(boundary ? { boundary } : {}) });
    // A slot freed (or taken again) by a run waiting outside: look for work at once.
    execution.onSlotChange = () => this.slotWake();
    // At its turn's end, the run hands its slot to the next run, claimed in the end's transaction.
    execution.handOver = () => this.handOver();
    this.running.set(run.id, execution);
    this.host.track(execution);
    void execution.done
      .catch((e: unknown) => process.emitWarning(`keel worker ${this.id}: run ${run.id}: ${(e as Error).message}`))
      .finally(() => {
        // The same run may have been claimed again meanwhile (its lease expired): keep the new one.
        if (this.running.get(run.id) === execution) this.running.delete(run.id);
        this.host.untrack(execution);
        this.slotWake();
      });
  }

  /**
   * Times out runs whose deadline has passed while no worker held them, and ends the waits whose
   * time came (ADR-0015): a sleep wakes, a deadline applies its policy. Times are the runtime's clock.
   * What is due comes from the index on the due time (ADR-0034), a page at a time: the cost follows
   * what is due, not how many runs wait. A sweep takes at most SWEEP_PAGES pages; when more is
   * due, the next round sweeps again at once.
   */
  private async sweep(): Promise<void> {
    this.lastSweep = Date.now();
    const { lifecycle } = this.host;
    const env = this.host.env(this.id);
    const now = lifecycle.clock.now();
    let after: DueCursor | undefined;
    for (let pages = 0; ; pages++) {
      if (pages === SWEEP_PAGES || this.stopping) {
        this.lastSweep = 0;
        return;
      }
      const due = await lifecycle.store.claims.due(now, { limit: SWEEP_PAGE, ...(after ? { after } : {}) });
      for (const { run: r } of due) {
        const deadlinePassed = r.deadlineAt !== null && r.deadlineAt <= now;
        if (!deadlinePassed && env.waits) {
          // A guarded transition: of two workers sweeping at once, one ends the wait.
          if ((await env.waits.expire(r.id))?.status === 'queued') this.host.wake();
          continue;
        }
        const waitExpired =
          isWaiting(r.status) && ((r.waiting as unknown as Waiting | null)?.expiresAt ?? Infinity) <= now;
        await lifecycle
          .finish(r, 'timed_out', {
            reason: waitExpired && !deadlinePassed ? 'the wait for a decision expired' : 'run timeout',
            closeOpenCalls: true,
            resolveAgent: env.resolveAgent,
          })
          .catch(() => {}); // it moved meanwhile (someone decided, or a worker took it)
      }
      if (due.length < SWEEP_PAGE) return;
      const last = due.at(-1)!;
      after = { dueAt: last.dueAt, id: last.run.id };
    }
  }

  /**
   * Graceful shutdown: claims nothing more, lets running steps finish and hands each run back at
   * its next step boundary; after `graceMs` lets go of the rest at once (their new owner recovers
   * them from their checkpoint). Either way the lease is released, so another worker takes over
   * without waiting for it to expire.
   */
  async stop(options: { graceMs?: number } = {}): Promise<void> {
    this.stopping = true;
    this.host.wake();
    await this.loopDone;
    // A run claimed for a slot offered before (its message's transaction still open) starts first.
    if (this.offered > 0) await new Promise<void>((resolve) => (this.offersSettled = resolve));
    const executions = [...this.running.values()];
    for (const e of executions) e.release(false);
    const all = Promise.all(executions.map((e) => e.done.catch(() => {})));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graceOver = new Promise<'grace'>((resolve) => {
      timer = setTimeout(() => resolve('grace'), options.graceMs ?? 10_000);
    });
    if ((await Promise.race([all.then(() => 'done' as const), graceOver])) === 'grace') {
      for (const e of this.running.values()) e.release(true);
      await all;
    }
    clearTimeout(timer);
  }
}
