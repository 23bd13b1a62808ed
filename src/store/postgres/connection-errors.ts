/**
 * Which failures of node-postgres mean "the database cannot be reached right now" (ADR-0045): the
 * server restarts or fails over, or the network to it is down. They become StoreUnavailableError
 * (`unavailable`), so the API answers 503 with Retry-After and workers back off, instead of a 500
 * and a worker that spins. Every other failure is left as it is.
 */
import type pg from 'pg';
import { StoreError, StoreUnavailableError } from '../port/index.ts';
import { sqlState } from './sql.ts';

/**
 * SQLSTATEs of a server that is going away or not there yet: class 08 (connection exception),
 * 57P01 admin_shutdown (a fast shutdown ends the sessions), 57P02 crash_shutdown, 57P03
 * cannot_connect_now (starting up, shutting down, in recovery), 53300 too_many_connections (a
 * server coming back, flooded by every pool reconnecting at once).
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);

/** Socket errors of a connection refused, cut or unreachable (Node's `code` on the error). */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNABORTED',
]);

/**
 * node-postgres's own messages for a connection lost or never made (they carry no code): the
 * socket closed under a query, a client used after its connection failed, the pool's wait for a
 * connection or a connect that timed out.
 */
const DRIVER_MESSAGES = [
  /connection terminated/i,
  /client has encountered a connection error/i,
  /client was closed and is not queryable/i,
  /timeout exceeded when trying to connect/i,
  /connection timeout/i,
];

/** Whether `e` says the database cannot be reached (not that it refused what was asked). */
export function isConnectionFailure(e: unknown): boolean {
  if (e instanceof StoreError || typeof e !== 'object' || e === null) return false;
  const state = sqlState(e);
  if (state !== undefined) return state.startsWith('08') || UNAVAILABLE_STATES.has(state);
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && SOCKET_CODES.has(code)) return true;
  // Several addresses tried (localhost as ::1 and 127.0.0.1): an AggregateError of socket errors.
  if (e instanceof AggregateError && e.errors.length > 0) return e.errors.every(isConnectionFailure);
  const message = (e as { message?: unknown }).message;
  return typeof message === 'string' && DRIVER_MESSAGES.some((m) => m.test(message));
}

/** `e` as the port's `unavailable` when it is a connection failure; else `e` itself. */
export function asUnavailable(e: unknown): unknown {
  if (!isConnectionFailure(e)) return e;
  const { code, message } = e as { code?: unknown; message?: unknown };
  return new StoreUnavailableError(
    `${typeof message === 'string' && message ? message : 'the connection failed'}${typeof code === 'string' ? ` (${code})` : ''}`,
    { cause: e },
  );
}

/** Rethrows `e`, as `unavailable` when it is a connection failure (for a promise's `catch`). */
export const rethrowUnavailable = (e: unknown): never => {
  throw asUnavailable(e);
};

/**
 * Watches a client checked out of the pool: a server that ends the connection meanwhile (a
 * restart's fast shutdown, 57P01) emits `error` on it outside any query, and an `error` nobody
 * listens to ends the process. The pool listens only to its idle clients; this listens while the
 * client is out. `lost` is that error, if any (the client is then released as broken); `done`
 * stops listening, before the release.
 */
export function watchCheckedOut(client: pg.PoolClient): { lost(): Error | undefined; done(): void } {
  let lost: Error | undefined;
  const onError = (e: Error) => (lost ??= e);
  client.on('error', onError);
  return { lost: () => lost, done: () => void client.removeListener('error', onError) };
}
