/**
 * The end of a step (`endStep`), in a file of its own: the step (step.ts) and its tool calls
 * (tool-calls.ts) both end steps, and need not import each other for it.
 */
import type { Usage } from '../model/index.ts';
import type { StepEndReason } from './events.ts';
import type { TurnState } from './turn-state.ts';

/**
 * Where a step ends, and the only place: `step/end` with the turn's checkpoint. A step that ran
 * tools is a durable point (its results, its end and the checkpoint commit together); any other
 * step end is followed by the turn's end or by the next step, and commits with them.
 */
export async function endStep(t: TurnState, reason: StepEndReason, usageBefore: Usage): Promise<void> {
  const u = t.usage;
  const stepUsage: Usage = {
    inputTokens: u.inputTokens - usageBefore.inputTokens,
    outputTokens: u.outputTokens - usageBefore.outputTokens,
    cachedInputTokens: u.cachedInputTokens - usageBefore.cachedInputTokens,
    reasoningTokens: u.reasoningTokens - usageBefore.reasoningTokens,
  };
  await t.emit(
    'step/end',
    { reason, usage: stepUsage },
    { checkpoint: t.checkpoint(t.stepNo), durable: reason === 'tool-calls' },
  );
}
