/**
 * What a running tool can learn about the run it belongs to (RunScope, through `runScope`), and
 * what the runtime offers to tools that start runs of their own (RunHost: subagents).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { RunRecord } from '../store/index.ts';
import type { TranscriptItem } from '../session/index.ts';

/** What the runtime offers to tools that start runs of their own (subagents). */
export interface RunHost {
  childRun(parentRunId: string, toolCallId: string, agentName: string, task: string, step: number): Promise<RunRecord>;
  readonly runs: {
    wait(id: string, o: { until: 'terminal'; signal?: AbortSignal }): Promise<RunRecord>;
    cancel(id: string, o?: { reason?: string }): Promise<RunRecord>;
  };
  readonly sessions: { transcript(sessionId: string): Promise<TranscriptItem[]> };
  readonly maxDepth: number;
}

/** What a running tool can learn about the run it belongs to (subagents use it). */
export interface RunScope {
  runId: string;
  sessionId: string;
  /** 0 for a top-level run, 1 for its subagents, ... */
  depth: number;
  host: RunHost;
  /**
   * Whether the run is being ended (cancelled, or timed out), as opposed to handed back by its
   * worker (a stop, a lost lease), after which another worker goes on with it.
   */
  ending(): boolean;
  /**
   * Waits for `p`, something outside this run (a child run), without holding a worker slot: while
   * it waits, the worker may claim another run in its place. The run keeps its lease.
   */
  waitOutside<T>(p: Promise<T>): Promise<T>;
  /**
   * A callback URL path (`/v1/callbacks/{token}`) that delivers the signal `name` to this run
   * without an API key (ADR-0015): give it to a third party, then return `waitForSignal(name)`.
   */
  callback(name: string): Promise<{ token: string; path: string }>;
}

export const runScope = new AsyncLocalStorage<RunScope>();
