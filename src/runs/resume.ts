import type { ApprovalDecision, ResumePoint } from '../core/index.ts';
import { addUsage, emptyUsage, type Message, type Usage } from '../model/index.ts';
import type { SessionEvent } from '../session/index.ts';
import type { Checkpoint } from '../store/index.ts';
import type { Waiting } from './lifecycle/waiting.ts';

/**
 * What a run's checkpoint holds (v2, ADR-0008): the turn's counters at a step boundary. Where the
 * turn stands is the log up to the checkpoint's seq; the conversation is a projection of the log,
 * so the checkpoint never copies it.
 */
export interface RunCheckpointState {
  v: 2;
  usage: Usage;
  cost: number;
}

/**
 * Reads a stored checkpoint state in any format: v2, or v1 (before ADR-0008), which also held the
 * whole working conversation; that copy is not needed (the log has every message) and is ignored.
 */
export function checkpointState(state: unknown): RunCheckpointState {
  const s = (state ?? {}) as { usage?: Usage; cost?: number };
  return { v: 2, usage: { ...emptyUsage(), ...(s.usage ?? {}) }, cost: typeof s.cost === 'number' ? s.cost : 0 };
}

/**
 * Where a claimed run continues: `conversation` is the turn's working conversation rebuilt from
 * the log (see Sessions.turnConversation), `tail` the run's events after its checkpoint (all of
 * them without one): the interrupted step's model decision, the tool calls that started or
 * finished, and the decisions recorded while it waited. The result tells the loop which calls ran
 * without a recorded result, so none is silently executed twice.
 */
export function resumePoint(
  checkpoint: Checkpoint | undefined,
  conversation: Message[],
  tail: readonly SessionEvent[],
  waiting: Waiting | null,
): ResumePoint {
  const state = checkpointState(checkpoint?.state);
  let usage = state.usage;
  let cost = state.cost;
  const started = new Set<string>();
  const startedAt: Record<string, number> = {};
  const approvals = new Map<string, ApprovalDecision>();
  // The step whose model decision is on record after the checkpoint: it is finished, not redone.
  let decidedStep: number | undefined;
  // The last step that ended after the stored checkpoint: the run's boundary (see `lastBoundary`).
  const boundary = lastBoundary(checkpoint, tail);

  for (const e of tail) {
    switch (e.type) {
      case 'assistant/message':
        usage = addUsage(usage, e.data.usage);
        cost += e.data.cost;
        decidedStep = e.step;
        break;
      case 'step/end':
        decidedStep = undefined;
        break;
      case 'tool/call':
        started.add(e.data.toolCallId);
        startedAt[e.data.toolCallId] = e.time;
        break;
      case 'tool/result':
        started.delete(e.data.toolCallId);
        break;
      case 'tool/unknown-outcome':
        // Its tool/call came before (maybe before the checkpoint): it started.
        started.add(e.data.toolCallId);
        if (e.data.startedAt !== undefined) startedAt[e.data.toolCallId] = e.data.startedAt;
        // A retry after a person's approval (or a check) is a new attempt: a crash during it asks again.
        if (e.data.resolution === 'retried' || e.data.resolution === 'checked_not_done') {
          const d = approvals.get(e.data.toolCallId);
          if (d?.unknownOutcome) {
            const { unknownOutcome: _done, ...rest } = d;
            if (rest.approved !== undefined || rest.input !== undefined) approvals.set(e.data.toolCallId, rest);
            else approvals.delete(e.data.toolCallId);
          }
        }
        break;
      case 'tool/decision':
        if (e.data.unknownOutcome || started.has(e.data.toolCallId)) {
          // Decided after the call started: on its unknown outcome (ADR-0018). It runs again with
          // the input it ran with (its idempotency key depends on it), whatever decided that.
          const before = approvals.get(e.data.toolCallId);
          started.add(e.data.toolCallId);
          approvals.set(e.data.toolCallId, {
            ...(before ?? { toolCallId: e.data.toolCallId, recorded: true }),
            ...(e.data.editedInput !== undefined ? { input: e.data.editedInput } : {}),
            unknownOutcome: {
              approved: e.data.approved,
              ...(e.data.reason !== undefined ? { reason: e.data.reason } : {}),
            },
          });
          break;
        }
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
      case 'wait/resolved':
        // A sleep or a signal wait that ended: its result is the call's (ADR-0015).
        approvals.set(e.data.toolCallId, { toolCallId: e.data.toolCallId, output: e.data.output, recorded: true });
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
      ...(d.output !== undefined
        ? { output: d.output }
        : d.answer !== undefined
          ? { answer: d.answer }
          : { approved: d.approved === true }),
      ...(d.reason !== undefined ? { reason: d.reason } : {}),
      ...(d.input !== undefined ? { input: d.input } : {}),
    });
  }
  // Only decisions for calls still open in the last model decision apply: those its own tool
  // message (the one after it) has not answered. An earlier turn's results say nothing of them,
  // even under the same call ids (a model may number its calls the same way in every turn).
  const lastAt = conversation.findLastIndex((m) => m.role === 'assistant');
  const lastAssistant = conversation[lastAt];
  const next = conversation[lastAt + 1];
  const answered = new Set(next?.role === 'tool' ? next.content.map((r) => r.toolCallId) : []);
  const openCalls = new Set(
    lastAssistant?.role === 'assistant'
      ? lastAssistant.content.flatMap((p) =>
          p.type === 'tool-call' && !answered.has(p.toolCallId) ? [p.toolCallId] : [],
        )
      : [],
  );
  return {
    conversation,
    // A step interrupted before its model decision was recorded is redone from its start.
    step: decidedStep ?? boundary?.step ?? 0,
    stepOpen: decidedStep !== undefined,
    approvals: [...approvals.values()].filter((a) => openCalls.has(a.toolCallId)),
    started: [...started].filter((id) => openCalls.has(id)),
    startedAt,
    usage,
    cost,
  };
}

/**
 * Where a run stands at its last step boundary: its stored checkpoint, moved on to the last step
 * that ended after it in the log. A step's end is itself a checkpoint (its `step/end` commits with
 * the step's results), so the stored row is written only where the run's record changes too, at
 * the turn's end (ADR-0021); `tail` is the run's events after the stored checkpoint. A step that
 * ended `failed` is no boundary (its turn failed with it, in the same commit).
 */
export function lastBoundary(
  checkpoint: Pick<Checkpoint, 'step' | 'seq'> | undefined,
  tail: readonly SessionEvent[],
): { step: number; seq: number } | undefined {
  let boundary = checkpoint ? { step: checkpoint.step, seq: checkpoint.seq } : undefined;
  for (const e of tail) {
    if (e.type === 'step/end' && e.data.reason !== 'failed' && e.step !== undefined && e.seq > (boundary?.seq ?? 0))
      boundary = { step: e.step, seq: e.seq };
  }
  return boundary;
}
