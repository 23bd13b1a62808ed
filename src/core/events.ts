import type { WaitSpec } from './wait-spec.ts';
import type { AssistantMessage, JsonValue, ModelErrorInfo, ToolOutput, Usage, UserMessage } from '../model/index.ts';

/**
 * What the loop reports. Durable events are facts to record (the session log stores them);
 * deltas are ephemeral progress that is never persisted, because the durable message replaces them.
 */
export interface ToolSchema {
  name: string;
  description: string;
  inputSchema: JsonValue;
}

/**
 * The envelope of one model request, constant in size whatever the conversation's length: the
 * context is identified by reference (how many messages, the first and the last), the system
 * prompt and tool schemas by content hash (their text is stored once, content-addressed, not per
 * request), and the fingerprint covers all of it. The replay check rebuilds the request from the
 * log and compares. See ADR-0008.
 */
export interface RequestHeader {
  provider: string;
  modelId: string;
  /** Which attempt of this step's model call (retries and the overflow retry count up). */
  attempt: number;
  /** The id the assistant message will have if this attempt succeeds. */
  messageId: string;
  settings: Record<string, JsonValue>;
  /** Content hash (`sha256:…` of its JSON) of the system prompt as sent; null without one. */
  system: string | null;
  /** Content hash of the tool schemas as sent (a JSON array, in the order sent); null without tools. */
  tools: string | null;
  /** The messages sent, by reference: their number, and the ids of the first (a summary after compaction) and the last. */
  context: ContextRef;
  /** Fingerprint of system, tools, settings and every message as sent (see prompt-hash.ts). */
  promptHash: string;
  /** Only on headers written before ADR-0008 (read through the v1 upcaster): what they held inline. */
  legacy?: { system: string | null; tools: ToolSchema[]; context: string[] };
}

export interface ContextRef {
  messages: number;
  first: string | null;
  last: string | null;
}

/** Content an event refers to by hash, stored once (content-addressed) in the same commit. */
export interface ContentBlob {
  hash: string;
  /** The JSON text whose hash is `hash`. */
  data: string;
}

export type TurnEndReason =
  'completed' | 'cancelled' | 'failed' | 'max_steps' | 'budget_exceeded' | 'suspended' | 'paused';
export type StepEndReason = 'tool-calls' | 'final' | 'interrupted' | 'cancelled' | 'failed';

export interface TurnError {
  /** `tool`: a tool ended the turn (TurnStoppedByTool), with its `code`. */
  kind: 'model' | 'sink' | 'hook' | 'internal' | 'tool';
  message: string;
  model?: ModelErrorInfo;
  code?: string;
}

/**
 * A call the turn cannot finish alone: it needs an approval, a person's answer (ask_user), a time
 * (a sleep) or a signal from outside (ADR-0015).
 */
export interface PendingCall {
  toolCallId: string;
  toolName: string;
  input: JsonValue;
  kind: 'approval' | 'input' | 'sleep' | 'signal';
  /** For a sleep or a signal: what the tool asked to wait for. */
  wait?: WaitSpec;
  /** An approval asked because the call's outcome is unknown after a crash (ADR-0018): what is known. */
  unknownOutcome?: UnknownOutcomeInfo;
}

/** What is known of an effectful call that started but has no result (ADR-0018). */
export interface UnknownOutcomeInfo {
  idempotencyKey: string;
  /** When its `tool/call` was recorded (ms since the epoch), when known. */
  startedAt?: number;
}

/**
 * How an unknown outcome was resolved: the tool's check found it done (its output is the result)
 * or not done (run again with the same key); a person was asked, then approved (run again) or
 * denied (not run again); the model was told; the run failed.
 */
export type UnknownOutcomeResolution =
  'checked_done' | 'checked_not_done' | 'asked_human' | 'retried' | 'not_retried' | 'told_model' | 'failed';
/** @deprecated use PendingCall */
export type PendingApproval = PendingCall;

export interface EventDataMap {
  'turn/start': {
    agent: { name: string; version: string };
    model: { provider: string; modelId: string };
    resumed: boolean;
  };
  'user/message': { message: UserMessage; via: 'input' | 'steer' };
  'config/change': {
    model?: { provider: string; modelId: string };
    system?: true;
    tools?: string[];
    settings?: Record<string, JsonValue>;
  };
  'step/start': Record<string, never>;
  'request/header': RequestHeader;
  'model/retry': { attempt: number; delayMs: number; error: ModelErrorInfo; abandonedMessageId: string };
  'model/error': { attempt: number; error: ModelErrorInfo; willCompact: boolean };
  /** A compaction at a step boundary failed (its summarizer, a concurrent append): the turn goes on uncompacted. */
  'compaction/failed': { reason: 'threshold' | 'overflow'; error: string };
  'assistant/message': {
    message: AssistantMessage;
    finishReason: string;
    usage: Usage;
    cost: number;
    responseId?: string;
    responseModelId?: string;
    timing: { startedAt: number; firstChunkMs?: number; durationMs: number };
  };
  'tool/call': {
    toolCallId: string;
    toolName: string;
    input: JsonValue;
    idempotencyKey: string;
    assistantMessageId: string;
  };
  'tool/approval': {
    toolCallId: string;
    toolName: string;
    input: JsonValue;
    assistantMessageId: string;
    unknownOutcome?: UnknownOutcomeInfo;
  };
  /** An effectful call's outcome was unknown after a crash, and this is what Keel did (ADR-0018). */
  'tool/unknown-outcome': {
    toolCallId: string;
    toolName: string;
    idempotencyKey: string;
    startedAt?: number;
    resolution: UnknownOutcomeResolution;
    reason?: string;
  };
  /** `unknownOutcome`: on a call whose outcome a crash left unknown (ADR-0018); `editedInput` is then the input it ran with. */
  'tool/decision': {
    toolCallId: string;
    approved: boolean;
    reason?: string;
    editedInput?: JsonValue;
    by?: 'deadline';
    unknownOutcome?: true;
  };
  'user/question': { toolCallId: string; toolName: string; input: JsonValue; assistantMessageId: string };
  'user/answer': { toolCallId: string; answer: JsonValue; by?: 'deadline' };
  'tool/result': {
    toolCallId: string;
    toolName: string;
    output: ToolOutput;
    toolMessageId: string;
    durationMs: number;
    /** Absent when the tool ran (`executed`); a rerun's reused or mocked result says so (see served-result.ts). */
    source?: 'executed' | 'reused' | 'mocked';
  };
  'step/end': { reason: StepEndReason; usage: Usage };
  'turn/end': {
    reason: TurnEndReason;
    steps: number;
    usage: Usage;
    cost: number;
    error?: TurnError;
    pending?: PendingCall[];
  };
}

export type TurnEventType = keyof EventDataMap;

export type TurnEvent = {
  [T in TurnEventType]: {
    type: T;
    turn: number;
    step?: number;
    time: number;
    data: EventDataMap[T];
    /** Content the data refers to by hash (a request header's system prompt and tool schemas). */
    blobs?: readonly ContentBlob[];
  };
}[TurnEventType];

export type EventOf<T extends TurnEventType> = Extract<TurnEvent, { type: T }>;

export type DeltaEvent =
  | { type: 'text/delta'; turn: number; step: number; messageId: string; delta: string }
  | { type: 'reasoning/delta'; turn: number; step: number; messageId: string; delta: string }
  | {
      type: 'tool-input/delta';
      turn: number;
      step: number;
      messageId: string;
      toolCallId: string;
      toolName: string;
      delta: string;
    };
