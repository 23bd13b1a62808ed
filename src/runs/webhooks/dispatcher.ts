import {
  isClosedStore,
  type ClaimedWebhookDelivery,
  type Store,
  type WebhookDeliveryStatus,
} from '../../store/index.ts';
import type { Clock } from '../../core/clock.ts';
import { WakeUp } from '../wake-up.ts';
import { resolveDestination, systemResolve, type Resolve } from './destination.ts';
import { postWebhook } from './post.ts';
import { signWebhook } from './signature.ts';

export const DAY_MS = 24 * 3600_000;

export interface DispatcherOptions {
  /** How long one attempt may take (default 10 s). */
  timeoutMs?: number;
  /** How often the outbox is looked at when nothing wakes the dispatcher (default 1 s). */
  pollMs?: number;
  /** Attempts in flight at once, in all (default 16). */
  concurrency?: number;
  /** @deprecated the former name of `concurrency`. */
  batch?: number;
  /**
   * Attempts in flight at once to one destination (a subscription URL), default 2: a receiver
   * that is slow or never answers holds at most that many of this process's slots.
   */
  perDestination?: number;
  /** The first retry's delay (default 10 s); each next one doubles, up to `maxDelayMs` (default 1 h), with jitter. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** How long ended deliveries (and their attempts) are kept: delivered ones 7 days, failed ones 30 days by default. */
  retention?: { deliveredMs?: number; failedMs?: number };
  /** How often the dispatcher looks for deliveries past their retention (default every minute of the clock). */
  pruneEveryMs?: number;
  /** At most this many deliveries deleted by one prune (default 500); a full one looks again at the next pass. */
  pruneBatch?: number;
  /** The randomness of the jitter (tests pin it). */
  random?: () => number;
  /** Resolves a host name to its addresses for an attempt (the system resolver by default; tests inject one). */
  resolve?: Resolve;
  /**
   * Deliver to this machine and private networks (loopback, 10/8, 192.168/16, link-local…): off by
   * default, so a tenant cannot make the server reach what only it can reach. A development
   * server on loopback, or receivers inside the same private network, turn it on.
   */
  allowPrivateNetworks?: boolean;
}

/** The delay before attempt `n + 1` after `n` failed: exponential, capped, with jitter (half to all of it). */
export function webhookBackoff(
  n: number,
  o: { baseDelayMs: number; maxDelayMs: number; random: () => number },
): number {
  const full = Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** Math.min(Math.max(0, n - 1), 30));
  return Math.round(full / 2 + o.random() * (full / 2));
}

/** The secrets that sign an attempt at `at`: the subscription's, and the one a rotation replaced while its overlap lasts. */
const secretsAt = (d: ClaimedWebhookDelivery, at: number): string[] =>
  d.previousSecret !== null && d.previousSecretExpiresAt !== null && at < d.previousSecretExpiresAt
    ? [d.secret, d.previousSecret]
    : [d.secret];

/** `promise`, or a rejection as soon as `signal` aborts (a host name's resolution cannot be aborted itself). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** An attempt's error as recorded: a system error's code (ECONNREFUSED, ENOTFOUND…), else its message. */
const describe = (e: unknown): string => {
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && /^E[A-Z_]+$/.test(code)) return code;
  const cause = (e as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  if ((e as { name?: unknown }).name === 'TimeoutError') return 'timeout';
  return e instanceof Error ? e.message : String(e);
};

/**
 * Delivers the outbox (ADR-0017), one loop per process: claims due deliveries for its free slots
 * (each for one attempt, under a lease no other dispatcher takes it through; at most
 * `perDestination` in flight to one URL), POSTs each signed to the address its destination check
 * resolved, records the attempt, and settles the delivery: `delivered` on a 2xx, else retried
 * later with backoff until its `retryUntil`, then `failed`. Attempts do not wait for each other.
 * It also prunes ended deliveries past their retention. Every time decision reads the clock.
 */
