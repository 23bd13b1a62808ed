import { newId } from './ids.ts';
import { boundedOutput, toolOutputView } from './large-payloads.ts';
import type { AssistantMessage, ToolCallPart, ToolMessage, ToolOutput, ToolResultPart, Usage } from '../model/index.ts';
import type { PendingCall, UnknownOutcomeInfo, UnknownOutcomeResolution } from './events.ts';
import { isServedResult, servedResult, TurnStoppedByTool, type ServedResult } from './served-result.ts';
import { endStep } from './step-end.ts';
import {
  executeTool,
  idempotencyKey,
  needsApproval,
  runPool,
  toOutput,
  toolError,
  validateCall,
  type CheckResult,
  type Tool,
} from './tools.ts';
import { isWaitRequest, type WaitSpec } from './wait-spec.ts';
import type { TurnState } from './turn-state.ts';
import type { ApprovalDecision, ResumePoint, StepOutcome } from './turn-types.ts';

/** The tool calls of a model decision, in the model's order. */
export function toolCallsOf(m: AssistantMessage): ToolCallPart[] {
  return m.content.filter((p): p is ToolCallPart => p.type === 'tool-call');
}

/** The tool message that answers `assistant`: the message after it, created on first use. */
function toolMessageFor(t: TurnState, assistant: AssistantMessage): ToolMessage {
  const last = t.conversation.at(-1);
  if (last !== assistant) {
    if (last?.role === 'tool' && t.conversation.at(-2) === assistant) return last;
    // Resumed or compacted conversations may hold a copy of the message: find it by id.
    const next = t.conversation[t.conversation.findLastIndex((m) => m.id === assistant.id) + 1];
    if (next?.role === 'tool') return next;
  }
  const m: ToolMessage = { id: newId(), role: 'tool', content: [] };
  t.push(m);
  return m;
}

async function recordResult(
  t: TurnState,
  assistant: AssistantMessage,
  call: ToolCallPart,
  output: ToolOutput,
  durationMs: number,
  source?: ServedResult['source'],
): Promise<void> {
  // A result over the log's bounds is recorded as an error saying so (large-payloads.ts).
  output = boundedOutput(output, t.options.largePayloads);
  const toolMessage = toolMessageFor(t, assistant);
  await t.emit('tool/result', {
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    output,
    toolMessageId: toolMessage.id,
    durationMs,
    ...(source !== undefined ? { source } : {}),
  });
  // The model sees the policy's view of a large result (the log keeps all of it: large-payloads.ts).
  const part: ToolResultPart = {
    type: 'tool-result',
    toolCallId: call.toolCallId,
    toolName: call.toolName,
    output: toolOutputView(output, t.options.largePayloads),
  };
  // Results stay in the model's call order whatever order they were recorded in.
  toolMessage.content.push(part);
  if (toolMessage.content.length > 1) {
    const order = toolCallsOf(assistant).map((c) => c.toolCallId);
    toolMessage.content.sort((a, b) => order.indexOf(a.toolCallId) - order.indexOf(b.toolCallId));
  }
}

export async function closeCalls(
  t: TurnState,
  assistant: AssistantMessage,
  calls: readonly ToolCallPart[],
  why: string,
): Promise<void> {
  for (const c of calls) await recordResult(t, assistant, c, toolError('cancelled', why), 0);
}

/**
 * A tool whose call must be durable before it starts, so recovery knows it may have run: any
 * tool that is not idempotent, and one that asks for it (a subagent, which recovery must find
 * again by its call id).
 */
export const recordsCallFirst = (tool: Tool): boolean => tool.effect === 'effectful' || tool.recordCallFirst;

type Plan = {
  call: ToolCallPart;
  key: string;
  output?: ToolOutput;
  tool?: Tool;
  input?: unknown;
  pending?: 'approval' | 'input';
  /** Where `output` came from, when it was served (a rerun's reused answer). */
  source?: ServedResult['source'];
  recorded?: boolean;
  /** Runs again after its outcome was unknown: its decision is durable before it starts. */
  retry?: boolean;
  unknownOutcome?: UnknownOutcomeInfo;
};

