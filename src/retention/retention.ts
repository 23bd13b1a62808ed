/**
 * Retention (docs/operations.md, ADR-0039): sweeps that archive idle sessions to an
 * archive store, delete them once archived long enough, and prune the operational tables; dry
 * runs that say what a sweep would do; restore by id; the policies set by API. One sweeper runs
 * across every process on the store: the one holding the `retention` lease.
 */
import type { ArchiveStore } from '../archive/index.ts';
import { systemClock, type Clock } from '../core/clock.ts';
import type { SessionLog } from '../session/index.ts';
import {
  NotFoundError,
  OPERATIONAL_TABLES,
  StoreError,
  type ArchivedSession,
  type IdleSession,
  type OperationalTable,
  type SessionRecord,
  type Store,
  type StoredRetentionPolicy,
} from '../store/index.ts';
import {
  checkedSessionRetention,
  RETENTION_DAY_MS,
  PolicyResolver,
  type RetentionSettings,
  type SessionRetention,
} from './policy.ts';
import { RetentionSweeper } from './retention-sweeper.ts';
import { archiveKey, packSession, storeFor, unpackSession } from './session-archive.ts';

export interface RetentionOptions {
  /** The operator's policies (keel.config `retention`). */
  settings?: RetentionSettings;
  /** Where sessions are archived. Without one, a policy that archives makes a sweep fail (a dry run still says what it would do). */
  archive?: ArchiveStore;
  /** Earlier archive stores, still read to restore (and cleaned at deletion) the sessions archived there. */
  formerArchives?: readonly ArchiveStore[];
  /** Rows (or sessions) per transaction. Default 100. */
  batchSize?: number;
  /** How often the leader sweeps. Default an hour. */
  intervalMs?: number;
  /** The leader's lease; renewed between batches. Default a minute. */
  leaseMs?: number;
  /** A pause between batches, for the other writers (ms). Default 0: a yield to the event loop. */
  pauseMs?: number;
  /**
   * The share of the time a sweep works (0 < duty ≤ 1): after each batch it rests long enough for
   * its work to be this share of the whole, leaving the CPU, the disk and the write lock to the
   * runs. Default 0.25 (bench:retention); 1 sweeps flat out.
   */
  dutyCycle?: number;
}

export interface SweepOptions {
  /** Says what it would do, does nothing. */
  dryRun?: boolean;
  /** Only this tenant's sessions (the operational tables are left alone). */
  tenant?: string;
}

/** How many ids a report lists (its counts are whole). */
const LISTED = 1000;
/** Archives exported and put at once. */
const ARCHIVE_CONCURRENCY = 4;
/** Sessions whose logs one write transaction moves out (a short transaction, one commit). */
const MOVES_PER_TRANSACTION = 20;

export interface SweepReport {
  dryRun: boolean;
  tenant: string | null;
  /** The clock's time the sweep judged ages by. */
  at: number;
  sessions: {
    archived: number;
    deleted: number;
    /** Moved on while being archived (a new message), or gone: left for the next sweep. */
    skipped: number;
    /** The first ids (up to 1000) archived (or that would be). */
    archivedIds: string[];
    deletedIds: string[];
    errors: Array<{ sessionId: string; message: string }>;
  };
  /** By table: its period (days, null: forever) and the rows deleted (or that would be). */
  tables: Partial<Record<OperationalTable, { days: number | null; rows: number }>>;
  durationMs: number;
}

/** What a sweep did, as it does it (metrics). */
export interface RetentionObserver {
  archived?(s: { sessionId: string; tenant: string; bytes: number }): void;
  deleted?(s: { sessionId: string; tenant: string }): void;
  pruned?(table: OperationalTable, rows: number): void;
  restored?(s: { sessionId: string; tenant: string }): void;
  /** A sweep of this process's sweeper (as leader) ended: what it did. */
  swept?(r: SweepReport): void;
  /** A sweep of this process's sweeper failed (it tries again at the next interval). */
  sweepFailed?(message: string): void;
}

