/**
 * The waiting model (ADR-0015): one shape for every wait of a run (an approval, a question, a
 * sleep, a signal), each pending call with its own deadline and what happens at it, and how a
 * call's wait ends (its event and its decision in the row). What ends a wait is a run transaction
 * (apply-decisions.ts and those that call it).
 */
import { z } from 'zod';
import type { AgentDefinition, OnDeadline, PendingCall } from '../../core/index.ts';
import type { JsonValue, ToolOutput } from '../../model/index.ts';
import type { NewEvent } from '../../session/index.ts';
import type { JsonObject, RunRecord, RunStatus } from '../../store/index.ts';

/** What a waiting run waits for, as stored in its row (the waiting model, ADR-0015: see waits.ts). */
export interface Waiting {
  /**
   * What it waits for first (its status says the same): approvals, questions, signals, time; or
   * its tenant's quota (`waiting_for_quota`, ADR-0043: no pending call, `expiresAt` is its wake-up).
   */
  kind: PendingCall['kind'] | 'quota';
  /** A quota wait: the scope and limit that refused the run's next model call, and what was charged then. */
  quota?: JsonObject;
  /** The pending calls, each with its deadline if it has one (see WaitingCall). */
  calls: WaitingCall[];
  /** Decisions, answers and ended waits recorded so far, by tool call id. */
  decisions: Record<
    string,
    {
      approved?: boolean;
      input?: JsonValue;
      reason?: string;
      answer?: JsonValue;
      output?: ToolOutput;
      by?: string;
      at: number;
    }
  >;
  /** The first deadline of the calls still waiting (a sleep's wake-up included). */
  expiresAt: number | null;
}

/** What ends a call's wait when nothing else did before: a policy, or (a sleep) the wake-up. */
export type DeadlineAction = OnDeadline | 'wake';

/** A pending call as the run row stores it: with its deadline, if it has one. */
export type WaitingCall = PendingCall & { deadline?: { at: number; on: DeadlineAction } };

export type Decision = Waiting['decisions'][string];

const KIND_STATUS: Record<PendingCall['kind'], RunStatus> = {
  approval: 'waiting_approval',
  input: 'waiting_for_user',
  signal: 'waiting_for_signal',
  sleep: 'sleeping',
};
const PRIORITY: readonly PendingCall['kind'][] = ['approval', 'input', 'signal', 'sleep'];

/** What the run waits for first: approvals, then questions, then signals, then time. */
export function kindOf(calls: readonly PendingCall[]): PendingCall['kind'] {
  return PRIORITY.find((k) => calls.some((c) => c.kind === k)) ?? 'approval';
}

export const statusOf = (calls: readonly PendingCall[]): RunStatus => KIND_STATUS[kindOf(calls)];

export const undecided = (w: Waiting): WaitingCall[] =>
  (w.calls as WaitingCall[]).filter((c) => !w.decisions[c.toolCallId]);

/** The first deadline among the calls still waiting (what the API shows as `expires_at`). */
export function expiresAtOf(w: Waiting): number | null {
  const at = undecided(w).flatMap((c) => (c.deadline ? [c.deadline.at] : []));
  return at.length ? Math.min(...at) : null;
}

/**
 * The wait of a run whose turn just suspended on `pending`: an approval or a question waits as
 * long as its tool says, else its agent, else the run's `waitTimeoutMs`; a sleep until its time;
 * a signal until its deadline, if it has one.
 */
export function newWaiting(
  pending: readonly PendingCall[],
  agent: AgentDefinition | undefined,
  waitTimeoutMs: number | undefined,
  now: number,
): Waiting {
  const calls: WaitingCall[] = pending.map((p) => {
    if (p.wait?.kind === 'sleep') return { ...p, deadline: { at: p.wait.until, on: 'wake' } };
    if (p.wait?.kind === 'signal')
      return p.wait.deadline !== undefined
        ? { ...p, deadline: { at: p.wait.deadline, on: p.wait.onTimeout ?? 'timed_out' } }
        : p;
    const own = agent?.tools.find((t) => t.name === p.toolName)?.wait;
    const timeoutMs = own?.timeoutMs ?? agent?.waits?.timeoutMs ?? waitTimeoutMs;
    const on = own?.onTimeout ?? agent?.waits?.onTimeout ?? 'timed_out';
    return timeoutMs !== undefined ? { ...p, deadline: { at: now + timeoutMs, on } } : p;
  });
  const w: Waiting = { kind: kindOf(calls), calls, decisions: {}, expiresAt: null };
  w.expiresAt = expiresAtOf(w);
  return w;
}

