/**
 * Step replay (issue 40): for every recorded step of a frozen run, the candidate agent gets
 * exactly the request context that step sent (its messages; the candidate's own system prompt,
 * tools and settings) and makes one decision, through the same loop that runs agents (one step of
 * a turn continued at that step, ADR-0037), so the request it builds is the one a run would send:
 * for the agent version that recorded the run, byte for byte the recorded request (the same
 * fingerprint). No tool runs: the step ends at its decision.
 */
import {
  MemorySink,
  runTurn,
  servedResult,
  type AgentDefinition,
  type RequestHeader,
  type Tool,
  type TurnEvent,
} from '../../core/index.ts';
import { decisionOf, type Decision, type FrozenRun, type Outcome } from './frozen-run.ts';

export interface ReplayedStep {
  step: number;
  /** The candidate's request had the recorded one's fingerprint. */
  requestMatches: boolean;
  recorded: Decision;
  candidate: Decision | null;
  /** Why the candidate made no decision (a model error). */
  error?: string;
  usage: { inputTokens: number; outputTokens: number };
  cost: number;
  latencyMs: number;
}

export interface StepReplay {
  steps: ReplayedStep[];
  /** The candidate's decisions as an outcome: its calls in order, its last step's text. */
  outcome: Outcome;
}

/** A tool that never runs: a step replay compares decisions, and the step ends at one. */
const inert = (t: Tool): Tool => {
  const output = { type: 'text' as const, value: '(not run: step replay)' };
  return {
    ...t,
    approval: 'never',
    interactive: false,
    effect: 'read-only',
    idempotent: true,
    execute: () => servedResult(output, 'mocked'),
  };
};

/** Replays every step of `frozen` on `candidate`; `signal` stops between steps. */
export async function replaySteps(
  candidate: AgentDefinition,
  frozen: FrozenRun,
  signal?: AbortSignal,
): Promise<StepReplay> {
  const steps: ReplayedStep[] = [];
  for (const s of frozen.steps) {
    signal?.throwIfAborted();
    const sink = new MemorySink({ keepDeltas: false });
    const agent: AgentDefinition = {
      ...candidate,
      tools: candidate.tools.map(inert),
      // One step: the turn stops at the boundary after it.
      limits: { ...candidate.limits, maxSteps: s.step },
    };
    const result = await runTurn(agent, {
      sink,
      turn: s.turn,
      scope: `replay:${frozen.run.id}:${s.step}`,
      continueFrom: { step: s.step, conversation: s.messageIds.map((id) => frozen.messages[id]!) },
      ...(signal ? { signal } : {}),
    });
    const header = sink.events.findLast((e): e is TurnEvent & { type: 'request/header' } => e.type === 'request/header')
      ?.data as RequestHeader | undefined;
    const answer = sink.events.findLast((e) => e.type === 'assistant/message') as
      (TurnEvent & { type: 'assistant/message' }) | undefined;
    steps.push({
      step: s.step,
      requestMatches: header?.promptHash === s.promptHash,
      recorded: s.decision,
      candidate: answer ? decisionOf(answer.data.message.content) : null,
      ...(answer ? {} : { error: result.error?.message ?? `the step ended ${result.reason} without a decision` }),
      usage: {
        inputTokens: answer?.data.usage.inputTokens ?? 0,
        outputTokens: answer?.data.usage.outputTokens ?? 0,
      },
      cost: answer?.data.cost ?? 0,
      latencyMs: answer?.data.timing.durationMs ?? 0,
    });
  }
  const decided = steps.filter((s) => s.candidate !== null);
  return {
    steps,
    outcome: {
      status: decided.length === steps.length ? 'completed' : 'failed',
      finalText: steps.at(-1)?.candidate?.text ?? null,
      toolCalls: decided.flatMap((s) => s.candidate!.toolCalls),
      usage: {
        inputTokens: steps.reduce((n, s) => n + s.usage.inputTokens, 0),
        outputTokens: steps.reduce((n, s) => n + s.usage.outputTokens, 0),
      },
      cost: steps.reduce((n, s) => n + s.cost, 0),
      latencyMs: steps.reduce((n, s) => n + s.latencyMs, 0),
    },
  };
}

/** The recorded decisions of `frozen` as the outcome step replay compares with. */
export function recordedStepOutcome(frozen: FrozenRun): Outcome {
  return {
    status: 'completed',
    finalText: frozen.steps.at(-1)?.decision.text ?? null,
    toolCalls: frozen.steps.flatMap((s) => s.decision.toolCalls),
    usage: {
      inputTokens: frozen.steps.reduce((n, s) => n + s.usage.inputTokens, 0),
      outputTokens: frozen.steps.reduce((n, s) => n + s.usage.outputTokens, 0),
    },
    cost: frozen.steps.reduce((n, s) => n + s.cost, 0),
    latencyMs: frozen.steps.reduce((n, s) => n + s.latencyMs, 0),
  };
}