/** Asks the tool's `check` (bounded by its timeout, else 30 s); undefined when it cannot tell. */
async function runCheck(
  t: TurnState,
  tool: Tool,
  input: unknown,
  call: ToolCallPart,
  key: string,
): Promise<CheckResult | undefined> {
  if (!tool.check) return undefined;
  const ctl = new AbortController();
  const onAbort = () => ctl.abort(t.turnCtl.signal.reason);
  t.turnCtl.signal.addEventListener('abort', onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => {
      ctl.abort(new Error('check timed out'));
      resolve(undefined);
    }, tool.timeoutMs ?? 30_000);
  });
  try {
    const ctx = {
      signal: ctl.signal,
      toolCallId: call.toolCallId,
      idempotencyKey: key,
      turn: t.turnNo,
      step: t.stepNo,
      now: t.options.now ?? Date.now,
    };
    const r = await Promise.race([Promise.resolve(tool.check(input, ctx)), timeout]);
    return r && typeof r === 'object' && typeof r.done === 'boolean' ? r : undefined;
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
    t.turnCtl.signal.removeEventListener('abort', onAbort);
  }
}

/**
 * An effectful call that started before a crash and has no result (ADR-0018): the tool's check
 * first, then a person's decision if one was asked for, then the policy (the tool's, else the
 * agent's, else tell the model). Each resolution is recorded as a `tool/unknown-outcome` event.
 */
async function resolveUnknownOutcome(
  t: TurnState,
  call: ToolCallPart,
  key: string,
  tool: Tool,
  input: unknown,
  decision: ApprovalDecision | undefined,
  startedAt: number | undefined,
): Promise<Plan> {
  const note = (resolution: UnknownOutcomeResolution, reason?: string) =>
    t.emit('tool/unknown-outcome', {
      toolCallId: call.toolCallId,
      toolName: call.toolName,
      idempotencyKey: key,
      ...(startedAt !== undefined ? { startedAt } : {}),
      resolution,
      ...(reason !== undefined ? { reason } : {}),
    });
  const asked = decision?.unknownOutcome;
  if (asked) {
    if (asked.approved) {
      await note('retried', asked.reason);
      return { call, key, tool, input, recorded: true, retry: true };
    }
    await note('not_retried', asked.reason);
    const why = asked.reason ? `: ${asked.reason}` : '';
    return {
      call,
      key,
      recorded: true,
      output: toolError(
        'denied',
        `the run was interrupted while this call ran and a person chose not to run it again${why}; it may not have taken effect`,
      ),
    };
  }
  const checked = await runCheck(t, tool, input, call, key);
  if (checked?.done === true) {
    await note('checked_done');
    return { call, key, recorded: true, output: toOutput(checked.output) };
  }
  if (checked?.done === false) {
    await note('checked_not_done');
    return { call, key, tool, input, recorded: true, retry: true };
  }
  const policy = tool.onUnknownOutcome ?? t.agent.onUnknownOutcome ?? 'tell_model';
  if (policy === 'ask_human') {
    await note('asked_human');
    return {
      call,
      key,
      recorded: true,
      pending: 'approval',
      unknownOutcome: { idempotencyKey: key, ...(startedAt !== undefined ? { startedAt } : {}) },
    };
  }
  if (policy === 'fail_run') {
    await note('failed');
    throw new Error(
      `the outcome of tool call ${call.toolCallId} (${call.toolName}, idempotency key ${key}) is unknown: the run was interrupted while it ran, and its unknown-outcome policy is fail_run`,
    );
  }
  await note('told_model');
  // It may or may not have had its effect before the interruption: say so, never guess.
  return {
    call,
    key,
    recorded: true,
    output: toolError(
      'outcome_unknown',
      'the run was interrupted while this call ran and the tool is not idempotent: it may or may not have taken effect',
    ),
  };
}

/**
 * Runs the calls of one model decision. `decided` holds approval decisions (when resuming):
 * calls that need approval and have none are left open and the turn suspends.
 */