export const iso = (ms: number) => new Date(ms).toISOString();

/** How a call's wait ended: by its deadline's policy, or with an output (the clock, a steer, a signal, a callback, a refusal). */
export type Ending =
  | { by: 'deadline'; on: Exclude<DeadlineAction, 'timed_out'> }
  | { by: 'clock' | 'steer' | 'signal' | 'callback'; output: ToolOutput };

/** The event that records how a call's wait ended, and its decision in the row. */
export function resolution(
  run: RunRecord,
  call: WaitingCall,
  how: Ending,
  now: number,
): { event: NewEvent; decision: Decision } {
  const at = run.turn !== null ? { turn: run.turn } : {};
  const base = { type: 'wait/resolved' as const, runId: run.id, ...at };
  if (how.by !== 'deadline') {
    const kind = call.kind === 'signal' ? 'signal' : 'sleep';
    const name = call.wait?.kind === 'signal' ? { name: call.wait.name } : {};
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind, by: how.by, ...name, output: how.output } },
      decision: { output: how.output, by: how.by, at: now },
    };
  }
  const on = how.on;
  if (call.kind === 'sleep' || on === 'wake') {
    const output: ToolOutput = {
      type: 'text',
      value: `slept until ${iso(call.wait?.kind === 'sleep' ? call.wait.until : now)}`,
    };
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind: 'sleep', by: 'clock', output } },
      decision: { output, by: 'clock', at: now },
    };
  }
  if (call.kind === 'signal') {
    const name = call.wait?.kind === 'signal' ? call.wait.name : '';
    const output: ToolOutput =
      'answer' in on ? { type: 'json', value: on.answer } : { type: 'error', code: 'timeout', message: on.deny };
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind: 'signal', by: 'deadline', name, output } },
      decision: { output, by: 'deadline', at: now },
    };
  }
  if (call.kind === 'input') {
    if ('answer' in on) {
      return {
        event: {
          type: 'user/answer',
          runId: run.id,
          ...at,
          data: { toolCallId: call.toolCallId, answer: on.answer, by: 'deadline' },
        },
        decision: { answer: on.answer, by: 'deadline', at: now },
      };
    }
    // A question nobody answered in time: its result is the `timeout` error, with the policy's reason.
    const output: ToolOutput = { type: 'error', code: 'timeout', message: on.deny };
    return {
      event: { ...base, data: { toolCallId: call.toolCallId, kind: 'input', by: 'deadline', output } },
      decision: { output, by: 'deadline', at: now },
    };
  }
  const reason = 'deny' in on ? on.deny : `no decision before ${iso(call.deadline?.at ?? now)}`;
  return {
    event: {
      type: 'tool/decision',
      runId: run.id,
      ...at,
      data: {
        toolCallId: call.toolCallId,
        approved: false,
        reason,
        by: 'deadline',
        ...(call.unknownOutcome ? { unknownOutcome: true as const } : {}),
      },
    },
    decision: { approved: false, reason, by: 'deadline', at: now },
  };
}

/** The result of a sleep a message woke early. */
export const wokenBySteer = (c: WaitingCall, now: number): ToolOutput => ({
  type: 'text',
  value: `woke at ${iso(now)}, before ${iso((c.wait as { until: number }).until)}: a message arrived`,
});

/** The output of a signal wait: the payload, or an error when it breaks the wait's schema. */
export function signalOutput(call: WaitingCall, payload: unknown): ToolOutput {
  const issues = call.wait?.kind === 'signal' ? payloadIssues(call.wait.schema, payload) : undefined;
  if (issues)
    return {
      type: 'error',
      code: 'invalid_input',
      message: `the signal's payload does not match its schema: ${issues}`,
    };
  if (call.wait?.kind === 'signal' && call.wait.payloadIsResult) return payload as ToolOutput;
  return { type: 'json', value: (payload ?? null) as JsonValue };
}

/** A payload checked against a signal's JSON Schema: the issues, or undefined when it conforms. */
export function payloadIssues(schema: JsonValue | undefined, payload: unknown): string | undefined {
  if (schema === undefined) return undefined;
  const parsed = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]).safeParse(payload);
  return parsed.success ? undefined : z.prettifyError(parsed.error);
}
