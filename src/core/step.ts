import { addUsage, costOf, emptyUsage, type AssistantMessage } from '../model/index.ts';
import { requestModel } from './model-request.ts';
import { endStep } from './step-end.ts';
import { closeCalls, runToolCalls, toolCallsOf } from './tool-calls.ts';
import type { TurnState } from './turn-state.ts';
import type { StepOutcome } from './turn-types.ts';

/**
 * One step: one model decision plus the tool effects it directly produced. `step/start`, the
 * request header and the assistant message need no durable point of their own: they become
 * durable with the step's tool calls (before a tool that is not idempotent starts) or with its end.
 */
export async function runStep(t: TurnState): Promise<StepOutcome> {
  t.stepNo++;
  await t.emit('step/start', {});
  const usageBefore = t.usage;
  const call = await requestModel(t);

  if (!call.ok) {
    if (call.error.kind !== 'aborted') {
      await endStep(t, 'failed', usageBefore);
      return { kind: 'failed', error: { kind: 'model', message: call.error.message, model: call.error.toJSON() } };
    }
    // Keep what arrived before the cut; calls it made get results so history has no dangling call.
    const turnCancelled = t.turnCtl.signal.aborted;
    if (call.error.partial.length > 0) {
      const message: AssistantMessage = {
        id: call.messageId,
        role: 'assistant',
        content: call.error.partial,
        interrupted: true,
      };
      await t.emit('assistant/message', {
        message,
        finishReason: 'interrupted',
        usage: emptyUsage(),
        cost: 0,
        timing: { startedAt: Date.now(), durationMs: 0 },
      });
      t.push(message);
      await closeCalls(t, message, toolCallsOf(message), 'the model call was cancelled before this call ran');
    }
    await endStep(t, turnCancelled ? 'cancelled' : 'interrupted', usageBefore);
    return { kind: turnCancelled ? 'cancelled' : 'interrupted' };
  }

  const { result, messageId } = call;
  const message: AssistantMessage = { id: messageId, role: 'assistant', content: result.content };
  const cost = costOf(result.usage, t.agent.pricing);
  t.usage = addUsage(t.usage, result.usage);
  t.cost += cost;
  t.lastInputTokens = result.usage.inputTokens;
  await t.emit('assistant/message', {
    message,
    finishReason: result.finishReason,
    usage: result.usage,
    cost,
    ...(result.responseId !== undefined ? { responseId: result.responseId } : {}),
    ...(result.responseModelId !== undefined ? { responseModelId: result.responseModelId } : {}),
    timing: result.timing,
  });
  t.push(message);

  const calls = toolCallsOf(message);
  if (calls.length === 0) {
    await endStep(t, 'final', usageBefore);
    return { kind: 'final' };
  }
  return runToolCalls(t, message, calls, new Map(), usageBefore);
}
