import { hash } from 'node:crypto';
import { canonicalJson } from './canonical-json.ts';
import { z } from 'zod';
import type { JsonValue, ToolCallPart, ToolErrorCode, ToolOutput } from '../model/index.ts';
import type { ToolSchema } from './events.ts';
import { isServedResult, TurnStoppedByTool, type ServedResult } from './served-result.ts';
import { isWaitRequest, type WaitPolicy, type WaitRequest } from './wait-spec.ts';

export interface ToolContext {
  /** Aborted when the turn is cancelled or the tool times out. */
  signal: AbortSignal;
  toolCallId: string;
  /**
   * Stable for this call: a re-execution of the same call after a crash gets the same key, also
   * when the model was asked again and gave the call a new id (see `idempotencyKey`).
   */
  idempotencyKey: string;
  turn: number;
  step: number;
  /** The run's clock (ms since the epoch) for wait times (see sleepUntil); Date.now when not given. */
  now?(): number;
}

export type ApprovalPolicy<I> = 'never' | 'always' | ((input: I) => boolean);

/**
 * What running a tool does to the world (ADR-0018): `read-only` changes nothing (safe to run
 * again, never needs a durable point); `idempotent` is safe to run again with the same
 * idempotency key; `effectful` may not be: its call is durable before it starts, and a crash
 * while it ran leaves its outcome unknown (see UnknownOutcomePolicy).
 */
export type ToolEffect = 'read-only' | 'idempotent' | 'effectful';

/**
 * What Keel does with an effectful call that started but has no recorded result after a crash:
 * tell the model (an `outcome_unknown` error result), ask a human (the run waits for an approval:
 * approve runs it again with the same idempotency key, deny tells the model it was not retried),
 * or fail the run.
 */
export type UnknownOutcomePolicy = 'tell_model' | 'ask_human' | 'fail_run';

/**
 * Asks the outside world whether the call already happened (by `ctx.idempotencyKey`):
 * `{ done: true, output }` records `output` as its result; `{ done: false }` runs it again with the
 * same key; undefined (or a throw) leaves the decision to the unknown-outcome policy.
 */
export type OutcomeCheck<I> = (
  input: I,
  ctx: ToolContext,
) => CheckResult | undefined | Promise<CheckResult | undefined>;
export type CheckResult = { done: true; output: unknown } | { done: false };

export interface ToolOptions<S extends z.ZodType, R> {
  name: string;
  description: string;
  input: S;
  execute(input: z.infer<S>, ctx: ToolContext): R | Promise<R>;
  approval?: ApprovalPolicy<z.infer<S>>;
  /** What running it does to the world (ADR-0018); default `effectful` (or what `idempotent` says). */
  effect?: ToolEffect;
  /**
   * @deprecated use `effect`: true is `effect: 'idempotent'`, false `effect: 'effectful'`.
   * Safe to run again with the same idempotency key: crash recovery may re-execute it.
   */
  idempotent?: boolean;
  /** For an effectful call whose outcome is unknown after a crash; overrides the agent's policy. */
  onUnknownOutcome?: UnknownOutcomePolicy;
  /** Asked first when an effectful call's outcome is unknown after a crash (see OutcomeCheck). */
  check?: OutcomeCheck<z.infer<S>>;
  /**
   * Make the call durable before it runs even though it is idempotent: for a tool that starts
   * something recovery must find again by its call id (a subagent). Tools that are not
   * idempotent always are.
   */
  recordCallFirst?: boolean;
  timeoutMs?: number;
  /** Never runs alongside another call of the same step. */
  sequential?: boolean;
  /**
   * A person answers this call: the loop never executes it; the turn suspends until the answer
   * arrives and the answer is the result (see askUser).
   */
  interactive?: boolean;
  /** How long an approval of this tool's calls (or its question, if interactive) may wait, and what then (ADR-0015). */
  wait?: WaitPolicy;
}

