/**
 * A worker's claim of the oldest claimable run, inside a transaction: its lease, and its event (a
 * start, or the recovery of an interrupted run). Where the run stands in the log is read here, once,
 * and handed to its execution.
 */
import type { NewEvent } from '../../session/index.ts';
import type { Checkpoint, ClaimPolicy, StoreOps } from '../../store/index.ts';
import { lastBoundary } from '../resume.ts';
import type { LifecycleContext } from './context.ts';
import { CLAIM_POLICY } from './run-status.ts';
import type { Claimed, RunBoundary } from './types.ts';

export interface ClaimOptions {
  /**
   * false: only a run no worker holds, not one whose lease expired. A worker just back from a
   * database outage gives the owners of those runs a lease period to renew first (ADR-0045).
   */
  recover?: boolean;
  /**
   * Inside a transaction that holds other rows (a message's, a turn end's): only a run whose
   * session no other transaction holds, so that the claim waits for no lock (see ClaimOps.claim).
   */
  neverWait?: boolean;
}

/** CLAIM_POLICY without the recovery of runs whose lease expired. */
const READY_ONLY: ClaimPolicy = { ...CLAIM_POLICY, recoverable: [] };

/**
 * Where a run stands in the log, read in `ops`: its stored checkpoint (read here unless the caller
 * has it: a claim reads it with the run) and its events after it.
 */
export async function readBoundary(
  ops: StoreOps,
  c: LifecycleContext,
  run: { id: string; sessionId: string },
  stored?: { checkpoint: Checkpoint | undefined },
): Promise<RunBoundary> {
  const checkpoint = stored ? stored.checkpoint : await ops.runs.getCheckpoint(run.id);
  const tail = await c.log.read(run.sessionId, { runId: run.id, afterSeq: checkpoint?.seq ?? 0 }, ops);
  return { checkpoint, tail };
}

/**
 * Claims the oldest claimable run for `owner` and records it. A run claimed before (a recovery, or
 * a run resumed after a wait or a pause) gets where it stands in the log with it, its claim's event
 * included in the tail; a first start has nothing stored yet and reads nothing.
 */
export async function claim(
  tx: StoreOps,
  c: LifecycleContext,
  owner: string,
  leaseMs: number,
  options: ClaimOptions = {},
): Promise<Claimed | undefined> {
  const claimedAt = Date.now();
  const policy = options.recover === false ? READY_ONLY : CLAIM_POLICY;
  const got = await tx.claims.claim(owner, leaseMs, claimedAt, policy, options.neverWait ? { neverWait: true } : {});
  if (!got) return undefined;
  const { run, previous, firstStart, checkpoint } = got;
  const fence = { runId: run.id, token: run.fencingToken };
  const turn = run.turn !== null ? { turn: run.turn } : {};
  const boundary = firstStart ? undefined : await readBoundary(tx, c, run, { checkpoint });
  const event: NewEvent =
    previous === 'running'
      ? {
          type: 'run/interrupted',
          runId: run.id,
          ...turn,
          data: {
            attempt: run.attempt,
            step: lastBoundary(boundary?.checkpoint, boundary?.tail ?? [])?.step ?? 0,
            reason: 'lease_expired',
          },
        }
      : {
          type: 'run/status',
          runId: run.id,
          ...turn,
          data: { from: previous, to: 'running', attempt: run.attempt, reason: `claimed by ${owner}` },
        };
  const appended = await c.log.append(run.sessionId, [event], { tx, fence, trusted: true });
  return {
    run,
    previous,
    firstStart,
    claimedAt,
    ...(boundary ? { boundary: { checkpoint: boundary.checkpoint, tail: [...boundary.tail, ...appended] } } : {}),
  };
}
