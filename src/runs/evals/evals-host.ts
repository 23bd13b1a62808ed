/** What datasets, experiments and bulk reruns need of the runtime (src/runs/runtime.ts gives it). */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import type { AgentDefinition } from '../../core/index.ts';
import type { SessionLog } from '../../session/index.ts';
import type { RunRecord, Store, StoreOps } from '../../store/index.ts';
import type { RerunRequest } from '../reruns/start-rerun.ts';
import type { Scorer } from './scorers.ts';

export interface EvalsHost {
  store: Store;
  log: SessionLog;
  /** The agent for `name@version` (or `name`): StoreError `unknown_agent` when none is registered. */
  agentFor(spec: string): AgentDefinition;
  resolveModel: ((id: string) => LanguageModelV4) | undefined;
  /** Code and judge scorers by name (RuntimeOptions.scorers). */
  scorers: Readonly<Record<string, Scorer>>;
  /** A rerun (RunsApi.rerun), `within` its creating transaction. */
  rerun(
    sourceRunId: string,
    req: RerunRequest,
    within?: (tx: StoreOps, run: RunRecord) => Promise<void>,
  ): Promise<RunRecord>;
  /** Resolves when the run has ended (or `signal` aborts). */
  waitTerminal(runId: string, signal: AbortSignal): Promise<RunRecord>;
  /** A batch has new work: the runners of this process look now. */
  wake(): void;
}