export class WebhookDispatcher {
  private readonly store: Store;
  private readonly clock: Clock;
  readonly timeoutMs: number;
  private readonly pollMs: number;
  private readonly concurrency: number;
  private readonly perDestination: number;
  /** Attempts in flight, and how many of them to each URL. */
  private readonly inFlight = new Set<Promise<void>>();
  private readonly busy = new Map<string, number>();
  private readonly backoff: { baseDelayMs: number; maxDelayMs: number; random: () => number };
  private readonly allowPrivateNetworks: boolean;
  private readonly resolve: Resolve;
  readonly retention: { deliveredMs: number; failedMs: number };
  private readonly pruneEveryMs: number;
  private readonly pruneBatch: number;
  private nextPruneAt = Number.NEGATIVE_INFINITY;
  private running: Promise<void> | undefined;
  private stopped = false;
  private aborts = new AbortController();
  private readonly wakeUp = new WakeUp();

  constructor(store: Store, clock: Clock, o: DispatcherOptions = {}) {
    this.store = store;
    this.clock = clock;
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.pollMs = o.pollMs ?? 1000;
    this.concurrency = Math.max(1, o.concurrency ?? o.batch ?? 16);
    this.perDestination = Math.max(1, o.perDestination ?? 2);
    this.backoff = {
      baseDelayMs: o.baseDelayMs ?? 10_000,
      maxDelayMs: o.maxDelayMs ?? 3_600_000,
      random: o.random ?? Math.random,
    };
    this.allowPrivateNetworks = o.allowPrivateNetworks ?? false;
    this.resolve = o.resolve ?? systemResolve;
    this.retention = {
      deliveredMs: o.retention?.deliveredMs ?? 7 * DAY_MS,
      failedMs: o.retention?.failedMs ?? 30 * DAY_MS,
    };
    this.pruneEveryMs = o.pruneEveryMs ?? 60_000;
    this.pruneBatch = o.pruneBatch ?? 500;
  }

  /** While an attempt is in flight its delivery is leased: longer than the attempt may take. */
  get leaseMs(): number {
    return this.timeoutMs + 30_000;
  }

  /** Starts the loop (once). */
  start(): void {
    if (this.running) return;
    this.running = this.loop();
  }

  /** Stops the loop; attempts in flight are aborted and not recorded (their deliveries come due again when their lease ends). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.aborts.abort();
    this.wake();
    await this.running;
    await Promise.allSettled([...this.inFlight]);
    // It may be started again.
    this.running = undefined;
    this.stopped = false;
    this.wakeUp.reset();
    this.aborts = new AbortController();
  }

  /** Looks at the outbox now (a delivery was written here). */
  wake(): void {
    this.wakeUp.wake();
  }

  /**
   * Fills the free slots and, when nothing more can be started, naps until a wake-up (a delivery
   * written here, an attempt that ended) or the next poll. Attempts do not wait for each other:
   * one that hangs holds its slot until its timeout, and the others go on around it.
   */
  private async loop(): Promise<void> {
    while (!this.stopped) {
      let started = 0;
      try {
        const attempts = await this.fill();
        // An attempt's own failure to record is looked at again when its lease ends.
        for (const a of attempts) a.catch(() => {});
        started = attempts.length;
      } catch (e) {
        // A closed store stays closed: nothing more to deliver from it.
        if (isClosedStore(e)) break;
        // The store failed: look again at the next poll.
      }
      if (started === 0 && !this.stopped) await this.wakeUp.nap(this.pollMs, { unref: true });
    }
  }

  /** One pass: claims what is due (as the free slots allow) and attempts it; returns how many deliveries were attempted, once they were. */
  async tick(): Promise<number> {
    const attempts = await this.fill();
    await Promise.all(attempts);
    return attempts.length;
  }