export async function runToolCalls(
  t: TurnState,
  assistant: AssistantMessage,
  calls: readonly ToolCallPart[],
  decided: ReadonlyMap<string, ApprovalDecision>,
  usageBefore: Usage,
  started: ReadonlySet<string> = new Set(),
  startedAt: Readonly<Record<string, number>> = {},
): Promise<StepOutcome> {
  const plans: Plan[] = [];
  // A call's place among all the calls of its model decision (its idempotency key depends on it),
  // also when only some of them are still open (resuming).
  const all = toolCallsOf(assistant);
  for (const [i, call] of calls.entries()) {
    const at = all.findIndex((c) => c.toolCallId === call.toolCallId);
    const index = at >= 0 ? at : i;
    const decision = decided.get(call.toolCallId);
    const effective = decision?.input !== undefined ? { ...call, input: decision.input } : call;
    const key = idempotencyKey(t.scope, { turn: t.turnNo, step: t.stepNo, index }, effective.toolName, effective.input);
    if (decision?.output !== undefined) {
      // A wait that ended (a sleep, a signal): its result was recorded with its end.
      plans.push({ call, key, output: decision.output });
      continue;
    }
    if (decision?.answer !== undefined) {
      plans.push({ call, key, output: { type: 'json', value: decision.answer } });
      continue;
    }
    if (decision && decision.approved === false && !decision.unknownOutcome) {
      plans.push({ call, key, output: toolError('denied', decision.reason ?? 'the user denied this call') });
      continue;
    }
    const v = validateCall(t.tools, effective);
    if (!v.ok) plans.push({ call: effective, key, output: v.output });
    else if (v.tool.interactive) {
      // A rerun may answer a question with the answer a person gave to the same one (src/runs/reruns).
      const answered = v.tool.recordedAnswer?.(v.input, t.stepNo);
      plans.push(
        answered
          ? { call: effective, key, output: answered.output, source: answered.source }
          : { call: effective, key, pending: 'input' },
      );
    } else if (started.has(call.toolCallId) && v.tool.effect === 'effectful') {
      plans.push(await resolveUnknownOutcome(t, effective, key, v.tool, v.input, decision, startedAt[call.toolCallId]));
    } else if (started.has(call.toolCallId))
      plans.push({ call: effective, key, tool: v.tool, input: v.input, recorded: true });
    else if (!decision && needsApproval(v.tool, v.input)) plans.push({ call: effective, key, pending: 'approval' });
    else plans.push({ call: effective, key, tool: v.tool, input: v.input });
  }

  let mustRecordFirst = false;
  for (const p of plans) {
    if (p.pending) {
      const data = {
        toolCallId: p.call.toolCallId,
        toolName: p.call.toolName,
        input: p.call.input,
        assistantMessageId: assistant.id,
      };
      await (p.pending === 'approval'
        ? t.emit('tool/approval', { ...data, ...(p.unknownOutcome ? { unknownOutcome: p.unknownOutcome } : {}) })
        : t.emit('user/question', data));
    } else if (p.recorded) {
      // Its tool/call is already in the log, with the same idempotency key. An effectful call run
      // again after its outcome was unknown: its decision to run again is durable first.
      if (p.retry) mustRecordFirst = true;
      continue;
    } else {
      await t.emit('tool/call', {
        toolCallId: p.call.toolCallId,
        toolName: p.call.toolName,
        input: p.call.input,
        idempotencyKey: p.key,
        assistantMessageId: assistant.id,
      });
      if (p.tool && recordsCallFirst(p.tool)) mustRecordFirst = true;
    }
  }
  // Write-ahead where correctness needs it: before a tool that is not idempotent starts, its call
  // (and the step so far) is durable, so recovery knows it may have run.
  if (mustRecordFirst) await t.flush();
  else if (plans.some((p) => p.tool !== undefined)) await t.beforeEffects();

  const runnable = plans.filter((p) => p.tool !== undefined);
  const settled = runPool(
    runnable.map((p) => ({
      sequential: p.tool!.sequential,
      run: async () => {
        const t0 = performance.now();
        const output = await executeTool(
          p.tool!,
          p.input,
          {
            toolCallId: p.call.toolCallId,
            idempotencyKey: p.key,
            turn: t.turnNo,
            step: t.stepNo,
            now: t.options.now ?? Date.now,
          },
          t.turnCtl.signal,
        );
        return { output, durationMs: Math.round(performance.now() - t0) };
      },
    })),
    t.agent.toolConcurrency,
  );
  const byCall = new Map(runnable.map((p, i) => [p.call.toolCallId, settled[i]!]));

  // Results are recorded in the model's order, each as soon as all before it are in. A tool that
  // returned a wait (a sleep, a signal) has no result yet: its call suspends the turn.
  const waits = new Map<string, WaitSpec>();
  for (const p of plans) {
    if (p.pending) continue;
    const done = p.output
      ? { output: p.source ? servedResult(p.output, p.source) : p.output, durationMs: 0 }
      : await byCall.get(p.call.toolCallId)!;
    if (isWaitRequest(done.output)) {
      waits.set(p.call.toolCallId, done.output.spec);
      continue;
    }
    // A tool that ends the turn: the first in the model's order ends it (the others' are ignored).
    if (done.output instanceof TurnStoppedByTool) throw done.output;
    if (isServedResult(done.output))
      await recordResult(t, assistant, p.call, done.output.output, done.durationMs, done.output.source);
    else await recordResult(t, assistant, p.call, done.output, done.durationMs);
  }

  const pending: PendingCall[] = plans.flatMap((p): PendingCall[] => {
    const base = { toolCallId: p.call.toolCallId, toolName: p.call.toolName, input: p.call.input };
    if (p.pending)
      return [{ ...base, kind: p.pending, ...(p.unknownOutcome ? { unknownOutcome: p.unknownOutcome } : {}) }];
    const wait = waits.get(p.call.toolCallId);
    return wait ? [{ ...base, kind: wait.kind, wait }] : [];
  });
  if (pending.length > 0 && !t.turnCtl.signal.aborted) return { kind: 'suspended', pending };
  if (t.turnCtl.signal.aborted) {
    await closeCalls(
      t,
      assistant,
      pending.map((p) => ({ type: 'tool-call', toolCallId: p.toolCallId, toolName: p.toolName, input: p.input })),
      'the turn was cancelled while this call waited for a decision',
    );
    await endStep(t, 'cancelled', usageBefore);
    return { kind: 'cancelled' };
  }
  await endStep(t, 'tool-calls', usageBefore);
  return { kind: 'tool-calls' };
}

