/**
 * The PostgreSQL store's bounds on how long a statement runs, waits for a lock and leaves a
 * transaction idle (ADR-0046), how they reach the server, and their failures as StoreErrors.
 *
 * A direct connection gets them as startup parameters: they hold for everything on it. Through a
 * transaction pooler (PgBouncer in transaction mode) startup parameters are refused and a session's
 * SET would follow its server connection into other clients' transactions, so each transaction sets
 * them with SET LOCAL, in the same round trip as its BEGIN (see client.ts); a single statement
 * outside a transaction runs with the server's defaults for the role (see pooler.ts).
 */
import { StoreError } from '../port/index.ts';
import { sqlState } from './sql.ts';

export interface PostgresTimeouts {
  /** statement_timeout: a statement running longer is cancelled (StoreError `timeout`). Default 30 s; 0 for none. */
  statementTimeoutMs?: number;
  /** lock_timeout: a statement waiting longer for a lock is cancelled (StoreError `busy`). Default 5 s; 0 for none. */
  lockTimeoutMs?: number;
  /**
   * idle_in_transaction_session_timeout: a transaction left idle this long (a process stuck between
   * two statements) is ended by the server, its locks released. Default 60 s; 0 for none.
   */
  idleInTransactionTimeoutMs?: number;
}

export const DEFAULT_TIMEOUTS: Required<PostgresTimeouts> = {
  statementTimeoutMs: 30_000,
  lockTimeoutMs: 5_000,
  idleInTransactionTimeoutMs: 60_000,
};

/** The options with their defaults, checked: whole milliseconds, 0 for no bound. */
export function resolveTimeouts(o: PostgresTimeouts): Required<PostgresTimeouts> {
  const t = { ...DEFAULT_TIMEOUTS };
  for (const key of Object.keys(t) as Array<keyof PostgresTimeouts>) {
    const v = o[key];
    if (v === undefined) continue;
    if (!Number.isInteger(v) || v < 0)
      throw new StoreError('invalid_option', `${key} must be a whole number of milliseconds >= 0, not ${String(v)}`);
    t[key] = v;
  }
  return t;
}

/** The settings as node-postgres sends them in the startup packet (a direct connection). */
export function startupTimeouts(t: Required<PostgresTimeouts>): {
  statement_timeout: number;
  lock_timeout: number;
  idle_in_transaction_session_timeout: number;
} {
  return {
    statement_timeout: t.statementTimeoutMs,
    lock_timeout: t.lockTimeoutMs,
    idle_in_transaction_session_timeout: t.idleInTransactionTimeoutMs,
  };
}

/** The settings for one transaction only: they end with it, so nothing of them stays on a pooled server connection. */
export function localTimeouts(t: Required<PostgresTimeouts>): string {
  return (
    `SET LOCAL statement_timeout = ${t.statementTimeoutMs}; SET LOCAL lock_timeout = ${t.lockTimeoutMs}; ` +
    `SET LOCAL idle_in_transaction_session_timeout = ${t.idleInTransactionTimeoutMs}`
  );
}

/** 55P03: a lock not obtained in lock_timeout (or NOWAIT). */
export const LOCK_NOT_AVAILABLE = '55P03';
/** 57014: a statement cancelled, here by statement_timeout. */
export const QUERY_CANCELED = '57014';
/** 25P03: the server ended a transaction left idle past idle_in_transaction_session_timeout. */
export const IDLE_IN_TRANSACTION_TIMEOUT = '25P03';

/**
 * A failure of a bound as the StoreError that says so (the statement's name, when it has one, to
 * find it); any other failure unchanged. The transaction it ran in is rolled back as for any
 * failure: nothing of it is kept.
 */
export function timeoutFailure(e: unknown, statement: string | undefined): unknown {
  const state = sqlState(e);
  const what = statement ? `statement ${statement}` : 'a statement';
  if (state === LOCK_NOT_AVAILABLE)
    return new StoreError(
      'busy',
      `${what} waited longer than its lock timeout for a row another transaction holds: try again`,
      { cause: e },
    );
  if (state === QUERY_CANCELED && /statement timeout/i.test((e as Error).message))
    return new StoreError('timeout', `${what} ran longer than its statement timeout and was cancelled`, { cause: e });
  if (state === IDLE_IN_TRANSACTION_TIMEOUT)
    return new StoreError(
      'timeout',
      'the transaction was left idle longer than its idle-in-transaction timeout and was ended by the server',
      { cause: e },
    );
  return e;
}
