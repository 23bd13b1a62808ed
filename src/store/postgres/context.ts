/** What a PostgreSQL operation runs on (OpContext) and the shape of the operations written over it. */
import type { FlatOps, FlatOpsOf, Namespace } from '../port/layout.ts';
import type { Sql } from './sql.ts';

/**
 * What an operation runs on. `sql` is the pool (outside a transaction: each statement commits on
 * its own) or the transaction's client. `atomic` runs several statements as one unit: their own
 * transaction outside one, a savepoint inside one (so that a failure, caught by the caller, leaves
 * the caller's transaction usable and nothing of the operation behind). `guarded` runs one
 * statement that may fail: as it is outside a transaction, in a savepoint inside one.
 * `inTransaction` tells whether the caller holds a transaction (reads of runs then lock them, see
 * getRun).
 */
export interface OpContext {
  sql: Sql;
  atomic<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
  guarded<T>(fn: (sql: Sql) => Promise<T>): Promise<T>;
  inTransaction: boolean;
  /** In a transaction: runs a write as its last statement, in the round trip of its COMMIT (see TransactionSql.atCommit). */
  atCommit?: (text: string, values: unknown[]) => void;
  /** Sessions this transaction appended to (their rows it holds locked): known to exist until it ends. */
  appended?: Set<string>;
}

/** Every operation of the port, given where it runs. */
export type PgOps = {
  [K in keyof FlatOps]: (ctx: OpContext, ...args: Parameters<FlatOps[K]>) => ReturnType<FlatOps[K]>;
};

/** The operations of one namespace, given where they run. */
export type PgOpsOf<N extends Namespace> = {
  [K in keyof FlatOpsOf<N>]: (ctx: OpContext, ...args: Parameters<FlatOpsOf<N>[K]>) => ReturnType<FlatOpsOf<N>[K]>;
};
