/** The shapes the run transactions take and return: a message's outcome, a claim, a finish's options, a run's options. */
import type { AgentDefinition } from '../../core/index.ts';
import type { ClientToolSpec } from '../../core/client-tool.ts';
import type { Priority } from '../../flow-control/index.ts';
import type { UserMessage, Usage } from '../../model/index.ts';
import type { SessionEvent } from '../../session/index.ts';
import type { Checkpoint, JsonObject, RunRecord, RunStatus } from '../../store/index.ts';
import type { TraceCarrier } from '../../telemetry/trace-context.ts';
import type { AgentOverrides } from '../reruns/rerun-lineage.ts';

export type IfBusy = 'reject' | 'enqueue' | 'steer' | 'interrupt';

/**
 * A message taken by a session: the run it created, waits for, or steers, and the events to
 * publish; `claimed`, a run claimed for a worker in the same transaction (see `send`'s `claim`).
 */
export type Accepted = {
  outcome: 'created' | 'enqueued' | 'steered';
  message: UserMessage;
  run: RunRecord;
  events: SessionEvent[];
  claimed?: Claimed;
};

/** Where a run stands in the log: its stored checkpoint and its events after it. */
export interface RunBoundary {
  checkpoint: Checkpoint | undefined;
  tail: SessionEvent[];
}

/** A run claimed for a worker: a start, or the recovery of an interrupted run (`previous` running). */
export interface Claimed {
  run: RunRecord;
  previous: RunStatus;
  /** The run was never claimed before (see StoreOps.claimRun). */
  firstStart: boolean;
  claimedAt: number;
  /**
   * Where the run stands, read once by the claim for its execution (this claim's event included);
   * undefined for a first start, which has nothing stored yet.
   */
  boundary?: RunBoundary;
}

export interface FinishOptions {
  reason?: string;
  error?: JsonObject;
  /** The run's own usage and cost (children's are added); default: what the row holds. */
  usage?: Usage;
  cost?: number;
  /** Only while the caller still holds the run with this token. */
  fencingToken?: number;
  /** Give open tool calls a result and close an open turn (when no loop is left to do it). */
  closeOpenCalls?: boolean;
  /**
   * Settles before the run's end writes anything, awaited with the run's read: its rejection (the
   * turn may not end yet) ends the finish there, with nothing written (see appendDurablePoint).
   */
  mayEnd?: Promise<void>;
  resolveAgent: (name: string, version?: string) => AgentDefinition | undefined;
}

/** What a run is sent with (see also SendOptions); `sessions.send` checks them (send-options.ts: keep it in step). */
export interface RunOptions {
  /** Wall-clock limit of the whole run, from its creation. */
  timeoutMs?: number;
  /** How long a waiting run waits for a decision or an answer. */
  waitTimeoutMs?: number;
  /** Claims by a worker before an interrupted run is given up as failed. */
  maxAttempts?: number;
  /**
   * The W3C trace context the run continues (stored with it): every execution of the run, on any
   * worker, traces under it. `sessions.send` sets it from its caller's context (see docs/observability.md).
   */
  trace?: TraceCarrier;
  /** When its model calls wait for provider limits: `interactive` before `batch` (docs/flow-control.md). */
  priority?: Priority;
  /**
   * Changes to the agent for this run only (a protocol's `instructions`, say): applied over the
   * registered version, recorded in the run's agent spec (see runs/reruns/rerun-agent.ts).
   */
  overrides?: AgentOverrides;
  /**
   * Tools the client declares and executes itself (a protocol's function tools, core/client-tool.ts):
   * added to the agent for this run; a call of one waits for the client's output (runs/client-tools.ts).
   */
  clientTools?: ClientToolSpec[];
  /** The API key that created the run (its id): its own quotas apply with its tenant's (ADR-0043). */
  apiKey?: string;
}
