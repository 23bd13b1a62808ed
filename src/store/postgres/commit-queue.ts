/**
 * The PostgreSQL commit queue (ADR-0047): every append made outside a transaction, and every
 * broadcast, waits here for the next call of keel_append_many, which commits all of them in one
 * statement: one transaction, one round trip, one WAL flush for as many runs' durable points as
 * came meanwhile (group commit across runs, as the SQLite store's commit queue does). One call is
 * in flight at a time, so the broadcasts and the appends reach the server in the order they were
 * made: a delta's notification is delivered before the commit of the message it streams, with
 * no round trip of its own before it.
 */
import type pg from 'pg';
import {
  keptHead,
  BLOB_HEAD_CHARS,
  StoreError,
  type AppendOptions,
  type EventDraft,
  type StoredEvent,
} from '../port/index.ts';
import type { NewBlob } from '../port/blobs.ts';
import { blobHashesIn } from '../blob-refs.ts';
import { hasNul, NUL_REFUSAL } from '../plain-text.ts';
import { storedEvent } from '../records.ts';
import { appendRefusal, pushDraftColumns } from './shared.ts';
import { isConnectionFailure } from './connection-errors.ts';
import { DEADLOCK_DETECTED, SERIALIZATION_FAILURE, Sql, sqlState, statementName } from './sql.ts';
import { LOCK_NOT_AVAILABLE, timeoutFailure } from './timeouts.ts';

/** Appends committed together at most, and the JSON bytes of their events (a call stays a few MB). */
const MAX_APPENDS = 256;
const MAX_BYTES = 4 * 1024 * 1024;

/** An append that lost a lock race (deadlock) in its subtransaction is queued again, this many times in all. */
const ATTEMPTS = 4;

/** What one notification carries at most (PostgreSQL's limit is 8,000 bytes), with room to spare. */
const MAX_NOTIFY_BYTES = 7_800;

/** Broadcasts of a call that failed are sent again with the next, this many times in all, after 25, 50, 100… ms. */
const NOTIFY_ATTEMPTS = 5;
const RETRY_MS = 25;

/**
 * How long broadcasts alone wait for an append to go with: a model's deltas come right before the
 * durable point that commits what they stream, which then takes them along (one round trip, not
 * two). A client sees a delta this much later at most.
 */
const BROADCAST_LINGER_MS = 2;

const APPEND_MANY = `SELECT o_item, o_seq, o_parent, o_state, o_detail, o_constraint, o_message FROM keel_append_many(
  $1::boolean, $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
  $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::int[], $13::int[],
  $14::text[], $15::text[], $16::int[], $17::bigint[], $18::text[], $19::int[], $20::int[],
  $21::boolean[], $22::text[], $23::boolean[], $24::text[], $25::boolean[], $26::boolean[], $27::text[], $28::text[])`;

/** The SQLSTATE of a refusal, also when the connection told it as a StoreError (timeouts.ts keeps it as the cause). */
const stateOf = (e: unknown): string | undefined => sqlState(e) ?? sqlState((e as { cause?: unknown }).cause);

interface PendingAppend {
  sessionId: string;
  drafts: readonly EventDraft[];
  options: AppendOptions;
  /** Each draft's data as JSON. */
  json: string[];
  bytes: number;
  attempt: number;
  /** Made in a call of its own, beside the queue's: its rows were held by another transaction, or its batch failed on a value the server cannot take. */
  alone?: boolean;
  resolve(events: StoredEvent[]): void;
  reject(e: unknown): void;
}

/** A broadcast message: a session's and what it says, as JSON, numbered in the order made. */
interface PendingBroadcast {
  json: string;
  n: number;
  attempt: number;
}

type Row = {
  o_item: number;
  o_seq: number | null;
  o_parent: string | null;
  o_state: string | null;
  o_detail: string | null;
  o_constraint: string | null;
  o_message: string | null;
};

export class PgCommitQueue {
  private readonly sql: Sql;
  private readonly ready: Promise<void>;
  private appends: PendingAppend[] = [];
  private broadcasts: PendingBroadcast[] = [];
  private flushing: Promise<void> | undefined;
  /** Broadcasts numbered as made here, and the last one sent (or given up). */
  private broadcastCount = 0;
  private broadcastSent = 0;
  private readonly sentWaiters: Array<{ upTo: number; resolve: () => void }> = [];
  /** Broadcast messages not sent: too big for one notification, or whose call failed every attempt. */
  droppedBroadcasts = 0;
  private closed = false;
  /** Told how long each call that committed appends took, in seconds (Store.observeCommits). */
  onCommit: ((seconds: number) => void) | undefined;

