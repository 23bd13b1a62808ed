/** Sessions: their records and the operations on them (the session's events are in events.ts). */
import type { JsonObject } from './json.ts';

export interface SessionRecord {
  id: string;
  /** Who owns it: API keys of other tenants cannot see it. */
  tenant: string;
  createdAt: number;
  title: string | null;
  metadata: JsonObject;
  agent: string | null;
  /** The last event's seq (0 for none): seqs are 1..lastSeq with no gap. */
  lastSeq: number;
  /** The highest turn number of its events (0 for none): the next turn is this + 1. */
  lastTurn: number;
  /** The current leaf of the conversation tree. */
  leafId: string | null;
  origin: { sessionId: string; entryId: string } | null;
  archivedAt: number | null;
  /** When the session was erased: it is a tombstone (its log and content are gone), or null. */
  erasedAt: number | null;
  /** What an erased session consumed, kept for billing: its runs, their usage and cost. */
  erasedTotals: { runs: number; usage: JsonObject; cost: number } | null;
  /**
   * When its log moved out to an archive store (retention, docs/operations.md), or null:
   * its row stays, reads and appends are refused (`session_in_archive`) until it is restored.
   * Not the same as `archivedAt` (a session closed to new messages, still in the database).
   */
  inArchiveAt: number | null;
}

export interface NewSession {
  id: string;
  tenant?: string;
  createdAt: number;
  title?: string | null;
  metadata?: JsonObject;
  agent?: string | null;
  origin?: { sessionId: string; entryId: string } | null;
}

export interface SessionPage {
  /** Pass as `after` for the next page. */
  after?: string;
  /** Only this tenant's sessions. */
  tenant?: string;
  limit: number;
  includeArchived?: boolean;
}

/** The sessions namespace of the port (`store.sessions`). */
export interface SessionOps {
  create(s: NewSession): Promise<SessionRecord>;
  get(id: string): Promise<SessionRecord | undefined>;
  list(page: SessionPage): Promise<SessionRecord[]>;
  update(
    id: string,
    patch: { title?: string | null; metadata?: JsonObject; archivedAt?: number | null },
  ): Promise<void>;
  /**
   * Erases a session: its events, blobs no other session refers to, snapshots, checkpoints, queued
   * inputs, the payloads of its runs (agent specs but their model, options, errors, waits), their
   * signals and callback tokens, its schedule fires, its webhook deliveries and their attempts, the
   * dataset items and batch items copied from it (their `sourceSessionId`), and the idempotency
   * records that name it, in one transaction; the schedules that target it are paused
   * (PAUSED_FOR_ERASED_SESSION), and a running batch left with no pending or running item is
   * `completed` (endedAt `erasedAt`); datasets and batches themselves stay, with fewer items. What
   * remains is a tombstone: the session row (id, tenant, `erasedAt`, `erasedTotals`), its runs'
   * ids, statuses, times, agents, models (`agentSpec` keeps only `model`), usage and cost, for
   * billing (`runs.usageTotals`), and the paused schedules' targets. Refused (RunBusyError) while a
   * run of the session is not terminal; erasing an erased session returns its tombstone. Appends
   * to an erased session are refused (`session_erased`).
   */
  erase(sessionId: string, erasedAt: number): Promise<SessionRecord>;
}