export class Retention {
  private readonly store: Store;
  private readonly log: SessionLog;
  private readonly clock: Clock;
  private readonly options: RetentionOptions;
  private readonly observers = new Set<RetentionObserver>();
  private readonly sweeper: RetentionSweeper<SweepReport>;
  /** The last sweep the worker of this process made (as leader). */
  lastSweep: SweepReport | undefined;
  lastError: string | undefined;

  constructor(store: Store, log: SessionLog, clock: Clock = systemClock, options: RetentionOptions = {}) {
    this.store = store;
    this.log = log;
    this.clock = clock;
    this.options = options;
    this.sweeper = new RetentionSweeper(
      store,
      {
        ...(options.intervalMs !== undefined ? { intervalMs: options.intervalMs } : {}),
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      },
      {
        sweep: (between) => this.sweepWith({}, between),
        swept: (report) => {
          this.lastSweep = report;
          this.lastError = undefined;
          for (const o of this.observers) o.swept?.(report);
        },
        failed: (message) => {
          this.lastError = message;
          for (const o of this.observers) o.sweepFailed?.(message);
        },
      },
    );
  }

  /** The operator's settings (keel.config). */
  get settings(): RetentionSettings {
    return this.options.settings ?? {};
  }

  get archiveStore(): ArchiveStore | undefined {
    return this.options.archive;
  }

  observe(o: RetentionObserver): () => void {
    this.observers.add(o);
    return () => this.observers.delete(o);
  }

  private get batch(): number {
    return this.options.batchSize ?? 100;
  }

  private async resolver(): Promise<PolicyResolver> {
    return new PolicyResolver(this.settings, await this.store.retention.listPolicies());
  }

  /** The policy a tenant set by API (its agent's, with `agent`), or undefined. */
  getPolicy(tenant: string, agent: string | null = null): Promise<StoredRetentionPolicy | undefined> {
    return this.store.retention.getPolicy(tenant, agent);
  }

  listPolicies(tenant?: string): Promise<StoredRetentionPolicy[]> {
    return this.store.retention.listPolicies(tenant);
  }

  /** Sets a tenant's policy (its agent's, with `agent`); checked first (`invalid_retention_policy`). */
  async putPolicy(tenant: string, agent: string | null, policy: unknown): Promise<StoredRetentionPolicy> {
    const checked = checkedSessionRetention(policy);
    return this.store.retention.putPolicy({
      tenant,
      agent,
      policy: checked as Record<string, unknown>,
      updatedAt: this.clock.now(),
    });
  }

  deletePolicy(tenant: string, agent: string | null = null): Promise<boolean> {
    return this.store.retention.deletePolicy(tenant, agent);
  }

  /** The policy that applies to a tenant's sessions (of an agent), all sources resolved. */
  async effectivePolicy(tenant: string, agent: string | null = null): Promise<Required<SessionRetention>> {
    return (await this.resolver()).effective(tenant, agent);
  }

  /** Where a session's archive is, if it is in one. */
  archiveOf(sessionId: string): Promise<ArchivedSession | undefined> {
    return this.store.retention.archiveOf(sessionId);
  }

  /** Sessions in an archive store, in id order. */
  archived(q: { tenant?: string; after?: string; limit?: number } = {}): Promise<ArchivedSession[]> {
    return this.store.retention.archived({ limit: 100, ...q });
  }

  /**
   * Archives one session now, whatever the policies say: its export, compressed, into the archive
   * store; its log out of the database. Refused while a run of it is not terminal (`run_busy`).
   */
  async archive(sessionId: string): Promise<ArchivedSession> {
    const s = await this.log.session(sessionId);
    const a = await this.archiveOne({ sessionId, tenant: s.tenant, agent: s.agent });
    if (!a)
      throw new StoreError(
        'run_busy',
        `session ${sessionId} has a run that is not finished (or moved on meanwhile): archive it once it is idle`,
      );
    return a;
  }