  /** `instanceId` marks this process's broadcasts (its own listener skips them). */
  private readonly instanceId: string;

  constructor(pool: pg.Pool, ready: Promise<void>, instanceId: string) {
    this.instanceId = instanceId;
    this.sql = new Sql(pool);
    this.ready = ready;
  }

  /** Appends (see EventOps.append) with the next call; `blobs` are put in the same transaction, before. */
  append(sessionId: string, drafts: readonly EventDraft[], options: AppendOptions = {}): Promise<StoredEvent[]> {
    const seen = new Set<string>();
    const json: string[] = [];
    let bytes = 0;
    // A NUL (which text cannot hold) would fail the whole call: refused here, for this append alone.
    if (
      hasNul(sessionId) ||
      drafts.some((d) => [d.id, d.type, d.runId, d.parentId, d.leaf].some((x) => typeof x === 'string' && hasNul(x)))
    )
      return Promise.reject(
        new StoreError('validation', `a value holds a character PostgreSQL cannot store (${NUL_REFUSAL})`),
      );
    for (const d of drafts) {
      if (d.entry && seen.has(d.id)) return Promise.reject(new StoreError('conflict', `event ${d.id} already exists`));
      if (d.entry) seen.add(d.id);
      const data = JSON.stringify(d.data);
      json.push(data);
      bytes += data.length;
    }
    for (const b of options.blobs ?? []) bytes += b.data.length;
    return new Promise((resolve, reject) => {
      this.appends.push({ sessionId, drafts, options, json, bytes, attempt: 1, resolve, reject });
      this.kick();
    });
  }

  /**
   * A message for the other processes, notified on the schema's channel with the next call: after
   * every append queued before it, before every one queued after it. One too big for a
   * notification is dropped (counted).
   */
  broadcast(sessionId: string, message: unknown): void {
    if (this.closed) return;
    const json = JSON.stringify({ s: sessionId, m: message });
    const n = ++this.broadcastCount;
    if (Buffer.byteLength(json) > MAX_NOTIFY_BYTES - 64) {
      this.droppedBroadcasts++;
      this.markSent(n);
      return;
    }
    this.broadcasts.push({ json, n, attempt: 1 });
    this.kick();
  }

  /** Resolves once every broadcast made before the call went out (or was given up). */
  broadcastsSent(): Promise<void> {
    const upTo = this.broadcastCount;
    if (this.broadcastSent >= upTo) return Promise.resolve();
    // Someone waits for them (a transaction about to commit): they go now, not after lingering.
    if (this.lingering !== undefined) this.kick(true);
    return new Promise((resolve) => this.sentWaiters.push({ upTo, resolve }));
  }

  private markSent(n: number): void {
    this.broadcastSent = Math.max(this.broadcastSent, n);
    for (let i = this.sentWaiters.length - 1; i >= 0; i--) {
      if (this.sentWaiters[i]!.upTo <= this.broadcastSent) this.sentWaiters.splice(i, 1)[0]!.resolve();
    }
  }

  /** Calls in flight (see `afterCalls`), and the notifications waiting to be handed on, in order. */
  private readonly inFlight = new Set<Promise<unknown>>();
  private handing: Promise<void> = Promise.resolve();
  private waitingToHand = 0;

  /**
   * Runs `fn` once the calls in flight now were answered and the appends they committed told (a
   * turn of the event loop after), after the functions given before it; true when it had to wait.
   * The listener hands each notification through it: a notice of this process's own commit then
   * comes after the log published it here, so it is known for this process's own (no read, no
   * wake-up). Calls started later are not waited for: a busy queue never holds notifications back.
   */
  afterCalls(fn: () => void): boolean {
    if (this.inFlight.size === 0 && this.waitingToHand === 0) return false;
    const calls = [...this.inFlight];
    this.waitingToHand++;
    this.handing = this.handing
      .then(() => Promise.allSettled(calls))
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
      .then(() => {
        this.waitingToHand--;
        fn();
      });
    return true;
  }

  /** Calls of appends made alone, in flight beside the queue's. */
  private readonly besides = new Set<Promise<unknown>>();

