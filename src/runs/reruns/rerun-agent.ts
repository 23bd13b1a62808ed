/**
 * The agent a rerun runs with: the registered version it names, its overrides applied
 * (`withOverrides`, also at creation, where the run's agent spec records the result), and, when
 * it executes, each tool wrapped by its policy (`withToolPolicies`): reuse a recorded result,
 * run the tool, or serve a mock.
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import {
  canonicalJson,
  servedResult,
  toOutput,
  TurnStoppedByTool,
  type AgentDefinition,
  type Tool,
  type ToolContext,
} from '../../core/index.ts';
import type { RecordedResults } from './recorded-results.ts';
import type { AgentOverrides } from './rerun-lineage.ts';
import { policyFor, type ToolPolicies } from './tool-policy.ts';

/** A rerun's request the runtime cannot satisfy (an unknown tool or model): the API answers 400. */
export class RerunRequestError extends Error {
  readonly field: string;

  constructor(field: string, message: string) {
    super(message);
    this.name = 'RerunRequestError';
    this.field = field;
  }
}

/** `agent` with `o` applied; `resolveModel` turns a model id into a model (RerunRequestError without one). */
export function withOverrides(
  agent: AgentDefinition,
  o: AgentOverrides | undefined,
  resolveModel: ((id: string) => LanguageModelV4) | undefined,
): AgentDefinition {
  if (!o) return agent;
  let tools = agent.tools;
  if (o.tools) {
    const known = new Set(agent.tools.map((t) => t.name));
    const unknown = o.tools.filter((n) => !known.has(n));
    if (unknown.length > 0)
      throw new RerunRequestError(
        'overrides.tools',
        `agent ${agent.name}@${agent.version} has no tool ${unknown.join(', ')} (its tools: ${[...known].join(', ') || 'none'})`,
      );
    const keep = new Set(o.tools);
    tools = agent.tools.filter((t) => keep.has(t.name));
  }
  let model = agent.model;
  if (o.model !== undefined) {
    if (!resolveModel)
      throw new RerunRequestError(
        'overrides.model',
        'this runtime resolves no model ids (createRuntime: resolveModel)',
      );
    try {
      model = resolveModel(o.model);
    } catch (e) {
      throw new RerunRequestError('overrides.model', e instanceof Error ? e.message : String(e));
    }
  }
  return {
    ...agent,
    model,
    tools,
    ...(o.system !== undefined ? { system: o.system } : {}),
    ...(o.settings ? { settings: { ...agent.settings, ...o.settings } } : {}),
    ...(o.maxSteps !== undefined ? { limits: { ...agent.limits, maxSteps: o.maxSteps } } : {}),
  };
}

/** `agent` with each tool wrapped by its policy (see tool-policy.ts), serving from `recorded`. */
export function withToolPolicies(
  agent: AgentDefinition,
  policies: ToolPolicies,
  recorded: RecordedResults,
): AgentDefinition {
  return { ...agent, tools: agent.tools.map((t) => wrapped(t, policies, recorded)) };
}

function wrapped(t: Tool, policies: ToolPolicies, recorded: RecordedResults): Tool {
  const policy = policyFor(t, policies);
  // A person answers an interactive tool (the loop never executes it): reuse serves the answer
  // given to the same question, a mock its value; otherwise, and for `execute`, it asks again.
  if (t.interactive) {
    if (policy.mode === 'execute') return t;
    if (policy.mode === 'mock') {
      const output = toOutput(policy.value);
      return { ...t, recordedAnswer: () => servedResult(output, 'mocked') };
    }
    return {
      ...t,
      recordedAnswer: (input, step) => {
        const hit = recorded.find(t, input, step);
        return hit ? servedResult(hit.output, 'reused') : undefined;
      },
    };
  }
  if (policy.mode === 'execute') return t;
  if (policy.mode === 'mock') {
    const output = toOutput(policy.value);
    // A mock changes nothing: no approval, nothing to record before it, safe to serve again.
    return {
      ...t,
      approval: 'never',
      effect: 'idempotent',
      idempotent: true,
      execute: () => servedResult(output, 'mocked'),
    };
  }
  const onMismatch = policy.onMismatch ?? 'fail';
  const mayRun = onMismatch === 'execute';
  const original = t.approval;
  return {
    ...t,
    // Only a call that would run needs the approval the tool asks for: a reused result changes nothing.
    approval:
      original === 'never'
        ? 'never'
        : (input: unknown) =>
            mayRun && recorded.find(t, input, 0) === undefined && (original === 'always' || original(input) === true),
    // Serving is safe to repeat; a tool that may run on a mismatch keeps its own effect class.
    ...(mayRun ? {} : { effect: 'idempotent' as const, idempotent: true }),
    execute: (input: unknown, ctx: ToolContext) => {
      const hit = recorded.find(t, input, ctx.step);
      if (hit) return servedResult(hit.output, 'reused');
      switch (onMismatch) {
        case 'execute':
          return t.execute(input, ctx);
        case 'serve': {
          const any = recorded.anyOf(t.name, ctx.step);
          if (any) return servedResult(any.output, 'reused');
          throw mismatch(t, input, 'and the source run recorded no result of this tool to serve instead');
        }
        case 'fail':
          throw mismatch(
            t,
            input,
            `and its policy does not run it (tools: { ${t.name}: { mode: 'reuse', onMismatch: 'execute' } } would)`,
          );
      }
    },
  };
}

function mismatch(t: Tool, input: unknown, why: string): TurnStoppedByTool {
  const args = canonicalJson(input);
  return new TurnStoppedByTool(
    'rerun_mismatch',
    `${t.name}(${args.length > 200 ? `${args.slice(0, 200)}…` : args}) has no recorded result in the source run, ${why}`,
  );
}
