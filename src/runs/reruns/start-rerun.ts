/**
 * Starting a rerun (issue 40, ADR-0037): the checks, the fork point, the agent with its overrides,
 * the lineage; then one transaction (RunLifecycle.rerun) forks the session and queues the run.
 * And, when a worker runs it, the agent it executes: overrides applied and tools wrapped by their
 * policies, serving the source run's recorded results.
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { userMessage, type AgentDefinition, type UserInput } from '../../core/index.ts';
import { runEvents } from '../../session/index.ts';
import { StoreError, type RunRecord, type StoreOps } from '../../store/index.ts';
import type { RunLifecycle } from '../lifecycle/run-lifecycle.ts';
import type { RunOptions } from '../lifecycle/types.ts';
import { forkPoint } from './fork-point.ts';
import { RecordedResults } from './recorded-results.ts';
import { RerunRequestError, withOverrides, withToolPolicies } from './rerun-agent.ts';
import type { AgentOverrides, RerunLineage } from './rerun-lineage.ts';
import { unknownToolNames, type ToolPolicies } from './tool-policy.ts';

/** What to rerun and how (see docs/evals.md). */
export interface RerunRequest {
  /** The step of the source run to rerun from; default its first (the start of its turn). */
  from?: number;
  /** Another registered version (`name@version`, or `name`: its latest); default the source run's own. */
  agent?: string;
  /** Changes to that agent's definition: system prompt, model, settings, tools, step limit. */
  overrides?: AgentOverrides;
  /** Replaces the message that started the source run (only from its first step). */
  message?: UserInput;
  /** Tool policies: `reuse` or `execute` for every tool, or per tool (see tool-policy.ts); default by effect class. */
  tools?: 'reuse' | 'execute' | ToolPolicies;
  /** The new session's title; default the source's, marked as a rerun. */
  title?: string;
  /** The run's options (timeout, waits, attempts, priority). */
  options?: RunOptions;
}

export interface RerunHost {
  lifecycle: RunLifecycle;
  /** The agent for `name@version` (or `name`): StoreError `unknown_agent` when none is registered. */
  agentFor(spec: string): AgentDefinition;
  resolveModel: ((id: string) => LanguageModelV4) | undefined;
  runDefaults: RunOptions | undefined;
}

/**
 * Forks the source run's session at step `from` and queues the rerun there; the original is
 * untouched. `within` runs in the same transaction once the run exists.
 */
export async function startRerun(
  host: RerunHost,
  sourceRunId: string,
  req: RerunRequest,
  within?: (tx: StoreOps, run: RunRecord) => Promise<void>,
): Promise<RunRecord> {
  const { lifecycle } = host;
  const source = await lifecycle.get(sourceRunId);
  const sourceSession = await lifecycle.sessions.get(source.sessionId);
  if (sourceSession.erasedAt !== null)
    throw new StoreError(
      'session_erased',
      `run ${source.id} belonged to session ${source.sessionId}, which was erased`,
    );
  const base = host.agentFor(req.agent ?? `${source.agent.name}@${source.agent.version}`);
  const agent = withOverrides(base, req.overrides, host.resolveModel);
  const tools: ToolPolicies = typeof req.tools === 'string' ? { default: req.tools } : (req.tools ?? {});
  // MCP tools join the agent when it runs: the source run's recorded spec names them.
  const recordedTools = ((source.agentSpec.tools ?? []) as Array<{ name?: unknown }>).flatMap((t) =>
    typeof t.name === 'string' ? [{ name: t.name }] : [],
  );
  const unknown = unknownToolNames(tools, [...agent.tools, ...recordedTools]);
  if (unknown.length > 0)
    throw new RerunRequestError('tools', `no tool named ${unknown.join(', ')} in agent ${agent.name}@${agent.version}`);

  const events = await runEvents(lifecycle.log, source.sessionId, source.id);
  const replace = req.message !== undefined;
  const firstStep = events.find((e) => e.type === 'request/header')?.step ?? 1;
  const from = req.from ?? firstStep;
  const fork = await forkPoint(lifecycle.log, source, events, from, replace);
  const lineage: RerunLineage = {
    of: { sessionId: source.sessionId, runId: source.id, step: from },
    agent: { name: agent.name, version: agent.version },
    ...(req.overrides && Object.keys(req.overrides).length > 0 ? { overrides: req.overrides } : {}),
    tools,
    ...(replace ? { messageReplaced: true as const } : {}),
  };
  const title =
    req.title ?? `rerun of ${sourceSession.title ?? source.id} from step ${from} on ${agent.name}@${agent.version}`;
  const { run } = await lifecycle.rerun(
    source.sessionId,
    fork.entryId,
    {
      agent,
      lineage,
      options: { ...host.runDefaults, ...req.options },
      trigger: fork.trigger,
      turn: fork.turn,
      ...(replace ? { message: userMessage(req.message!) } : {}),
      ...(within ? { within } : {}),
    },
    title,
  );
  return run;
}

/**
 * The agent a rerun executes: `agent` (its registered version, MCP tools added) with the
 * lineage's overrides applied and its tools wrapped by their policies, serving the results its
 * source run recorded from the rerun's step on.
 */
export async function rerunAgent(
  lifecycle: RunLifecycle,
  agent: AgentDefinition,
  lineage: RerunLineage,
  resolveModel: ((id: string) => LanguageModelV4) | undefined,
): Promise<AgentDefinition> {
  const events = await runEvents(lifecycle.log, lineage.of.sessionId, lineage.of.runId);
  const recorded = new RecordedResults(events, lineage.of.step);
  return withToolPolicies(withOverrides(agent, lineage.overrides, resolveModel), lineage.tools, recorded);
}
