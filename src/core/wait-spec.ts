/**
 * The waiting model of the loop (ADR-0015): what a wait is (`WaitSpec`), how long it may last and
 * what happens then (`WaitPolicy`, `OnDeadline`), and what a tool returns to start one
 * (`sleepUntil`, `waitForSignal`). The built-in tools that wait are in wait-tools.ts.
 *
 * A call the turn cannot finish alone suspends the turn: an approval, a question (ask_user), a
 * sleep, or a signal from outside. The run waits without a worker; whatever ends the wait (a
 * decision, an answer, the clock, a signal, a deadline) is recorded in the log and becomes the
 * call's result when the turn resumes.
 */
import { z } from 'zod';
import type { JsonValue } from '../model/index.ts';

/** What happens when a wait's deadline passes: the run times out, or the call gets a default result. */
export type OnDeadline =
  | 'timed_out'
  /** The call is denied with this reason (an approval), or gets it as a `timeout` error (a question, a signal). */
  | { deny: string }
  /** The call's result: the default answer of a question, or the default payload of a signal. */
  | { answer: JsonValue };

/** How long an approval or a question may wait, and what happens then (an agent's default, or a tool's own). */
export interface WaitPolicy {
  timeoutMs?: number;
  /** Default `timed_out`. */
  onTimeout?: OnDeadline;
}

/** A wait a tool asked for (as stored in the log with its pending call): times are epoch ms. */
export type WaitSpec =
  | { kind: 'sleep'; until: number; wakeOnSteer?: boolean; reason?: string }
  | {
      kind: 'signal';
      name: string;
      deadline?: number;
      onTimeout?: OnDeadline;
      /** The JSON Schema a payload must match (from the tool's zod schema). */
      schema?: JsonValue;
      /** The payload is the call's result as given (a `ToolOutput`): a client-executed tool's (client-tool.ts). */
      payloadIsResult?: true;
    };

const WAIT = Symbol.for('keel.wait');

/** What a tool returns to suspend its run: see `sleepUntil` and `waitForSignal`. Never a result itself. */
export class WaitRequest {
  readonly [WAIT] = true;
  readonly spec: WaitSpec;
  constructor(spec: WaitSpec) {
    this.spec = spec;
  }
}

export const isWaitRequest = (v: unknown): v is WaitRequest =>
  typeof v === 'object' && v !== null && (v as { [WAIT]?: unknown })[WAIT] === true;

const epoch = (t: Date | number): number => {
  const ms = typeof t === 'number' ? t : t.getTime();
  if (!Number.isFinite(ms)) throw new TypeError(`not a time: ${String(t)}`);
  return ms;
};

/**
 * Returned by a tool: the run sleeps (status `sleeping`, no worker) until `when`, then the call's
 * result is "slept until …". `wakeOnSteer`: a steering message wakes it early (else it waits in
 * the inbox until the run wakes). Use `ctx.now()` (the run's clock) for times relative to now.
 */
export function sleepUntil(when: Date | number, o: { wakeOnSteer?: boolean; reason?: string } = {}): WaitRequest {
  return new WaitRequest({
    kind: 'sleep',
    until: epoch(when),
    ...(o.wakeOnSteer ? { wakeOnSteer: true } : {}),
    ...(o.reason ? { reason: o.reason } : {}),
  });
}

/**
 * Returned by a tool: the run waits (status `waiting_for_signal`, no worker) for the signal `name`
 * (`POST /v1/runs/{id}/signals/{name}`, a callback URL, or `rt.runs.signal`); its payload, checked
 * against `schema`, becomes the call's result. A signal delivered before the wait starts is kept
 * and taken at once. `deadline`: what `onTimeout` says happens then (default: the run times out).
 */
export function waitForSignal(
  name: string,
  o: { deadline?: Date | number; onTimeout?: OnDeadline; schema?: z.ZodType } = {},
): WaitRequest {
  if (!SIGNAL_NAME.test(name)) throw new TypeError(`signal name ${JSON.stringify(name)} must match ${SIGNAL_NAME}`);
  let schema: JsonValue | undefined;
  if (o.schema) {
    const { $schema: _ignored, ...s } = z.toJSONSchema(o.schema, { target: 'draft-2020-12', io: 'input' }) as Record<
      string,
      JsonValue
    >;
    schema = s;
  }
  return new WaitRequest({
    kind: 'signal',
    name,
    ...(o.deadline !== undefined ? { deadline: epoch(o.deadline) } : {}),
    ...(o.onTimeout !== undefined ? { onTimeout: o.onTimeout } : {}),
    ...(schema !== undefined ? { schema } : {}),
  });
}

export const SIGNAL_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;
