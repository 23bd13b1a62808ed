/**
 * What a rerun records of where it came from and how it differs (issue 40, ADR-0037): the source
 * session, run and step; the agent version it runs; the changes made to that agent's spec; the
 * tool policies. Stored in the run's options (`rerun`), its source run also in the `rerun_of`
 * column (listed by `GET /v1/runs?rerun_of=`).
 */
import type { CallSettings } from '../../core/index.ts';
import type { RunRecord } from '../../store/index.ts';
import type { ToolPolicies } from './tool-policy.ts';

/** Changes to the agent a rerun runs with, applied over the registered version's definition. */
export interface AgentOverrides {
  /** Replaces the system prompt. */
  system?: string;
  /** A model id (`openai:gpt-4.1-mini`, `scripted:file.json`, ...), resolved by the runtime's `resolveModel`. */
  model?: string;
  /** Merged over the agent's call settings. */
  settings?: CallSettings;
  /** Only these of the agent's tools (by name). */
  tools?: string[];
  /** Replaces the agent's step limit. */
  maxSteps?: number;
}

export interface RerunLineage {
  of: { sessionId: string; runId: string; step: number };
  agent: { name: string; version: string };
  overrides?: AgentOverrides;
  tools: ToolPolicies;
  /** The triggering user message was replaced (the fork is at its parent). */
  messageReplaced?: true;
}

/** The lineage of a run that is a rerun; undefined for any other. */
export function rerunLineage(run: Pick<RunRecord, 'options'>): RerunLineage | undefined {
  const r = (run.options as { rerun?: RerunLineage }).rerun;
  return r && typeof r === 'object' ? r : undefined;
}
