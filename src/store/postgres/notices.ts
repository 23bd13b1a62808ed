/**
 * The notices role of the PostgreSQL backend (`store.notices`): change notices by LISTEN on the
 * schema's channel (with its reconnect and the parsing of notifications), broadcasts by NOTIFY on it
 * (through the commit queue: after this instance's earlier commits, before its later ones), and a
 * ping through it as the barrier (`caughtUp`).
 */
import pg from 'pg';
import type { JsonObject, NoticeOps, StoreChange } from '../port/index.ts';
import type { PgCommitQueue } from './commit-queue.ts';
import { quoteIdent } from './migrations.ts';

/**
 * The pause before the listener connects again after `failures` losses in a row: 125, 250, 500 ms,
 * then 1 s at most, each shortened by a random part of up to half (ADR-0045): a server that
 * restarts is not hammered by every node at once, and feeds resume within a second of its return.
 * Broadcasts (token deltas) notified before the listener is back are not received here: they are
 * not durable, and the window stays short.
 */
export const listenRetryMs = (failures: number, random = Math.random()): number =>
  Math.min(1000, 125 * 2 ** Math.max(0, failures - 1)) * (1 - random / 2);

export interface PgNoticesOptions {
  /** The connection string: LISTEN holds a connection of its own, outside the pool. */
  url: string;
  /** The schema whose channel (`keel_<schema>`) carries the notices. */
  schema: string;
  /** The store's pool: broadcasts and pings are sent by NOTIFY on one of its connections. */
  pool: pg.Pool;
  /** The store's commit queue: broadcasts go with its calls (see commit-queue.ts). */
  commits: PgCommitQueue;
  /** Marks this process's broadcasts (its own listener skips them). */
  instanceId: string;
}

/**
 * Change notices by LISTEN, broadcasts by NOTIFY on the schema's channel, and a ping through it as
 * the barrier. The store waits for `broadcastsSent` before each write (its commit's notice comes
 * after the deltas broadcast before it) and calls `close` when it closes.
 */
export class PgNotices implements Required<NoticeOps> {
  private readonly url: string;
  private readonly schema: string;
  private readonly pool: pg.Pool;
  private readonly commits: PgCommitQueue;
  private closed = false;

  constructor(options: PgNoticesOptions) {
    this.url = options.url;
    this.schema = options.schema;
    this.pool = options.pool;
    this.commits = options.commits;
    this.instanceId = options.instanceId;
  }

  private readonly changeListeners = new Set<(change?: StoreChange) => void>();
  private listener: pg.Client | undefined;
  private listening: Promise<void> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  /** Connections of the listener lost or refused in a row (the reconnect's backoff). */
  private listenFailures = 0;