/**
 * Finishes the open step of a suspended or interrupted turn (if there is one) with the given
 * decisions; without an open step the turn simply continues at its next step boundary.
 */
export async function finishOpenStep(t: TurnState, resume: ResumePoint): Promise<StepOutcome | undefined> {
  const assistantIndex = t.conversation.findLastIndex((m) => m.role === 'assistant');
  const assistant = t.conversation[assistantIndex] as AssistantMessage | undefined;
  const answered = new Set<string>();
  const next = t.conversation[assistantIndex + 1];
  if (next?.role === 'tool') for (const r of next.content) answered.add(r.toolCallId);
  const open =
    assistant && !assistant.interrupted ? toolCallsOf(assistant).filter((c) => !answered.has(c.toolCallId)) : [];
  const approvals = resume.approvals ?? [];
  if (open.length === 0) {
    if (approvals.length > 0) throw new Error(`cannot resume: no open tool call ${approvals[0]!.toolCallId}`);
    // The turn stopped after the model's final answer was recorded (before the step's end, or
    // before the turn's): the answer stands; asking the model again would answer twice.
    const final =
      assistant !== undefined &&
      !assistant.interrupted &&
      assistantIndex === t.conversation.length - 1 &&
      toolCallsOf(assistant).length === 0;
    if (resume.stepOpen && assistant && !assistant.interrupted)
      await endStep(t, final ? 'final' : 'tool-calls', t.usage);
    return final ? { kind: 'final' } : undefined;
  }
  const decided = new Map<string, ApprovalDecision>();
  for (const d of approvals) {
    if (!open.some((c) => c.toolCallId === d.toolCallId))
      throw new Error(`cannot resume: no open tool call ${d.toolCallId}`);
    decided.set(d.toolCallId, d);
    if (d.recorded) continue;
    if (d.answer !== undefined) await t.emit('user/answer', { toolCallId: d.toolCallId, answer: d.answer });
    else {
      await t.emit('tool/decision', {
        toolCallId: d.toolCallId,
        approved: d.approved === true,
        ...(d.reason !== undefined ? { reason: d.reason } : {}),
        ...(d.input !== undefined ? { editedInput: d.input } : {}),
      });
    }
  }
  return runToolCalls(t, assistant!, open, decided, t.usage, new Set(resume.started ?? []), resume.startedAt ?? {});
}
