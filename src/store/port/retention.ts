/**
 * Retention (docs/operations.md): which sessions have been idle long enough for a
 * policy, moving a session's log out of the database once its archive is stored elsewhere (and
 * back on restore), pruning the operational tables in bounded batches, the policies set by API,
 * and the retention worker's leader lease.
 */
import { StoreError } from './errors.ts';

/** What reading or writing a session whose log is in an archive store answers (HTTP 409). */
export function sessionInArchive(sessionId: string): StoreError {
  return new StoreError(
    'session_in_archive',
    `session ${sessionId} is in the archive store (retention moved it out of the database): restore it first with POST /v1/sessions/${sessionId}/restore, rt.retention.restore(id) or keel retention restore ${sessionId}`,
  );
}

/** The operational tables with a retention period (finished rows only, see PRUNE_SQL). */
export const OPERATIONAL_TABLES = [
  'idempotency',
  'schedule_fires',
  'webhook_deliveries',
  'signals',
  'callbacks',
  'flow_control',
  'experiment_items',
] as const;
export type OperationalTable = (typeof OPERATIONAL_TABLES)[number];

/** A session whose log is in an archive store: what its row keeps of where. */
export interface ArchivedSession {
  sessionId: string;
  tenant: string;
  agent: string | null;
  /** The archive store's name (see ArchiveStore.name). */
  store: string;
  /** The archive's key in that store. */
  key: string;
  /** The archive's size (compressed). */
  bytes: number;
  /** Events in the archive (the session's last seq when it was archived). */
  events: number;
  archivedAt: number;
}

/** A session idle since before a cutoff: no run unfinished, and none created or ended since. */
export interface IdleSession {
  sessionId: string;
  tenant: string;
  /** The session's agent, else the agent of its latest run (what per-agent policies go by). */
  agent: string | null;
}

export interface IdleSessionQuery {
  /** Idle since before this time. */
  cutoff: number;
  /** Only this tenant's (and agent's: `agent` is the session's). */
  tenant?: string;
  agent?: string;
  /** Keyset: session ids after this one. */
  after?: string;
  limit: number;
}

export interface ArchivedSessionQuery {
  /** Archived before this time (default: any time). */
  cutoff?: number;
  tenant?: string;
  agent?: string;
  after?: string;
  limit: number;
}

/** A stored policy (set by API): a tenant's, or an agent's within a tenant. */
export interface StoredRetentionPolicy {
  tenant: string;
  /** null: the tenant's own policy. */
  agent: string | null;
  /** The policy as JSON (checked by src/retention/policy.ts). */
  policy: Record<string, unknown>;
  updatedAt: number;
}

/** The retention namespace of the port (`store.retention`). */
export interface RetentionOps {
  /** Sessions idle since before `cutoff`, in id order, at most `limit`. */
  idleSessions(q: IdleSessionQuery): Promise<IdleSession[]>;
  /**
   * Moves a session's log out of the database, its archive being stored (`a` says where): its
   * events, the blobs no other session refers to, and its snapshots go; its row stays, marked
   * (`in_archive_at`), with its title, metadata and runs; appends and reads are refused
   * (`session_in_archive`) until it is restored. In one transaction; false (and nothing done)
   * when the session moved on since it was exported (its last seq is no longer `a.events`), was
   * erased, is in an archive already, or has a run that is not terminal.
   */
  moveToArchive(a: ArchivedSession): Promise<boolean>;
  /** Where the session's archive is, if it is in one. */
  archiveOf(sessionId: string): Promise<ArchivedSession | undefined>;
  /** Sessions in an archive, in id order (archived before `cutoff`, if given). */
  archived(q: ArchivedSessionQuery): Promise<ArchivedSession[]>;
  /**
   * The session is back from its archive (its events appended again, ids kept, in the same
   * transaction): its mark and archive row go, and it counts as active from `restoredAt`.
   */
  restored(sessionId: string, restoredAt: number): Promise<void>;
  /** Forgets the archive row of a session whose archive was deleted (it was erased). */
  forgetArchive(sessionId: string): Promise<void>;
  /** Deletes up to `limit` finished rows of `table` older than `cutoff`; how many it deleted. */
  prune(table: OperationalTable, cutoff: number, limit: number): Promise<number>;
  /** How many finished rows of `table` are older than `cutoff` (counted up to `limit`). */
  countPrunable(table: OperationalTable, cutoff: number, limit: number): Promise<number>;
  /**
   * Takes or renews the lease named `name` for `holder` until `now + ttlMs`: true when `holder`
   * holds it (it was free, expired, or its own). One leader across every process on the store.
   */
  lead(name: string, holder: string, now: number, ttlMs: number): Promise<boolean>;
  /** Gives the lease up, if `holder` holds it. */
  resign(name: string, holder: string): Promise<void>;
  getPolicy(tenant: string, agent: string | null): Promise<StoredRetentionPolicy | undefined>;
  listPolicies(tenant?: string): Promise<StoredRetentionPolicy[]>;
  putPolicy(p: StoredRetentionPolicy): Promise<StoredRetentionPolicy>;
  /** False when there was none. */
  deletePolicy(tenant: string, agent: string | null): Promise<boolean>;
}