  /** Exports, stores and moves out one session; undefined when it moved on meanwhile (its archive is removed again). */
  private async archiveOne(s: IdleSession): Promise<ArchivedSession | undefined> {
    const r = await this.archiveMany([s]);
    if (r.errors.length > 0) throw r.errors[0]!.error;
    return r.archived[0];
  }

  /**
   * Archives sessions, MOVES_PER_TRANSACTION at a time, with `pause` between: their exports
   * compressed and put to the store, ARCHIVE_CONCURRENCY at a time (a put waits for its bytes to
   * be durable: in parallel, those waits overlap); then their logs moved out in one short write
   * transaction (one commit for them). One that moved on meanwhile is left as it is, its archive
   * removed (`skipped`).
   */
  private async archiveMany(
    list: readonly IdleSession[],
    pause: () => Promise<void> = async () => {},
  ): Promise<{
    archived: ArchivedSession[];
    skipped: string[];
    errors: Array<{ sessionId: string; error: Error }>;
  }> {
    const archive = this.options.archive;
    if (!archive)
      throw new StoreError(
        'no_archive_store',
        'no archive store is configured (keel.config retention.archive: a directory or an S3 bucket)',
      );
    const out = {
      archived: [] as ArchivedSession[],
      skipped: [] as string[],
      errors: [] as Array<{ sessionId: string; error: Error }>,
    };
    for (let from = 0; from < list.length; from += MOVES_PER_TRANSACTION) {
      if (from > 0) await pause();
      const group = await this.putArchives(archive, list.slice(from, from + MOVES_PER_TRANSACTION), out.errors);
      if (group.length === 0) continue;
      let moved: boolean[];
      try {
        moved = await this.store.transaction(async (tx) => {
          const r: boolean[] = [];
          for (const a of group) r.push(await tx.retention.moveToArchive(a));
          return r;
        });
      } catch (e) {
        for (const a of group) {
          out.errors.push({ sessionId: a.sessionId, error: e as Error });
          await archive.delete(a.key).catch(() => false);
        }
        continue;
      }
      for (const [k, a] of group.entries()) {
        if (!moved[k]) {
          out.skipped.push(a.sessionId);
          await archive.delete(a.key).catch(() => false);
          continue;
        }
        this.log.forget(a.sessionId);
        out.archived.push(a);
        for (const o of this.observers) o.archived?.({ sessionId: a.sessionId, tenant: a.tenant, bytes: a.bytes });
      }
    }
    return out;
  }

  /** Exports, compresses and puts each session's archive, ARCHIVE_CONCURRENCY at a time; what failed goes to `errors`. */
  private async putArchives(
    archive: ArchiveStore,
    list: readonly IdleSession[],
    errors: Array<{ sessionId: string; error: Error }>,
  ): Promise<ArchivedSession[]> {
    const stored: ArchivedSession[] = [];
    let next = 0;
    const putOne = async () => {
      for (let i = next++; i < list.length; i = next++) {
        const s = list[i]!;
        try {
          const { bytes, events } = await packSession(this.log, s.sessionId);
          const key = archiveKey(s.tenant, s.sessionId);
          await archive.put(key, bytes);
          stored.push({
            sessionId: s.sessionId,
            tenant: s.tenant,
            agent: s.agent,
            store: archive.name,
            key,
            bytes: bytes.byteLength,
            events,
            archivedAt: this.clock.now(),
          });
        } catch (e) {
          errors.push({ sessionId: s.sessionId, error: e as Error });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(ARCHIVE_CONCURRENCY, list.length) }, putOne));
    return stored;
  }

