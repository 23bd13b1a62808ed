/** Inputs waiting for a run: steering for a running run, messages for the session's next run. */

export interface RunInput {
  id: string;
  sessionId: string;
  /** Steering for one run, or a message waiting for the session's next run. */
  kind: 'steer' | 'message';
  runId: string | null;
  payload: unknown;
  createdAt: number;
}

/** How a take is bounded besides its session, kind and run (see InputOps.take). */
export interface TakeOptions {
  unlessEnded?: boolean;
}

/** The inputs namespace of the port (`store.inputs`). */
export interface InputOps {
  add(i: RunInput): Promise<void>;
  /**
   * Removes and returns, oldest first, the inputs of a kind for a session (and run). `unlessEnded`:
   * takes nothing when the run `runId` has a final status, so that a take may be sent before the
   * run is read (with its read, in one round trip) and still leave an ended run's inputs alone.
   */
  take(
    sessionId: string,
    kind: RunInput['kind'],
    runId?: string | null,
    limit?: number,
    options?: TakeOptions,
  ): Promise<RunInput[]>;
  /** Returns, oldest first, without removing them. */
  list(sessionId: string, kind: RunInput['kind'], runId?: string | null, limit?: number): Promise<RunInput[]>;
  /** Removes one input; false when it was already gone. */
  remove(id: string): Promise<boolean>;
  count(sessionId: string, kind: RunInput['kind']): Promise<number>;
}
