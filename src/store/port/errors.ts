/** The port's errors: every backend fails with these (a `code` to tell them apart). */
import type { RunGuard, RunRecord } from './runs.ts';

export class StoreError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreError';
    this.code = code;
  }
}

/** The store was closed: every later operation fails the same way (background loops end on it). */
export const isClosedStore = (e: unknown): boolean => e instanceof StoreError && e.code === 'closed';

/**
 * The database cannot be reached right now (it restarts, fails over, or the network to it is
 * down): nothing was done, or, for a commit cut off mid-way, its outcome is unknown. Callers try
 * again later (the API answers 503 with Retry-After; workers back off; ADR-0045). Only a backend
 * behind a network connection fails with it: SQLite never does.
 */
export class StoreUnavailableError extends StoreError {
  constructor(detail: string, options?: { cause?: unknown }) {
    super('unavailable', `the database is unavailable: ${detail}`, options);
    this.name = 'StoreUnavailableError';
  }
}

/** The database could not be reached (see StoreUnavailableError). */
export const isStoreUnavailable = (e: unknown): boolean => e instanceof StoreError && e.code === 'unavailable';

export class NotFoundError extends StoreError {
  constructor(what: string, id: string) {
    super('not_found', `${what} ${id} does not exist`);
    this.name = 'NotFoundError';
  }
}

export class SeqConflictError extends StoreError {
  constructor(sessionId: string, expected: number, actual: number) {
    super('seq_conflict', `session ${sessionId} is at seq ${actual}, not ${expected}`);
    this.name = 'SeqConflictError';
  }
}

export class RunBusyError extends StoreError {
  readonly activeRunId: string;
  constructor(sessionId: string, activeRunId: string) {
    super('run_busy', `session ${sessionId} already has an active run ${activeRunId}`);
    this.name = 'RunBusyError';
    this.activeRunId = activeRunId;
  }
}

export class RunConflictError extends StoreError {
  readonly run: RunRecord | undefined;
  constructor(id: string, run: RunRecord | undefined, guard: RunGuard) {
    super(
      'run_conflict',
      run
        ? `run ${id} changed meanwhile (status ${run.status}, fencing token ${run.fencingToken}; expected ${guard.statuses ? `status ${guard.statuses.join('|')}` : 'any status'}${guard.fencingToken !== undefined ? `, token ${guard.fencingToken}` : ''})`
        : `run ${id} does not exist`,
    );
    this.name = 'RunConflictError';
    this.run = run;
  }
}

export class FencedError extends StoreError {
  constructor(runId: string, token: number, current: number | undefined) {
    super(
      'fenced',
      `run ${runId}: fencing token ${token} is stale (now ${current ?? 'none'}): this worker no longer holds the run`,
    );
    this.name = 'FencedError';
  }
}

export class SchemaVersionError extends StoreError {
  constructor(message: string) {
    super('schema_version', message);
    this.name = 'SchemaVersionError';
  }
}
