/**
 * What the server's routes and middleware share: the options a server is made with, the context
 * the routes work with (the runtime, metrics, logger, auth caches) and the Hono env of a request
 * (its tenant and the idempotency claim). Routes import this, never app.ts.
 */
import type { IdempotencyClaim, Runtime } from '../runs/index.ts';
import type { KeelMetrics, Logger } from '../monitoring/index.ts';
import type { ApiKeyCache, AuthEnv, FailedAuthLimiter } from './auth.ts';
import type { ClientAddress } from './client-address.ts';

export interface ServerOptions {
  runtime: Runtime;
  /** `required`: every request needs an API key; `off`: one `default` tenant (loopback only). */
  auth: 'required' | 'off';
  version: string;
  bodyLimitBytes?: number;
  importLimitBytes?: number;
  heartbeatMs?: number;
  sseQueueLimit?: number;
  /** Requests a minute per API key, unless the key sets its own (0: no limit). */
  rateLimitPerMinute?: number;
  /** How long a cancel waits for the worker that holds the run before cancelling it here. */
  cancelGraceMs?: number;
  /**
   * What `/metrics` asks for: this bearer token when set; otherwise an API key when keys are
   * required; nothing when auth is off (loopback).
   */
  metricsToken?: string;
  /** How long an Idempotency-Key is remembered (default 24 h); older records are pruned. */
  idempotencyTtlMs?: number;
  /** Failed authentications a client address may make in a minute before it is refused (429). Default 30. */
  authFailuresPerMinute?: number;
  /**
   * Addresses of the reverse proxies in front of the server (exact addresses, e.g. `10.0.0.5`).
   * From one of them, the client is the last address in X-Forwarded-For that is not a trusted
   * proxy; from anyone else, X-Forwarded-For is ignored. Default: none (the socket's peer).
   */
  trustedProxies?: readonly string[];
  /** Structured logs (pino): requests, runs, failures. Default: none. */
  logger?: Logger;
}

export type AppEnv = { Variables: AuthEnv['Variables'] & IdempotencyEnv['Variables'] };

/**
 * What the idempotency middleware tells a route that records its effect in its own transaction:
 * the key to record, and the effect an earlier attempt already recorded (status 0) if there is one.
 */
export type IdempotencyEnv = { Variables: { idempotency?: IdempotencyClaim; recordedEffect?: string } };

/** What the routes work with: the runtime (never the store: the runtime is the server's interface to everything durable). */
export interface AppContext {
  rt: Runtime;
  /** Releases the log's recent deltas (kept while the server runs, for streams that start mid-message). */
  releaseRecentDeltas: () => void;
  /** Prometheus metrics of this process (`/metrics`), and its logger. */
  metrics: KeelMetrics;
  logger: Logger;
  /** API keys looked up recently, and failed authentications by client address. */
  keys: ApiKeyCache;
  authFailures: FailedAuthLimiter;
  /** Who a request comes from, for the limits per address (see client-address.ts). */
  clientAddress: ClientAddress;
  options: Required<Omit<ServerOptions, 'runtime' | 'metricsToken' | 'logger'>> &
    Pick<ServerOptions, 'runtime' | 'metricsToken' | 'logger'>;
}
