/**
 * The queue role of the port: which runs are due, claiming one for a worker (a lease and a new
 * fencing token) and renewing that lease. The policy (which statuses may be claimed) is the runs
 * layer's: the store receives it (ClaimPolicy) and carries it out.
 */
import type { Checkpoint, RunRecord, RunStatus } from './runs.ts';

/** Which runs a worker may claim: the runs layer's lifecycle (runs/lifecycle/run-status.ts `CLAIM_POLICY`), carried out by the store. */
export interface ClaimPolicy {
  /** Statuses a run is claimed from when no worker holds it (and it is not queued behind). */
  ready: readonly RunStatus[];
  /** Statuses a run is taken over from once its lease expired: a new attempt. */
  recoverable: readonly RunStatus[];
  /** The status a claimed run moves to. */
  to: RunStatus;
}

/** A run that is due (see `ClaimOps.due`), with the due time it was found by (the cursor of the next page). */
export interface DueRun {
  run: RunRecord;
  dueAt: number;
}

/** Where the next page of due runs starts: after this (due time, id). */
export interface DueCursor {
  dueAt: number;
  id: string;
}

/** Which run a claim may take (see ClaimOps.claim). */
export interface StoreClaimOptions {
  runId?: string;
  neverWait?: boolean;
}

/** The claims namespace of the port (`store.claims`). */
export interface ClaimOps {
  /**
   * Takes the oldest run the policy says may be claimed, for `owner`: one in a `ready` status (and
   * not queued behind), or one in a `recoverable` status whose lease expired. It moves to
   * `policy.to` with a lease until `now + leaseMs` and its fencing token increased; its attempt
   * increases for a first start or a recovery (not for a run resuming after a wait).
   * `firstStart`: the run was never claimed before (its attempt was 0), so nothing of its turn
   * and no checkpoint of it can be stored yet. `checkpoint`: the run's stored checkpoint (as
   * `runs.getCheckpoint` reads it), read with the claim: where a claimed run resumes from.
   * `runId`: that run only. `neverWait`: the claim is made inside a transaction that already holds
   * other rows (a message's, a turn end's): it takes only a run whose session's row no other
   * transaction holds, and locks that row with the run, so that neither the claim nor the claimed
   * run's first append waits for a lock (two such transactions can never wait for each other; the
   * tenant's charge, written with the commit, waits at most for another transaction's commit).
   */
  claim(
    owner: string,
    leaseMs: number,
    now: number,
    policy: ClaimPolicy,
    options?: StoreClaimOptions,
  ): Promise<
    { run: RunRecord; previous: RunStatus; firstStart: boolean; checkpoint: Checkpoint | undefined } | undefined
  >;
  /** Extends the lease; false when the run is no longer this owner's (token moved on). */
  renewLease(id: string, owner: string, fencingToken: number, expiresAt: number): Promise<boolean>;
  /**
   * Runs that no worker holds and that are due at `now` (the first of their wait's deadline and
   * their own deadline is at or before it), by due time then id, after `after`, at most `limit`:
   * from the index on the due time (ADR-0034, store/due-runs.ts), never a scan of the idle runs.
   */
  due(now: number, page: { after?: DueCursor; limit: number }): Promise<DueRun[]>;
}
