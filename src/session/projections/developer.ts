import type { JsonValue, Usage } from '../../model/index.ts';
import type { RequestHeader, TurnError } from '../../core/index.ts';
import type { ToolOutput } from '../../model/index.ts';
import type { Projection } from './projection.ts';

/** Everything that happened, grouped by turn and step: what a developer debugging a session reads. */
export interface DevTool {
  toolCallId: string;
  toolName: string;
  input: JsonValue;
  idempotencyKey?: string;
  approval?: 'pending' | 'approved' | 'denied';
  output?: ToolOutput;
  durationMs?: number;
  /** A rerun's reused or mocked result (absent: the tool ran). */
  source?: 'executed' | 'reused' | 'mocked';
  /**
   * Its outcome was unknown after a crash (ADR-0018): when it started, and how that was resolved
   * (the last resolution; `told_model` for an `outcome_unknown` result without a recorded one).
   */
  outcomeUnknown?: { resolution: string; startedAt?: number; reason?: string };
}

export interface DevStep {
  step: number;
  startedAt: number;
  endedAt?: number;
  endReason?: string;
  usage?: Usage;
  requests: Array<RequestHeader & { seq: number; time: number }>;
  retries: Array<{ seq: number; attempt: number; delayMs: number; error: { kind: string; message: string } }>;
  errors: Array<{ seq: number; attempt: number; error: { kind: string; message: string } }>;
  assistant?: {
    messageId: string;
    text: string;
    toolCalls: number;
    interrupted: boolean;
    finishReason: string;
    usage: Usage;
    cost: number;
    responseId?: string;
    timing: { startedAt: number; firstChunkMs?: number; durationMs: number };
  };
  tools: DevTool[];
}

export interface DevTurn {
  turn: number;
  agent: { name: string; version: string };
  model: { provider: string; modelId: string };
  startedAt: number;
  /** How many times the turn resumed after suspending. */
  resumes: number;
  inputs: Array<{ seq: number; via: string; messageId: string }>;
  configChanges: Array<{ seq: number; change: JsonValue }>;
  steps: DevStep[];
  endedAt?: number;
  endReason?: string;
  usage?: Usage;
  cost?: number;
  error?: TurnError;
}

export interface DeveloperState {
  turns: DevTurn[];
  /** Session-level events (creation, branch moves, compactions...), in order. */
  session: Array<{ seq: number; type: string; time: number; data: JsonValue }>;
}

export const developerProjection: Projection<DeveloperState> = {
  name: 'developer',
  version: 2,
  scope: 'log',
  init: () => ({ turns: [], session: [] }),
  apply(s, e) {
    const turn = e.turn === undefined ? undefined : s.turns.findLast((t) => t.turn === e.turn);
    const step = e.step === undefined ? undefined : turn?.steps.findLast((x) => x.step === e.step);
    const tool = (id: string) =>
      step?.tools.find((t) => t.toolCallId === id) ??
      turn?.steps.flatMap((x) => x.tools).find((t) => t.toolCallId === id);
    switch (e.type) {
      case 'turn/start':
        if (e.data.resumed && turn) turn.resumes++;
        else
          s.turns.push({
            turn: e.turn ?? s.turns.length + 1,
            agent: e.data.agent,
            model: e.data.model,
            startedAt: e.time,
            resumes: 0,
            inputs: [],
            configChanges: [],
            steps: [],
          });
        break;
      case 'user/message':
        turn?.inputs.push({ seq: e.seq, via: e.data.via, messageId: e.data.message.id });
        break;
      case 'config/change':
        turn?.configChanges.push({ seq: e.seq, change: e.data as JsonValue });
        break;
      case 'step/start':
        turn?.steps.push({
          step: e.step ?? turn.steps.length + 1,
          startedAt: e.time,
          requests: [],
          retries: [],
          errors: [],
          tools: [],
        });
        break;
      case 'request/header':
        step?.requests.push({ ...e.data, seq: e.seq, time: e.time });
        break;
      case 'model/retry':
        step?.retries.push({ seq: e.seq, attempt: e.data.attempt, delayMs: e.data.delayMs, error: e.data.error });
        break;
      case 'model/error':
        step?.errors.push({ seq: e.seq, attempt: e.data.attempt, error: e.data.error });
        break;
      case 'assistant/message': {
        const m = e.data.message;
        if (step) {
          step.assistant = {
            messageId: m.id,
            text: m.content.map((p) => (p.type === 'text' ? p.text : '')).join(''),
            toolCalls: m.content.filter((p) => p.type === 'tool-call').length,
            interrupted: m.interrupted === true,
            finishReason: e.data.finishReason,
            usage: e.data.usage,
            cost: e.data.cost,
            ...(e.data.responseId !== undefined ? { responseId: e.data.responseId } : {}),
            timing: e.data.timing,
          };
        }
        break;
      }
      case 'tool/approval': {
        // An approval asked after a crash is about a call already shown.
        const t = e.data.unknownOutcome ? tool(e.data.toolCallId) : undefined;
        if (t) t.approval = 'pending';
        else
          step?.tools.push({
            toolCallId: e.data.toolCallId,
            toolName: e.data.toolName,
            input: e.data.input,
            approval: 'pending',
          });
        break;
      }
      case 'tool/unknown-outcome': {
        const t = tool(e.data.toolCallId);
        if (t) {
          t.outcomeUnknown = {
            resolution: e.data.resolution,
            ...(e.data.startedAt !== undefined ? { startedAt: e.data.startedAt } : {}),
            ...(e.data.reason !== undefined ? { reason: e.data.reason } : {}),
          };
        }
        break;
      }
      case 'tool/decision': {
        const t = tool(e.data.toolCallId);
        if (t) t.approval = e.data.approved ? 'approved' : 'denied';
        break;
      }
      case 'tool/call': {
        const t = tool(e.data.toolCallId);
        if (t) Object.assign(t, { input: e.data.input, idempotencyKey: e.data.idempotencyKey });
        else
          step?.tools.push({
            toolCallId: e.data.toolCallId,
            toolName: e.data.toolName,
            input: e.data.input,
            idempotencyKey: e.data.idempotencyKey,
          });
        break;
      }
      case 'tool/result': {
        const t = tool(e.data.toolCallId);
        if (t) {
          Object.assign(t, {
            output: e.data.output,
            durationMs: e.data.durationMs,
            ...(e.data.source !== undefined ? { source: e.data.source } : {}),
          });
          if (!t.outcomeUnknown && e.data.output.type === 'error' && e.data.output.code === 'outcome_unknown')
            t.outcomeUnknown = { resolution: 'told_model' };
        } else
          step?.tools.push({
            toolCallId: e.data.toolCallId,
            toolName: e.data.toolName,
            input: null,
            output: e.data.output,
            durationMs: e.data.durationMs,
            ...(e.data.source !== undefined ? { source: e.data.source } : {}),
          });
        break;
      }
      case 'step/end':
        if (step) Object.assign(step, { endedAt: e.time, endReason: e.data.reason, usage: e.data.usage });
        break;
      case 'turn/end':
        if (turn) {
          Object.assign(turn, { endedAt: e.time, endReason: e.data.reason, usage: e.data.usage, cost: e.data.cost });
          if (e.data.error) turn.error = e.data.error;
        }
        break;
      default:
        s.session.push({ seq: e.seq, type: e.type, time: e.time, data: e.data as JsonValue });
    }
    return s;
  },
};