  /**
   * Claims due deliveries for the free slots, at most `perDestination` to a URL counting those in
   * flight, and starts their attempts (not awaited).
   */
  private async fill(): Promise<Array<Promise<void>>> {
    const now = this.clock.now();
    await this.prune(now);
    const free = this.concurrency - this.inFlight.size;
    if (free <= 0) return [];
    // Only deliveries this process could start now are worth a claim (a write).
    const full = [...this.busy].filter(([, n]) => n >= this.perDestination).map(([url]) => url);
    if (!(await this.store.webhooks.hasDueDeliveries(now, { except: full }))) return [];
    const claimed = await this.store.webhooks.claimDeliveries(now, this.leaseMs, free, {
      perDestination: this.perDestination,
      busy: Object.fromEntries(this.busy),
    });
    return claimed.map((d) => this.inSlot(d));
  }

  /** Attempts a claimed delivery in one of the slots; its end frees the slot and wakes the loop. */
  private inSlot(d: ClaimedWebhookDelivery): Promise<void> {
    this.busy.set(d.url, (this.busy.get(d.url) ?? 0) + 1);
    const attempt = this.attempt(d).finally(() => {
      this.inFlight.delete(attempt);
      const n = (this.busy.get(d.url) ?? 1) - 1;
      if (n > 0) this.busy.set(d.url, n);
      else this.busy.delete(d.url);
      this.wake();
    });
    this.inFlight.add(attempt);
    return attempt;
  }

  /**
   * Deletes deliveries past their retention, at most one batch, when it is time to look (a cheap
   * read first: no write when nothing expired). A full batch looks again at the next pass.
   */
  private async prune(now: number): Promise<void> {
    if (now < this.nextPruneAt) return;
    this.nextPruneAt = now + this.pruneEveryMs;
    const bounds = { deliveredBefore: now - this.retention.deliveredMs, failedBefore: now - this.retention.failedMs };
    if (!(await this.store.webhooks.hasExpiredDeliveries(bounds))) return;
    const n = await this.store.webhooks.pruneDeliveries({ ...bounds, limit: this.pruneBatch });
    if (n >= this.pruneBatch) this.nextPruneAt = now;
  }

  /** Runs passes until nothing is due (tests). */
  async drain(): Promise<number> {
    let total = 0;
    for (let n; (n = await this.tick()) > 0;) total += n;
    return total;
  }

  private async attempt(d: ClaimedWebhookDelivery): Promise<void> {
    const startedAt = this.clock.now();
    const t0 = performance.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    // The timeout covers it all: resolving the host, connecting, the answer.
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = AbortSignal.any([timeout, this.aborts.signal]);
    try {
      // What the host resolves to now (it may have changed since the subscription was made),
      // resolved once: the connection goes to the address checked.
      const to = await abortable(
        resolveDestination(d.url, { allowPrivateNetworks: this.allowPrivateNetworks, resolve: this.resolve }),
        signal,
      );
      statusCode = await postWebhook(d.url, to, {
        headers: {
          // A protocol's subscription (an A2A push config) sends its own headers (a token, credentials) beside Keel's.
          ...d.headers,
          'content-type': d.format === 'a2a' ? 'application/a2a+json' : 'application/json',
          'user-agent': 'Keel-Webhooks/1',
          'keel-delivery': d.id,
          'keel-event': d.eventType,
          'keel-signature': signWebhook(secretsAt(d, startedAt), d.body, Math.floor(startedAt / 1000)),
        },
        body: d.body,
        signal,
      });
      if (statusCode < 200 || statusCode > 299) error = `HTTP ${statusCode}`;
    } catch (e) {
      if (this.aborts.signal.aborted) return;
      error = timeout.aborted ? 'timeout' : describe(e);
    }
    const durationMs = Math.round(performance.now() - t0);
    const n = d.attempts + 1;
    const now = this.clock.now();
    let status: WebhookDeliveryStatus = 'delivered';
    let nextAttemptAt: number | null = null;
    if (error !== null) {
      nextAttemptAt = now + webhookBackoff(n, this.backoff);
      status = nextAttemptAt > d.retryUntil ? 'failed' : 'pending';
      if (status === 'failed') nextAttemptAt = null;
    }
    await this.store.webhooks.recordAttempt({
      deliveryId: d.id,
      claim: d.claim,
      attempt: { deliveryId: d.id, n, startedAt, durationMs, statusCode, error },
      status,
      nextAttemptAt,
    });
  }
}