  private track(call: Promise<unknown>): void {
    this.besides.add(call);
    void call.finally(() => {
      this.besides.delete(call);
      // What it put back (a deadlock's retry) is taken by the queue.
      if (this.appends.length > 0) this.kick();
    });
  }

  /** Resolves once everything queued was sent (or refused). */
  async drained(): Promise<void> {
    if (this.lingering !== undefined) this.kick(true);
    while (this.flushing || this.besides.size > 0) await Promise.all([this.flushing, ...this.besides]);
  }

  /** Nothing more is sent: broadcasts still queued are given up, appends refused. */
  close(): void {
    this.closed = true;
    for (const a of this.appends.splice(0)) a.reject(new StoreError('closed', 'the store is closed'));
    this.broadcasts = [];
    this.markSent(this.broadcastCount);
  }

  /** The broadcasts as notification payloads of at most MAX_NOTIFY_BYTES each. */
  private payloads(broadcasts: readonly PendingBroadcast[]): string[] {
    const out: string[] = [];
    let part: string[] = [];
    let size = 64;
    for (const b of broadcasts) {
      const bytes = Buffer.byteLength(b.json) + 1;
      if (part.length > 0 && size + bytes > MAX_NOTIFY_BYTES) {
        out.push(`{"o":${JSON.stringify(this.instanceId)},"b":[${part.join(',')}]}`);
        part = [];
        size = 64;
      }
      part.push(b.json);
      size += bytes;
    }
    if (part.length > 0) out.push(`{"o":${JSON.stringify(this.instanceId)},"b":[${part.join(',')}]}`);
    return out;
  }

  private lingering: ReturnType<typeof setTimeout> | undefined;

  /** Starts a call unless one is in flight (its loop takes what came meanwhile). */
  private kick(lingered = false): void {
    if (this.flushing) return;
    if (this.appends.length === 0 && !lingered) {
      // Broadcasts alone: they wait a little for an append to take them along.
      this.lingering ??= setTimeout(() => {
        this.lingering = undefined;
        this.kick(true);
      }, BROADCAST_LINGER_MS);
      this.lingering.unref?.();
      return;
    }
    clearTimeout(this.lingering);
    this.lingering = undefined;
    this.flushing = this.flushAll().finally(() => (this.flushing = undefined));
  }

  private async flushAll(): Promise<void> {
    await this.ready.catch(() => {});
    let failures = 0;
    while ((this.appends.length > 0 || this.broadcasts.length > 0) && !this.closed) {
      // After a failed call (the server unreachable), the next waits: 25, 50, 100… ms.
      if (failures > 0) await new Promise((r) => setTimeout(r, RETRY_MS * 2 ** Math.min(failures - 1, 6)));
      // An append made alone (its rows were held, or its batch failed on a value) takes a call
      // of its own beside the queue's: it may wait for a lock, and nothing else waits for it.
      const alone = this.appends.filter((a) => a.alone);
      if (alone.length > 0) {
        this.appends = this.appends.filter((a) => !a.alone);
        for (const a of alone) this.track(this.call([a], []));
      }
      const broadcasts = this.broadcasts;
      this.broadcasts = [];
      const batch: PendingAppend[] = [];
      let bytes = 0;
      while (this.appends.length > 0 && batch.length < MAX_APPENDS) {
        const next = this.appends[0]!;
        if (batch.length > 0 && bytes + next.bytes > MAX_BYTES) break;
        batch.push(this.appends.shift()!);
        bytes += next.bytes;
      }
      if (batch.length === 0 && broadcasts.length === 0) continue;
      failures = (await this.call(batch, broadcasts)) ? 0 : failures + 1;
    }
  }