  /**
   * Commits of any node, as PostgreSQL tells them (LISTEN on the schema's channel; every append's
   * transaction notifies on commit with its session and last seq: see the migrations).
   */
  readonly changes = (listener: (change?: StoreChange) => void): (() => void) => {
    this.changeListeners.add(listener);
    if (!this.listening) this.listening = this.listen();
    return () => {
      this.changeListeners.delete(listener);
      if (this.changeListeners.size === 0) this.unlisten();
    };
  };

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    this.listener = client;
    const reconnect = () => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.removeAllListeners('notification');
      void client.end().catch(() => {});
      if (this.closed || this.changeListeners.size === 0) {
        this.listening = undefined;
        return;
      }
      // Reconnect, with backoff while the server does not answer (listenRetryMs); whatever was
      // committed meanwhile is told as a change without details once LISTEN holds again.
      this.retryTimer = setTimeout(() => {
        this.listening = this.listen();
      }, listenRetryMs(++this.listenFailures));
      this.retryTimer.unref?.();
    };
    client.on('error', reconnect);
    client.on('end', reconnect);
    // Told after this process's calls in flight were answered (see PgCommitQueue.afterCalls).
    client.on('notification', (n) => {
      if (!this.commits.afterCalls(() => this.notified(n))) this.notified(n);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(`keel_${this.schema}`)}`);
      this.listenFailures = 0;
      for (const l of [...this.changeListeners]) l();
    } catch {
      reconnect();
    }
  }

  /** A notification on the schema's channel: a ping of this instance, other nodes' broadcasts, or a commit. */
  private notified(n: pg.Notification): void {
    let p: { s?: unknown; q?: unknown; o?: unknown; b?: unknown };
    try {
      p = JSON.parse(n.payload ?? '') as typeof p;
    } catch {
      p = {};
    }
    if (p.o !== undefined) {
      // This instance's ping (see caughtUp): what was notified before it has arrived.
      if (p.o === this.instanceId && typeof (p as { ping?: unknown }).ping === 'number')
        return this.pinged((p as { ping: number }).ping);
      // Broadcast messages: another node's (this instance's own are not for it).
      if (p.o === this.instanceId || !Array.isArray(p.b)) return;
      for (const m of p.b as Array<{ s?: unknown; m?: unknown }>) {
        if (typeof m.s !== 'string' || typeof m.m !== 'object' || m.m === null) continue;
        for (const l of [...this.changeListeners]) l({ sessionId: m.s, message: m.m as JsonObject });
      }
      return;
    }
    const change: StoreChange | undefined =
      typeof p.s === 'string' && typeof p.q === 'number' ? { sessionId: p.s, lastSeq: p.q } : undefined;
    for (const l of [...this.changeListeners]) l(change);
  }

  /** Tells this instance's own broadcasts apart from other nodes'. */
  private readonly instanceId: string;

  /**
   * NOTIFY on the schema's channel, through the commit queue: after everything this instance
   * committed before (a delta is numbered after the events it follows: they are committed, so their
   * notice went first), and before the appends made after it, in the same call as the next.
   */
  readonly broadcast = (sessionId: string, message: JsonObject): void => {
    if (this.closed) return;
    this.commits.broadcast(sessionId, message);
  };

  /**
   * Resolves once every broadcast made before the call went out: a transaction waits for it, so
   * that a delta's notification is never delivered after the commit of the message it streams.
   */
  broadcastsSent(): Promise<void> {
    return this.commits.broadcastsSent();
  }

  private pings = 0;
  private readonly pingWaiters: Array<{ ping: number; resolve: () => void }> = [];

  /**
   * A ping through the schema's channel, from this instance to itself: PostgreSQL delivers
   * notifications in the order their transactions committed, so once it comes back, every notice
   * committed before it has reached the listeners. Never resolves while notices cannot arrive.
   */
  readonly caughtUp = (): Promise<void> => {
    if (this.closed) return Promise.resolve();
    const ping = ++this.pings;
    return new Promise<void>((resolve) => {
      this.pingWaiters.push({ ping, resolve });
      void (async () => {
        // Listening first: a ping sent before LISTEN would never come back.
        await this.listening;
        await this.pool.query('SELECT pg_notify($1, $2)', [
          `keel_${this.schema}`,
          JSON.stringify({ o: this.instanceId, ping }),
        ]);
      })().catch(() => {});
    });
  };

  /** Pings come back in the order sent: every waiter up to this one is answered. */
  private pinged(ping: number): void {
    for (let i = this.pingWaiters.length - 1; i >= 0; i--) {
      if (this.pingWaiters[i]!.ping <= ping) this.pingWaiters.splice(i, 1)[0]!.resolve();
    }
  }

  private unlisten(): void {
    clearTimeout(this.retryTimer);
    const client = this.listener;
    this.listener = undefined;
    this.listening = undefined;
    if (client) {
      client.removeAllListeners();
      client.on('error', () => {});
      void client.end().catch(() => {});
    }
  }

  /** The store closes: no listener is told anything more, and every barrier waiting resolves. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.changeListeners.clear();
    this.unlisten();
    this.pinged(Infinity);
  }
}
