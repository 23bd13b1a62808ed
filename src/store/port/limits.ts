/**
 * The store's part of provider flow control (docs/flow-control.md): the state shared by every
 * worker of every process on one store, so that a model's limits hold across a cluster. The
 * decision (policy) is not the store's: the caller passes it (flow-control/decide-limit.ts).
 */

/** One acquisition attempt: all limits of the key at once, atomically. */
export interface LimitAcquire {
  key: string;
  /** The grant's id: its slot and its usage row. */
  id: string;
  /** The waiting process's id (its queue for this key). */
  waiter: string;
  /** Lower goes first (interactive 0, batch 100). */
  rank: number;
  /** When the request started waiting (keeps its place). */
  since: number;
  now: number;
  concurrency?: number;
  requestsPerWindow?: number;
  tokensPerWindow?: number;
  /** Tokens reserved for this request (an estimate, settled after). */
  tokens: number;
  windowMs: number;
  /** The slot's lease (renewed while the call runs). */
  slotLeaseMs: number;
  /** How long a waiter's place holds without being renewed. */
  waiterLeaseMs: number;
}

export type LimitGrant =
  | { granted: true }
  | { granted: false; reason: 'paused' | 'queued' | 'concurrency' | 'requests' | 'tokens'; retryAt: number };

/** What the rows of a key say at an acquisition: the input of a LimitDecision. */
export interface LimitRowState {
  pausedUntil: number;
  ahead: boolean;
  slots: number;
  oldestSlotExpiry: number | null;
  requests: number;
  tokens: number;
  /** The window's grants, oldest first (read only when the decision needs them). */
  usage: () => Array<{ at: number; tokens: number }>;
}

/** Decides an acquisition from what the key's rows say; run by the store inside its transaction. */
export type LimitDecision = (a: LimitAcquire, s: LimitRowState) => LimitGrant;

/** The limits namespace of the port (`store.limits`). */
export interface LimitOps {
  /**
   * Takes a slot and a place in the window for `id`, or tells why not and when to try again:
   * `decide` (the caller's policy) decides from the key's rows, inside the store's transaction.
   */
  acquire(a: LimitAcquire, decide: LimitDecision): Promise<LimitGrant>;
  /** Frees the grant's concurrency slot (its usage stays in the window). */
  release(key: string, id: string): Promise<void>;
  /** Extends the grant's slot lease; false when it is gone (expired and freed). */
  renew(key: string, id: string, expiresAt: number): Promise<boolean>;
  /** Replaces the grant's reserved tokens with the actual count. */
  settle(key: string, id: string, tokens: number): Promise<void>;
  /** Pauses the key for everyone until `until` (never shortens a pause). */
  pause(key: string, until: number): Promise<void>;
  /** Withdraws a waiter's place (it stopped waiting). */
  leaveQueue(key: string, waiter: string): Promise<void>;
  /** What the key's state is now (tests, the inspector). */
  state(
    key: string,
    now: number,
    windowMs?: number,
  ): Promise<{ pausedUntil: number; slots: number; requests: number; tokens: number; waiters: number }>;
}