  /**
   * Brings a session back from its archive store, with every id it had (session, events, entries):
   * its runs never left. Its archive is removed from the store once the session is back.
   */
  async restore(sessionId: string): Promise<{ sessionId: string; events: number }> {
    const a = await this.store.retention.archiveOf(sessionId);
    if (!a) {
      const s = await this.store.sessions.get(sessionId);
      if (!s) throw new NotFoundError('session', sessionId);
      if (s.erasedAt !== null) throw new StoreError('session_erased', `session ${sessionId} was erased`);
      throw new StoreError('not_in_archive', `session ${sessionId} is not in an archive store: nothing to restore`);
    }
    const archive = this.archiveNamed(a.store);
    if (!archive)
      throw new StoreError(
        'archive_unavailable',
        `session ${sessionId} was archived to ${a.store}, which is not configured here (add it to retention.formerArchives)`,
      );
    const bytes = await archive.get(a.key);
    if (!bytes)
      throw new StoreError(
        'archive_unavailable',
        `the archive of session ${sessionId} (${a.store} ${a.key}) is missing`,
      );
    const now = this.clock.now();
    const s = await unpackSession(this.log, bytes, (tx) => tx.retention.restored(sessionId, now));
    this.log.forget(sessionId);
    await archive.delete(a.key).catch(() => false);
    for (const o of this.observers) o.restored?.({ sessionId, tenant: s.tenant });
    return { sessionId, events: s.lastSeq };
  }

  /** One sweep: archives, deletes, prunes what the policies say (or says what it would, `dryRun`). */
  async sweep(o: SweepOptions = {}): Promise<SweepReport> {
    return this.sweepWith(o, async () => {});
  }

  private async sweepWith(o: SweepOptions, between: () => Promise<void>): Promise<SweepReport> {
    const started = performance.now();
    const dryRun = o.dryRun ?? false;
    const now = this.clock.now();
    const resolver = await this.resolver();
    const report: SweepReport = {
      dryRun,
      tenant: o.tenant ?? null,
      at: now,
      sessions: { archived: 0, deleted: 0, skipped: 0, archivedIds: [], deletedIds: [], errors: [] },
      tables: {},
      durationMs: 0,
    };
    const duty = Math.min(1, Math.max(0.01, this.options.dutyCycle ?? 0.25));
    let workFrom = performance.now();
    const pause = async () => {
      await between();
      const worked = performance.now() - workFrom;
      const ms = Math.max(this.options.pauseMs ?? 0, (worked * (1 - duty)) / duty);
      await new Promise((r) => (ms >= 1 ? setTimeout(r, ms) : setImmediate(r)));
      workFrom = performance.now();
    };
    const tenant = o.tenant !== undefined ? { tenant: o.tenant } : {};
    const archivePeriods = resolver.periods('archiveAfterDays');
    if (!dryRun && archivePeriods.length > 0 && !this.options.archive)
      throw new StoreError(
        'no_archive_store',
        'a retention policy archives sessions, and no archive store is configured (keel.config retention.archive)',
      );

    for (const period of archivePeriods) {
      const cutoff = now - period * RETENTION_DAY_MS;
      for (let after: string | undefined; ;) {
        const page = await this.store.retention.idleSessions({
          cutoff,
          limit: this.batch,
          ...tenant,
          ...(after !== undefined ? { after } : {}),
        });
        const due = page.filter((s) => resolver.effective(s.tenant, s.agent).archiveAfterDays === period);
        if (dryRun) {
          report.sessions.archived += due.length;
          for (const s of due)
            if (report.sessions.archivedIds.length < LISTED) report.sessions.archivedIds.push(s.sessionId);
        } else if (due.length > 0) {
          const r = await this.archiveMany(due, pause);
          report.sessions.archived += r.archived.length;
          report.sessions.skipped += r.skipped.length;
          for (const a of r.archived)
            if (report.sessions.archivedIds.length < LISTED) report.sessions.archivedIds.push(a.sessionId);
          for (const e of r.errors) report.sessions.errors.push({ sessionId: e.sessionId, message: e.error.message });
        }
        if (page.length < this.batch) break;
        after = page.at(-1)!.sessionId;
        await pause();
      }
    }

    for (const period of resolver.periods('deleteAfterDays')) {
      const cutoff = now - period * RETENTION_DAY_MS;
      for (let after: string | undefined; ;) {
        const page = await this.store.retention.archived({
          cutoff,
          limit: this.batch,
          ...tenant,
          ...(after !== undefined ? { after } : {}),
        });
        for (const a of page) {
          if (resolver.effective(a.tenant, a.agent).deleteAfterDays !== period) continue;
          if (!dryRun) {
            try {
              await this.deleteArchived(a, now);
            } catch (e) {
              report.sessions.errors.push({ sessionId: a.sessionId, message: (e as Error).message });
              continue;
            }
          }
          report.sessions.deleted++;
          if (report.sessions.deletedIds.length < LISTED) report.sessions.deletedIds.push(a.sessionId);
        }
        if (page.length < this.batch) break;
        after = page.at(-1)!.sessionId;
        await pause();
      }
    }

    if (o.tenant === undefined) {
      for (const table of OPERATIONAL_TABLES) {
        const days = resolver.tableDays(table);
        const entry = { days, rows: 0 };
        report.tables[table] = entry;
        if (days === null) continue;
        const cutoff = now - days * RETENTION_DAY_MS;
        if (dryRun) {
          entry.rows = await this.store.retention.countPrunable(table, cutoff, 10_000_000);
          continue;
        }
        for (;;) {
          const n = await this.store.retention.prune(table, cutoff, this.batch);
          entry.rows += n;
          if (n > 0) for (const ob of this.observers) ob.pruned?.(table, n);
          if (n < this.batch) break;
          await pause();
        }
      }
    }
    report.durationMs = Math.round(performance.now() - started);
    return report;
  }

