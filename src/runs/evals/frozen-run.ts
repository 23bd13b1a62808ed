/**
 * A dataset item's frozen copy of a run (issue 40): what it was asked (its trigger message and,
 * for each step, the exact request context the loop sent, rebuilt from the log as the replay
 * check does), what it decided at each step, and how it ended. Step replay gives a candidate each
 * recorded request; every experiment scores against this copy, never against the live session.
 */
import type { AssistantMessage, Message, UserMessage } from '../../model/index.ts';
import { recordedRequests, runEvents, type SessionEvent, type SessionLog } from '../../session/index.ts';
import type { JsonObject, RunRecord } from '../../store/index.ts';

/** A model decision: its text and its tool calls (name and arguments), in order. */
export interface Decision {
  text: string;
  toolCalls: Array<{ name: string; input: unknown }>;
}

export interface FrozenStep {
  step: number;
  turn: number;
  /** The recorded request's fingerprint: a replay that sends the same gets the same. */
  promptHash: string;
  provider: string;
  modelId: string;
  /** The messages the request sent, by id (in `FrozenRun.messages`). */
  messageIds: string[];
  decision: Decision;
  usage: { inputTokens: number; outputTokens: number };
  cost: number;
  latencyMs: number;
}

/** How a run (or a candidate) came out: what scorers compare. */
export interface Outcome {
  status: string;
  finalText: string | null;
  toolCalls: Array<{ name: string; input: unknown }>;
  usage: { inputTokens: number; outputTokens: number };
  cost: number;
  latencyMs: number;
}

export interface FrozenRun {
  v: 1;
  run: { id: string; sessionId: string; agent: { name: string; version: string }; turn: number | null };
  trigger: UserMessage | null;
  outcome: Outcome;
  steps: FrozenStep[];
  messages: Record<string, Message>;
}

/** The frozen copy of `run` (it must have ended). */
export async function freezeRun(log: SessionLog, run: RunRecord): Promise<FrozenRun> {
  const events = await runEvents(log, run.sessionId, run.id);
  const last = events.at(-1)?.seq ?? 0;
  const messages: Record<string, Message> = {};
  const headers = new Map<number, { header: SessionEvent<'request/header'>; ids: string[] }>();
  // Each step's last attempt is the request that was answered.
  for await (const r of recordedRequests(log, run.sessionId, { runId: run.id, untilSeq: last })) {
    for (const m of r.messages) messages[m.id] ??= m;
    headers.set(r.header.step ?? 0, { header: r.header, ids: r.messages.map((m) => m.id) });
  }
  const steps: FrozenStep[] = [];
  for (const e of events) {
    if (e.type !== 'assistant/message' || e.step === undefined) continue;
    const h = headers.get(e.step);
    if (!h) continue;
    const step: FrozenStep = {
      step: e.step,
      turn: e.turn ?? 0,
      promptHash: h.header.data.promptHash,
      provider: h.header.data.provider,
      modelId: h.header.data.modelId,
      messageIds: h.ids,
      decision: decisionOf(e.data.message.content),
      usage: { inputTokens: e.data.usage.inputTokens, outputTokens: e.data.usage.outputTokens },
      cost: e.data.cost,
      latencyMs: e.data.timing.durationMs,
    };
    // A step asked again after an error keeps its last decision.
    const at = steps.findIndex((s) => s.step === step.step);
    if (at >= 0) steps[at] = step;
    else steps.push(step);
  }
  const trigger = events.find(
    (e): e is SessionEvent<'user/message'> =>
      e.type === 'user/message' && (run.triggerMessageId === null || e.data.message.id === run.triggerMessageId),
  );
  return {
    v: 1,
    run: { id: run.id, sessionId: run.sessionId, agent: run.agent, turn: run.turn },
    trigger: trigger?.data.message ?? null,
    outcome: outcomeOf(run, events),
    steps,
    messages,
  };
}

/** The decision an assistant message's content holds. */
export function decisionOf(content: AssistantMessage['content']): Decision {
  let text = '';
  const toolCalls: Decision['toolCalls'] = [];
  for (const p of content) {
    if (p.type === 'text') text += p.text;
    else if (p.type === 'tool-call') toolCalls.push({ name: p.toolName, input: p.input });
  }
  return { text, toolCalls };
}

/** How a run came out, from its record and its events. */
export function outcomeOf(run: RunRecord, events: readonly SessionEvent[]): Outcome {
  const assistant = events.filter((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message');
  const final = assistant.findLast((e) => decisionOf(e.data.message.content).toolCalls.length === 0);
  const usage = run.usage as JsonObject;
  return {
    status: run.status,
    finalText: final ? decisionOf(final.data.message.content).text : null,
    toolCalls: assistant.flatMap((e) => decisionOf(e.data.message.content).toolCalls),
    usage: { inputTokens: Number(usage.inputTokens ?? 0), outputTokens: Number(usage.outputTokens ?? 0) },
    cost: run.cost,
    latencyMs: run.startedAt !== null && run.endedAt !== null ? run.endedAt - run.startedAt : 0,
  };
}
