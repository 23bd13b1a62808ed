/**
 * Errors of the A2A endpoint as the protocol's own (its JSON-RPC codes, issue 41): what the layers
 * below throw is mapped through the problems of Keel's own API (problems.ts) to the A2A error that
 * says the same. Another tenant's task is not found; an internal error says no more than that.
 */
import { A2AError, RequestMalformedError, TaskNotFoundError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { Logger } from '../../../monitoring/index.ts';
import { toProblem } from '../../problems.ts';

/** Whether an error is one of the SDK's A2A errors (its own `instanceof` works across the SDK's bundles). */
export const isA2aError = (e: unknown): e is A2AError => e instanceof A2AError;

/** Anything thrown, as the A2A error a client gets; internal errors are logged and said no more of. */
export function toA2aError(e: unknown, logger: Logger): A2AError {
  if (isA2aError(e)) return e;
  const p = toProblem(e);
  switch (p.type) {
    case 'not_found':
    case 'gone':
      return new TaskNotFoundError(p.detail);
    case 'validation':
    case 'bad_json':
    case 'unknown_agent':
    case 'already_decided':
    case 'payload_too_large':
      return new RequestMalformedError(p.detail);
    case 'run_busy':
    case 'illegal_transition':
    case 'conflict':
    case 'session_archived':
    case 'idempotency_in_progress':
      return new UnsupportedOperationError(p.detail);
    case 'store_unavailable':
      // An outage, not a fault of Keel's (the worker and the API log it once): said as it is.
      return new A2AError(p.detail ?? 'the database cannot be reached right now: try again shortly');
    default:
      if (logger.isLevelEnabled('error')) logger.error({ err: e }, 'a2a: internal error');
      else process.emitWarning(`keel server: a2a: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      return new A2AError('an internal error occurred');
  }
}