  /** Erases a session whose log is in an archive store: its tombstone here, its archive removed there. */
  async eraseArchived(sessionId: string): Promise<SessionRecord> {
    const a = await this.store.retention.archiveOf(sessionId);
    if (!a) return this.store.sessions.erase(sessionId, this.clock.now());
    await this.deleteArchived(a, this.clock.now());
    return (await this.store.sessions.get(sessionId))!;
  }

  /** Every archive store this process reaches: the current one, then the former ones. */
  get archives(): ArchiveStore[] {
    return [...(this.options.archive ? [this.options.archive] : []), ...(this.options.formerArchives ?? [])];
  }

  /** The archive store (the current one or a former one) a session's archive was put in, by its name. */
  private archiveNamed(name: string): ArchiveStore | undefined {
    return storeFor(this.archives, name);
  }

  /** Deletes an archived session: erased (its tombstone keeps what it consumed), its archive removed. */
  private async deleteArchived(a: ArchivedSession, now: number): Promise<void> {
    await this.store.sessions.erase(a.sessionId, now);
    this.log.forget(a.sessionId);
    const archive = this.archiveNamed(a.store);
    if (!archive)
      throw new StoreError(
        'archive_unavailable',
        `session ${a.sessionId} was erased; its archive in ${a.store} is not reachable from here to be removed (add it to retention.formerArchives)`,
      );
    await archive.delete(a.key);
    await this.store.retention.forgetArchive(a.sessionId);
    for (const o of this.observers) o.deleted?.({ sessionId: a.sessionId, tenant: a.tenant });
  }

  /** Starts the sweeper of this process (retention-sweeper.ts): it sweeps every `intervalMs` while it holds the lease. */
  start(): void {
    this.sweeper.start();
  }

  /** One turn of the sweeper: a sweep if this process leads. */
  tick(): Promise<SweepReport | undefined> {
    return this.sweeper.tick();
  }

  /** Stops the sweeper (the sweep under way stops at its next batch) and gives the lease up. */
  stop(): Promise<void> {
    return this.sweeper.stop();
  }
}