  /** One call of keel_append_many; false when it failed as a whole. */
  private async call(batch: PendingAppend[], broadcasts: PendingBroadcast[]): Promise<boolean> {
    const blobs = new Map<string, NewBlob>();
    for (const a of batch) for (const b of a.options.blobs ?? []) blobs.set(b.hash, b);
    const cols: unknown[][] = Array.from({ length: 15 }, () => []);
    const items: unknown[][] = Array.from({ length: 6 }, () => []);
    for (const a of batch) {
      const hashes = blobHashesIn(a.json.join(','));
      items[0]!.push(a.sessionId);
      items[1]!.push(a.options.fence?.runId ?? null);
      items[2]!.push(a.options.fence?.token ?? null);
      items[3]!.push(a.options.expectLastSeq ?? null);
      items[4]!.push(a.drafts.length);
      items[5]!.push(hashes.length);
      for (const h of hashes) cols[14]!.push(h);
      pushDraftColumns(cols, a.drafts, a.json);
    }
    const blobList = [...blobs.values()];
    const t0 = performance.now();
    let rows: Row[];
    let answered!: () => void;
    const inFlight = new Promise<void>((resolve) => (answered = resolve));
    this.inFlight.add(inFlight);
    try {
      rows = await this.sql.rows<Row>(APPEND_MANY, [
        // Alone, an append waits for its rows (under the lock timeout), as a transaction's would.
        !(batch.length === 1 && batch[0]!.alone),
        this.payloads(broadcasts),
        blobList.map((b) => b.hash),
        blobList.map((b) => b.data),
        blobList.map((b) => b.mediaType ?? null),
        blobList.map((b) => b.encoding ?? null),
        blobList.map((b) => (b.mediaType !== undefined && b.data.length > BLOB_HEAD_CHARS ? keptHead(b.data) : null)),
        ...items,
        ...cols,
      ]);
    } catch (e) {
      // An append alone in its call fails the call with its own refusal (no subtransaction):
      // the broadcasts it carried go with the next call, as they were.
      if (batch.length === 1 && !isConnectionFailure(e) && (stateOf(e) !== undefined || e instanceof StoreError)) {
        this.broadcasts = [...broadcasts, ...this.broadcasts];
        this.refused(batch[0]!, stateOf(e), e);
        return true;
      }
      // The call failed as a whole: nothing of it committed. A value the server cannot take (a
      // NUL) belongs to one append: with others, each is tried alone, so that only it is refused.
      if (batch.length > 1 && e instanceof StoreError && e.code === 'validation') {
        this.broadcasts = [...broadcasts, ...this.broadcasts];
        this.appends = [...batch.map((a) => Object.assign(a, { alone: true as const })), ...this.appends];
        return true;
      }
      // The broadcasts go with the next call (in order, before what came after them), until given up.
      const retry = broadcasts.filter((b) => ++b.attempt <= NOTIFY_ATTEMPTS);
      this.droppedBroadcasts += broadcasts.length - retry.length;
      this.broadcasts = [...retry, ...this.broadcasts];
      if (retry.length === 0 && broadcasts.length > 0) this.markSent(broadcasts.at(-1)!.n);
      for (const a of batch) a.reject(e);
      return false;
    } finally {
      this.inFlight.delete(inFlight);
      // Told after the appends' callers (they resolve below, before the handing's turn comes).
      answered();
    }
    if (batch.length > 0) this.onCommit?.((performance.now() - t0) / 1000);
    if (broadcasts.length > 0) this.markSent(broadcasts.at(-1)!.n);
    const byItem = new Map<number, Row[]>();
    for (const r of rows) {
      let list = byItem.get(r.o_item);
      if (!list) byItem.set(r.o_item, (list = []));
      list.push(r);
    }
    batch.forEach((a, i) => {
      const got = byItem.get(i + 1) ?? [];
      const failed = got.find((r) => r.o_state !== null);
      if (!failed) {
        a.resolve(a.drafts.map((d, k) => storedEvent(d, a.sessionId, got[k]!.o_seq!, got[k]!.o_parent)));
        return;
      }
      const e = Object.assign(new Error(failed.o_message ?? failed.o_state!), {
        code: failed.o_state!,
        detail: failed.o_detail ?? undefined,
        constraint: failed.o_constraint ?? undefined,
      });
      this.refused(a, failed.o_state!, e);
    });
    return true;
  }

  /** An append refused by the server (`state`, its SQLSTATE): made again when that may help, else its caller told. */
  private refused(a: PendingAppend, state: string | undefined, e: unknown): void {
    // Its rows were held by another transaction: made alone, it waits for them.
    if (state === LOCK_NOT_AVAILABLE && !a.alone) {
      a.alone = true;
      this.appends.push(a);
      return;
    }
    if ((state === DEADLOCK_DETECTED || state === SERIALIZATION_FAILURE) && a.attempt < ATTEMPTS) {
      a.attempt++;
      this.appends.push(a);
      return;
    }
    a.reject(
      e instanceof StoreError
        ? e
        : appendRefusal(timeoutFailure(e, statementName(APPEND_MANY)), a.sessionId, a.options),
    );
  }
}
