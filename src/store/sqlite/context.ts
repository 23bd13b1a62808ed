/** The shape of the SQLite operations (synchronous, run on the connection) and what they need of its turn-taking. */
import type { FlatOps, FlatOpsOf, Namespace } from '../port/layout.ts';

/** Every operation of the port, synchronous: what each returns, without the promise. */
export type SyncOps = { [K in keyof FlatOps]: (...args: Parameters<FlatOps[K]>) => Awaited<ReturnType<FlatOps[K]>> };

/** The synchronous operations of one namespace. */
export type SyncOpsOf<N extends Namespace> = {
  [K in keyof FlatOpsOf<N>]: (...args: Parameters<FlatOpsOf<N>[K]>) => Awaited<ReturnType<FlatOpsOf<N>[K]>>;
};

/** What the operations need of the connection's turn-taking (see CommitQueue). */
export interface OperationHooks {
  /** Runs `fn` once the write transaction now open commits; never if the operation's work rolls back. */
  whenCommitted(fn: () => void): void;
  /** Which write transaction is open: a new number at each one's start. */
  transactionNumber(): number;
}
