import type { RunRecord, RunStatus } from '../store/index.ts';

/**
 * What the workers of a runtime tell about the runs they hold, besides the events they commit
 * (metrics and logs listen; see `Runtime.observe`). Called synchronously: keep it cheap.
 */
export interface RunObserver {
  /** A worker claimed `run` at `now`; it was `previous` (`running`: its last worker lost the lease). */
  claimed?(run: RunRecord, previous: RunStatus, now: number): void;
  /** An execution here lost its run's lease (another worker may hold it now). */
  leaseLost?(run: RunRecord): void;
}

/** Several observers as one, each call guarded: an observer that throws never stops a worker. */
export class RunObservers implements Required<RunObserver> {
  private readonly all = new Set<RunObserver>();

  add(o: RunObserver): () => void {
    this.all.add(o);
    return () => void this.all.delete(o);
  }

  claimed(run: RunRecord, previous: RunStatus, now: number): void {
    for (const o of this.all) {
      try {
        o.claimed?.(run, previous, now);
      } catch {
        // An observer's failure is its own.
      }
    }
  }

  leaseLost(run: RunRecord): void {
    for (const o of this.all) {
      try {
        o.leaseLost?.(run);
      } catch {
        // An observer's failure is its own.
      }
    }
  }
}
