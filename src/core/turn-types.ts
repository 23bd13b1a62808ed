/**
 * The turn's shared types: what a turn is started with (`TurnOptions`, `ResumePoint`,
 * `ApprovalDecision`), what it gives back (`TurnResult`, `TurnHandle`), and what a step came to
 * (`StepOutcome`). Apart from the code that runs a turn (turn.ts, step.ts, tool-calls.ts,
 * turn-state.ts), so that those files import the types, not one another.
 */
import type { JsonValue, Message, ToolOutput, Usage } from '../model/index.ts';
import type { PendingCall, TurnEndReason, TurnError } from './events.ts';
import type { ConfigChange, TurnHooks } from './hooks.ts';
import type { Inbox, UserInput } from './inbox.ts';
import type { LargePayloadPolicy } from './large-payloads.ts';
import type { EventSink } from './sink.ts';

/** A decision on a pending call: an approval (or denial), or a person's answer to ask_user. */
export interface ApprovalDecision {
  toolCallId: string;
  /** For approvals. */
  approved?: boolean;
  /** Replaces the model's arguments (validated again). */
  input?: JsonValue;
  reason?: string;
  /** For an interactive call (ask_user): the answer, which becomes its result. */
  answer?: JsonValue;
  /** For a wait that ended (a sleep, a signal): the call's result as is. */
  output?: ToolOutput;
  /** Already in the log (the caller recorded it when it was made): do not record it again. */
  recorded?: boolean;
  /** A person's decision on the call's unknown outcome after a crash (ADR-0018): run it again, or not. */
  unknownOutcome?: { approved: boolean; reason?: string };
}

/** What a turn resumes from: after a suspension, a pause, or a crash (from a checkpoint). */
export interface ResumePoint {
  /** The turn's working conversation (history included) as checkpointed or suspended. */
  conversation: readonly Message[];
  /** Steps completed; an open step (its calls not all answered) is finished first. */
  step: number;
  /**
   * The model decision of `step` is on record but the step's end is not (the process stopped
   * between the two): the step is ended first, and a final answer is not asked for again.
   */
  stepOpen?: boolean;
  approvals?: readonly ApprovalDecision[];
  /**
   * Calls whose `tool/call` was recorded but whose result was not (the process died while they
   * ran): an idempotent tool runs again with the same idempotency key; an effectful one is
   * checked, then resolved by its unknown-outcome policy (ADR-0018). Nothing runs twice silently.
   */
  started?: readonly string[];
  /** When each started call's `tool/call` was recorded (what an unknown-outcome approval shows). */
  startedAt?: Readonly<Record<string, number>>;
  /** Usage and cost before this point, so limits keep counting across the resumption. */
  usage?: Usage;
  cost?: number;
}

export interface TurnOptions {
  sink: EventSink;
  /** Earlier turns. Reasoning is dropped from it: opaque reasoning never crosses a turn. */
  history?: readonly Message[];
  input?: UserInput;
  /** Continue a suspended, paused or interrupted turn. */
  resume?: ResumePoint;
  /**
   * Start at step `step` of a turn whose conversation so far is `conversation` (earlier turns
   * portable, this turn's messages as they were produced): a rerun from a step (src/runs/reruns).
   * Instead of `history`; the steps before `step` are not run again.
   */
  continueFrom?: { step: number; conversation: readonly Message[] };
  inbox?: Inbox;
  signal?: AbortSignal;
  hooks?: TurnHooks | readonly TurnHooks[];
  /** The turn's number in its session (events carry it). */
  turn?: number;
  /** Scopes tool idempotency keys, e.g. the session or run id. */
  scope?: string;
  /** The clock tools see (ToolContext.now): default Date.now. */
  now?: () => number;
  /** What the model sees of large tool results (ADR-0040): without it, every result whole. */
  largePayloads?: LargePayloadPolicy;
}

export interface TurnResult {
  reason: TurnEndReason;
  turn: number;
  steps: number;
  /** The whole working conversation at the end of the turn (history included). */
  conversation: Message[];
  /** Messages this invocation added. */
  added: Message[];
  usage: Usage;
  cost: number;
  error?: TurnError;
  /** When suspended: the calls waiting for a decision or an answer. */
  pending?: PendingCall[];
}

export interface TurnHandle {
  readonly result: Promise<TurnResult>;
  readonly inbox: Inbox;
  /** Cancels the turn: no new steps, running tools are aborted, open calls get `cancelled` results. */
  cancel(reason?: string): void;
  /** Cancels only the model call in flight; its partial output is kept, marked interrupted. */
  cancelModelCall(): void;
  /** Queues a configuration change for the next step boundary. */
  configure(change: ConfigChange): void;
}

/** What a step came to: the turn goes on after `tool-calls`; anything else is decided after the step. */
export type StepOutcome =
  | { kind: 'tool-calls' }
  | { kind: 'final' }
  | { kind: 'interrupted' }
  | { kind: 'cancelled' }
  | { kind: 'suspended'; pending: PendingCall[] }
  | { kind: 'failed'; error: TurnError };
