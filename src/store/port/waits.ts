/**
 * The store's part of the waiting model (ADR-0015): signals delivered to runs (exactly once per
 * run and name, kept when they arrive before the wait) and callback tokens (stored hashed) that
 * let a third party deliver one without an API key.
 */

/**
 * The store's part of the waiting model (ADR-0015): signals delivered to runs (exactly once per
 * run and name, kept when they arrive before the wait) and callback tokens (stored hashed) that
 * let a third party deliver one without an API key.
 */
export interface SignalRecord {
  runId: string;
  name: string;
  /** Any JSON value. */
  payload: unknown;
  /** How it came: the API (`POST /v1/runs/{id}/signals/{name}`), a callback URL, or the library. */
  source: 'api' | 'callback' | 'library';
  receivedAt: number;
  /** When the wait took it (null while it waits for the wait to start). */
  consumedAt: number | null;
}

export interface CallbackRecord {
  /** sha256 (hex) of the token: the token itself is never stored. */
  tokenHash: string;
  runId: string;
  /** The signal a request on the callback URL delivers. */
  name: string;
  createdAt: number;
}

/** The waits namespace of the port (`store.waits`). */
export interface WaitOps {
  /**
   * Records a signal for a run: false (and nothing written) when one with this name was already
   * delivered to it (the primary key (run_id, name)): each signal is delivered once.
   */
  putSignal(s: SignalRecord): Promise<boolean>;
  getSignal(runId: string, name: string): Promise<SignalRecord | undefined>;
  /** Marks the signal taken by its wait; false when it is missing or was taken already. */
  consumeSignal(runId: string, name: string, at: number): Promise<boolean>;
  /** How many signals the run has (taken or kept). */
  countSignals(runId: string): Promise<number>;
  /** Stores a callback token (by its hash); `conflict` when the hash exists. */
  putCallback(c: CallbackRecord): Promise<void>;
  findCallback(tokenHash: string): Promise<CallbackRecord | undefined>;
}
