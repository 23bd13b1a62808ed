import { isClientToolSignal } from '../core/client-tool.ts';
import { createHash, randomBytes } from 'node:crypto';
import { SIGNAL_NAME, type WaitSpec } from '../core/index.ts';
import { StoreError, type RunRecord } from '../store/index.ts';
import { runScope } from './run-scope.ts';
import { iso } from './lifecycle/waiting.ts';
import { settleWait } from './lifecycle/apply-decisions.ts';
import type { RunLifecycle } from './lifecycle/run-lifecycle.ts';
import type { FinishOptions } from './lifecycle/types.ts';
import type { WaitingCall } from './lifecycle/waiting.ts';
import type { SessionEvent } from '../session/index.ts';
import type { StoreOps } from '../store/index.ts';

/**
 * The waits of a runtime's runs (ADR-0015): what ends them from outside a run (deadlines and
 * wake-ups for the worker's sweep, signals, callbacks, steering that wakes a sleep). The waiting
 * model itself is lifecycle/waiting.ts, and each change to a waiting run is a run transaction of
 * the lifecycle (apply-decisions.ts, expire-wait.ts, wake-on-steer.ts, deliver-signal.ts).
 */

export { MAX_SIGNALS_PER_RUN } from './lifecycle/deliver-signal.ts';

/** The largest signal payload a run takes, as JSON (UTF-8 bytes): a signal is a message, not a file. */
export const MAX_SIGNAL_PAYLOAD_BYTES = 256 * 1024;

/** Refuses a signal the API, a callback or the library may not deliver, before anything is stored (see `Waits.deliver`). */
export function checkSignal(name: string, payload: unknown): void {
  if (typeof name !== 'string' || !SIGNAL_NAME.test(name))
    throw new StoreError('validation', `signal name ${JSON.stringify(name)} must match ${SIGNAL_NAME}`);
  const json = JSON.stringify(payload ?? null);
  const bytes = json === undefined ? 0 : Buffer.byteLength(json);
  if (bytes > MAX_SIGNAL_PAYLOAD_BYTES)
    throw new StoreError(
      'payload_too_large',
      `the payload of signal ${name} is ${bytes} bytes of JSON: at most ${MAX_SIGNAL_PAYLOAD_BYTES} are taken`,
    );
}

export const tokenHash = (token: string): string => createHash('sha256').update(token).digest('hex');

/** The waits of the runs of one runtime: deadlines, wake-ups, signals, callbacks. */
export class Waits {
  private readonly lifecycle: RunLifecycle;
  private readonly resolveAgent: FinishOptions['resolveAgent'];

  constructor(lifecycle: RunLifecycle, resolveAgent: FinishOptions['resolveAgent']) {
    this.lifecycle = lifecycle;
    this.resolveAgent = resolveAgent;
  }

  private get now(): number {
    return this.lifecycle.clock.now();
  }

  /**
   * Inside the transaction that put the run in a waiting status (its turn's end): a signal that
   * came before the wait started, or a time already past, ends the wait at once.
   */
  settleIn(tx: StoreOps, run: RunRecord): Promise<{ run: RunRecord; events: SessionEvent[] }> {
    return settleWait(tx, this.lifecycle, run);
  }

  /**
   * Ends the waits whose deadline has passed (the worker's sweep): each by its policy; a policy of
   * `timed_out` ends the run. Returns the run as it is after, or undefined when nothing was due
   * (or another process got there first).
   */
  async expire(runId: string): Promise<RunRecord | undefined> {
    const now = this.now;
    try {
      return await this.lifecycle.expireWait(runId, now, this.resolveAgent);
    } catch (e) {
      // It moved meanwhile (decided, cancelled, or woken by another worker): nothing to do here.
      if (e instanceof StoreError) return undefined;
      throw e;
    }
  }

  /** A steering message came for a waiting run: a sleep of it that wakes on steering wakes now. */
  async steered(runId: string): Promise<RunRecord | undefined> {
    const now = this.now;
    try {
      return await this.lifecycle.wakeOnSteer(runId, now);
    } catch (e) {
      if (e instanceof StoreError) return undefined;
      throw e;
    }
  }

  /**
   * Delivers the signal `name` to a run, exactly once: stored (a second delivery is refused,
   * `already_delivered`); if the run waits for it (whatever else it waits for too), its wait ends
   * in the same transaction; if it has not started waiting for it yet, it is kept and taken when
   * the wait starts. Refused before anything is stored: a name that breaks SIGNAL_NAME
   * (`validation`), a payload over MAX_SIGNAL_PAYLOAD_BYTES as JSON (`payload_too_large`), a
   * payload that does not match the waiting call's schema (`validation`), a run that has
   * MAX_SIGNALS_PER_RUN signals already (`signal_limit`).
   */
  async deliver(
    runId: string,
    name: string,
    payload: unknown,
    source: 'api' | 'callback' | 'library',
  ): Promise<{ run: RunRecord; consumed: boolean }> {
    checkSignal(name, payload);
    return this.lifecycle.deliverSignal(runId, name, payload, source, this.now);
  }

  /**
   * A callback token for the signal `name` of a run: 32 random bytes (base64url), stored as its
   * sha256. Whoever holds it may deliver that signal, once, with `POST /v1/callbacks/{token}`.
   */
  async issueCallback(runId: string, name: string): Promise<{ token: string; path: string }> {
    checkSignal(name, null);
    const token = randomBytes(32).toString('base64url');
    await this.lifecycle.store.waits.putCallback({ tokenHash: tokenHash(token), runId, name, createdAt: this.now });
    return { token, path: `/v1/callbacks/${token}` };
  }

  /** Delivers the signal a callback token stands for (`not_found` for an unknown token). */
  async deliverByToken(token: string, payload: unknown): Promise<{ run: RunRecord; consumed: boolean; name: string }> {
    const cb = await this.lifecycle.store.waits.findCallback(tokenHash(token));
    if (!cb) throw new StoreError('not_found', 'no such callback');
    const r = await this.deliver(cb.runId, cb.name, payload, 'callback');
    return { ...r, name: cb.name };
  }
}

/**
 * For a tool: a callback URL path (`/v1/callbacks/{token}`) that delivers the signal `name` to the
 * run the tool belongs to, without an API key. Hand it to a third party, then return
 * `waitForSignal(name)`. The token (32 random bytes) is shown only here: the store keeps its hash.
 */
export function callbackFor(name: string): Promise<{ token: string; path: string }> {
  const scope = runScope.getStore();
  if (!scope) throw new Error('callbackFor works only inside a tool of a run');
  return scope.callback(name);
}

/** Wait details for the API: what a sleeping or signal-waiting call waits for. */
export function waitDetails(c: WaitingCall): Record<string, unknown> {
  const w: WaitSpec | undefined = c.wait;
  return {
    ...(w?.kind === 'sleep'
      ? { until: iso(w.until), wake_on_steer: w.wakeOnSteer === true, ...(w.reason ? { reason: w.reason } : {}) }
      : {}),
    ...(w?.kind === 'signal' ? { signal: w.name, ...(w.schema !== undefined ? { schema: w.schema } : {}) } : {}),
    ...(w?.kind === 'signal' && isClientToolSignal(w.name) ? { client_tool: true } : {}),
    ...(c.deadline ? { deadline: iso(c.deadline.at), on_deadline: c.deadline.on } : {}),
  };
}
