import type { ApprovalDecision, ResumePoint } from '../core/index.ts';
import { addUsage, emptyUsage, type Message, type ToolMessage, type Usage } from '../model/index.ts';
import type { SessionEvent } from '../session/index.ts';
import type { Checkpoint } from '../store/index.ts';
import type { Waiting } from './book.ts';

/** What a run's checkpoint holds: the turn's working conversation at a step boundary. */
export interface CheckpointState {
  conversation: Message[];
  usage: Usage;
  cost: number;
}

/**
 * Where a claimed run continues: its checkpoint (the last step boundary, or where it suspended)
 * plus what its log recorded after it: steering that joined, the interrupted step's model decision
 * and the tool calls that started or finished, and the decisions recorded while it waited.
 * The result tells the loop which calls ran without a recorded result, so none is silently
 * executed twice.
 */
export function resumePoint(checkpoint: Checkpoint, tail: readonly SessionEvent[], waiting: Waiting | null): ResumePoint {
  const state = checkpoint.state as CheckpointState;
  const conversation: Message[] = state.conversation.map((m) => (m.role === 'tool' ? { ...m, content: [...m.content] } : m));
  let usage = state.usage ?? emptyUsage();
  let cost = state.cost ?? 0;
  const started = new Set<string>();
  const approvals = new Map<string, ApprovalDecision>();
  // The step whose model decision is on record after the checkpoint: it is finished, not redone.
  let decidedStep: number | undefined;

  for (const e of tail) {
    switch (e.type) {
      case 'user/message':
        conversation.push(e.data.message);
        break;
      case 'assistant/message':
        conversation.push(e.data.message);
        usage = addUsage(usage, e.data.usage);
        cost += e.data.cost;
        decidedStep = e.step;
        break;
      case 'step/end':
        decidedStep = undefined;
        break;
      case 'tool/call':
        started.add(e.data.toolCallId);
        break;
      case 'tool/result': {
        started.delete(e.data.toolCallId);
        const part = { type: 'tool-result' as const, toolCallId: e.data.toolCallId, toolName: e.data.toolName, output: e.data.output };
        const last = conversation.at(-1);
        if (last?.role === 'tool' && last.id === e.data.toolMessageId) last.content.push(part);
        else conversation.push({ id: e.data.toolMessageId, role: 'tool', content: [part] } satisfies ToolMessage);
        break;
      }
      case 'tool/decision':
        approvals.set(e.data.toolCallId, {
          toolCallId: e.data.toolCallId,
          approved: e.data.approved,
          recorded: true,
          ...(e.data.reason !== undefined ? { reason: e.data.reason } : {}),
          ...(e.data.editedInput !== undefined ? { input: e.data.editedInput } : {}),
        });
        break;
      case 'user/answer':
        approvals.set(e.data.toolCallId, { toolCallId: e.data.toolCallId, answer: e.data.answer, recorded: true });
        break;
      default:
        break;
    }
  }
  // Decisions in the run row but not yet seen in the tail (none should be: both commit together).
  for (const [toolCallId, d] of Object.entries(waiting?.decisions ?? {})) {
    if (approvals.has(toolCallId)) continue;
    approvals.set(toolCallId, {
      toolCallId,
      recorded: true,
      ...(d.answer !== undefined ? { answer: d.answer } : { approved: d.approved === true }),
      ...(d.reason !== undefined ? { reason: d.reason } : {}),
      ...(d.input !== undefined ? { input: d.input } : {}),
    });
  }
  // Only decisions for calls still open in the last model decision apply.
  const lastAssistant = conversation.findLast((m) => m.role === 'assistant');
  const answered = new Set(conversation.flatMap((m) => (m.role === 'tool' ? m.content.map((r) => r.toolCallId) : [])));
  const openCalls = new Set(
    lastAssistant?.role === 'assistant' ? lastAssistant.content.flatMap((p) => (p.type === 'tool-call' && !answered.has(p.toolCallId) ? [p.toolCallId] : [])) : [],
  );
  return {
    conversation,
    // A step interrupted before its model decision was recorded is redone from its start.
    step: decidedStep ?? checkpoint.step,
    stepOpen: decidedStep !== undefined,
    approvals: [...approvals.values()].filter((a) => openCalls.has(a.toolCallId)),
    started: [...started].filter((id) => openCalls.has(id)),
    usage,
    cost,
  };
}