/** A tool with its input type erased, as the loop holds it. */
export interface Tool {
  readonly name: string;
  readonly description: string;
  readonly input: z.ZodType;
  readonly schema: ToolSchema;
  readonly approval: ApprovalPolicy<unknown>;
  readonly effect: ToolEffect;
  /** Safe to run again (`effect` is not `effectful`). */
  readonly idempotent: boolean;
  readonly onUnknownOutcome?: UnknownOutcomePolicy;
  readonly check?: OutcomeCheck<unknown>;
  readonly recordCallFirst: boolean;
  readonly timeoutMs: number | undefined;
  readonly sequential: boolean;
  readonly interactive: boolean;
  readonly wait?: WaitPolicy;
  /**
   * An interactive tool's answer without asking: a rerun serves the answer a person gave to the
   * same question in its source run (src/runs/reruns); undefined asks.
   */
  readonly recordedAnswer?: (input: unknown, step: number) => ServedResult | undefined;
  execute(input: unknown, ctx: ToolContext): unknown;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export function tool<S extends z.ZodType, R>(options: ToolOptions<S, R>): Tool {
  if (!TOOL_NAME.test(options.name)) {
    throw new TypeError(`tool name ${JSON.stringify(options.name)} must match ${TOOL_NAME} (what providers accept)`);
  }
  if (options.timeoutMs !== undefined && !(options.timeoutMs > 0)) {
    throw new TypeError(`tool ${options.name}: timeoutMs must be a positive number`);
  }
  if (
    options.effect !== undefined &&
    options.idempotent !== undefined &&
    (options.effect !== 'effectful') !== options.idempotent
  ) {
    throw new TypeError(
      `tool ${options.name}: effect '${options.effect}' contradicts idempotent: ${options.idempotent} (idempotent is deprecated: use effect alone)`,
    );
  }
  const effect: ToolEffect = options.effect ?? (options.idempotent === true ? 'idempotent' : 'effectful');
  const { $schema: _ignored, ...inputSchema } = z.toJSONSchema(options.input, {
    target: 'draft-7',
    io: 'input',
  }) as Record<string, JsonValue>;
  return {
    name: options.name,
    description: options.description,
    input: options.input,
    schema: { name: options.name, description: options.description, inputSchema },
    approval: (options.approval ?? 'never') as ApprovalPolicy<unknown>,
    effect,
    idempotent: effect !== 'effectful',
    ...(options.onUnknownOutcome ? { onUnknownOutcome: options.onUnknownOutcome } : {}),
    ...(options.check ? { check: options.check as OutcomeCheck<unknown> } : {}),
    recordCallFirst: options.recordCallFirst ?? false,
    timeoutMs: options.timeoutMs,
    sequential: options.sequential ?? false,
    interactive: options.interactive ?? false,
    ...(options.wait ? { wait: options.wait } : {}),
    execute: options.execute as Tool['execute'],
  };
}

/**
 * The idempotency key of a call: from its place in the run (scope, turn, step, position among the
 * step's calls) and what it does (tool and input), never from the provider's call id. A step the
 * model is asked for again after a crash gets new call ids; when it makes the same call, the tool
 * gets the same key and can tell the repeat. A different call gets a different key.
 */
export function idempotencyKey(
  scope: string,
  at: { turn: number; step: number; index: number },
  toolName: string,
  input: unknown,
): string {
  return hash(
    'sha256',
    `${scope}\u0000${at.turn}\u0000${at.step}\u0000${at.index}\u0000${toolName}\u0000${canonicalJson(input)}`,
    'hex',
  ).slice(0, 32);
}

export const toolError = (code: ToolErrorCode, message: string): ToolOutput => ({ type: 'error', code, message });

/** Checks the call against the tool's schema. */
export function validateCall(
  tools: ReadonlyMap<string, Tool>,
  call: ToolCallPart,
): { ok: true; tool: Tool; input: unknown } | { ok: false; output: ToolOutput } {
  const t = tools.get(call.toolName);
  if (!t) {
    const known = [...tools.keys()].join(', ') || 'none';
    return { ok: false, output: toolError('unknown_tool', `no tool named "${call.toolName}" (available: ${known})`) };
  }
  if (typeof call.input !== 'object' || call.input === null || Array.isArray(call.input)) {
    const shown = typeof call.input === 'string' ? call.input : JSON.stringify(call.input);
    return {
      ok: false,
      output: toolError('invalid_input', `arguments must be a JSON object, got: ${shown.slice(0, 200)}`),
    };
  }
  const parsed = t.input.safeParse(call.input);
  if (!parsed.success) {
    return { ok: false, output: toolError('invalid_input', z.prettifyError(parsed.error)) };
  }
  return { ok: true, tool: t, input: parsed.data };
}

export function needsApproval(t: Tool, input: unknown): boolean {
  return t.approval === 'always' || (typeof t.approval === 'function' && t.approval(input) === true);
}

export function toOutput(value: unknown): ToolOutput {
  if (typeof value === 'string') return { type: 'text', value };
  if (value === undefined) return { type: 'json', value: null };
  // Round-trip so what the log holds is exactly what a replay would see (Dates become strings...).
  return { type: 'json', value: JSON.parse(JSON.stringify(value)) as JsonValue };
}

class ToolTimeoutError extends Error {
  constructor(ms: number) {
    super(`tool timed out after ${ms} ms`);
    this.name = 'TimeoutError';
  }
}

/**
 * Runs one validated call. Never throws: every failure becomes an error output the model sees.
 * It does not wait for a tool that ignores its abort signal: the result is settled at the abort.
 * A tool that returns a wait (sleepUntil, waitForSignal) gets it back as is: the call suspends;
 * one that serves a result (servedResult) gets it back as is too. A TurnStoppedByTool it throws is
 * returned (not thrown: calls run side by side), and the caller ends the turn with it.
 */
export async function executeTool(
  t: Tool,
  input: unknown,
  ctx: Omit<ToolContext, 'signal'>,
  turnSignal: AbortSignal,
): Promise<ToolOutput | WaitRequest | ServedResult | TurnStoppedByTool> {
  if (turnSignal.aborted) return toolError('cancelled', 'the turn was cancelled before the tool ran');
  const ctl = new AbortController();
  const onTurnAbort = () => ctl.abort(turnSignal.reason);
  turnSignal.addEventListener('abort', onTurnAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stopped = new Promise<ToolOutput>((resolve) => {
    ctl.signal.addEventListener(
      'abort',
      () => {
        const reason: unknown = ctl.signal.reason;
        resolve(
          reason instanceof ToolTimeoutError
            ? toolError('timeout', reason.message)
            : toolError('cancelled', 'the turn was cancelled while the tool was running'),
        );
      },
      { once: true },
    );
  });
  if (t.timeoutMs !== undefined) {
    const ms = t.timeoutMs;
    timer = setTimeout(() => ctl.abort(new ToolTimeoutError(ms)), ms);
  }
  const run = (async (): Promise<ToolOutput | WaitRequest | ServedResult | TurnStoppedByTool> => {
    try {
      const value = await t.execute(input, { ...ctx, signal: ctl.signal });
      return isWaitRequest(value) || isServedResult(value) ? value : toOutput(value);
    } catch (error) {
      if (error instanceof TurnStoppedByTool) return error;
      if (ctl.signal.aborted) return stopped;
      const message = error instanceof Error ? error.message : String(error);
      return toolError('execution_error', message || 'tool threw');
    }
  })();
  try {
    return await Promise.race([run, stopped]);
  } finally {
    clearTimeout(timer);
    turnSignal.removeEventListener('abort', onTurnAbort);
  }
}

/**
 * Starts tasks in order with at most `limit` running at once; a sequential task waits for the
 * running ones to finish and runs alone. Returns one promise per task, in task order.
 */
export function runPool<T>(
  tasks: ReadonlyArray<{ sequential: boolean; run: () => Promise<T> }>,
  limit: number,
): Promise<T>[] {
  // One task (the common step) starts at once, as the pool would start it: nothing to schedule.
  if (tasks.length <= 1) return tasks.map((task) => task.run());
  const settled: Promise<T>[] = [];
  const resolvers: Array<(v: Promise<T>) => void> = [];
  for (let i = 0; i < tasks.length; i++) settled.push(new Promise<T>((resolve) => resolvers.push(resolve)));
  const active = new Set<Promise<unknown>>();
  void (async () => {
    for (let i = 0; i < tasks.length; i++) {
      const task = tasks[i]!;
      while (active.size > 0 && (task.sequential || active.size >= limit)) await Promise.race(active);
      const p = task.run();
      resolvers[i]!(p);
      if (task.sequential) {
        await p.catch(() => {});
        continue;
      }
      const tracked = p.catch(() => {}).finally(() => active.delete(tracked));
      active.add(tracked);
    }
  })();
  return settled;
}
