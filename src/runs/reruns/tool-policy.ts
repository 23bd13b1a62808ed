/**
 * What a rerun does when its agent calls a tool (issue 40, ADR-0037): run it, serve the result
 * the source run recorded for the same call, or serve a mock. The default protects the world: a
 * read-only tool runs, every other tool reuses, and an effectful tool whose call has no recorded
 * result fails the rerun (it never runs without being asked to).
 */
import type { JsonValue } from '../../model/index.ts';
import type { Tool } from '../../core/index.ts';

/** On a call with no recorded result of the same tool and arguments: run it, fail the rerun, or serve the nearest recorded result of that tool anyway. */
export type OnMismatch = 'execute' | 'fail' | 'serve';

export type ToolPolicy =
  | { mode: 'reuse'; onMismatch?: OnMismatch }
  | { mode: 'execute' }
  /** `value` is the call's result (a string is text, anything else JSON), for every call of the tool. */
  | { mode: 'mock'; value: JsonValue };

/** A rerun's tool policies: by tool name, and for the tools not named (default: see `policyFor`). */
export interface ToolPolicies {
  default?: 'reuse' | 'execute';
  tools?: Record<string, ToolPolicy>;
}

/** The policy a tool gets in a rerun, defaults applied (see the file's comment). */
export function policyFor(t: Pick<Tool, 'name' | 'effect'>, p: ToolPolicies): ToolPolicy {
  const own = p.tools?.[t.name];
  const mode = own?.mode ?? p.default ?? (t.effect === 'read-only' ? 'execute' : 'reuse');
  if (own?.mode === 'mock') return own;
  if (mode === 'execute') return { mode: 'execute' };
  const onMismatch = (own?.mode === 'reuse' ? own.onMismatch : undefined) ?? defaultOnMismatch(t);
  return { mode: 'reuse', onMismatch };
}

/** An effectful tool is never run on a mismatch unless its policy says so; the others run again. */
const defaultOnMismatch = (t: Pick<Tool, 'effect'>): OnMismatch => (t.effect === 'effectful' ? 'fail' : 'execute');

/** The names `p` gives a policy that `tools` does not have: a typo would otherwise change nothing, silently. */
export function unknownToolNames(p: ToolPolicies, tools: readonly Pick<Tool, 'name'>[]): string[] {
  const known = new Set(tools.map((t) => t.name));
  return Object.keys(p.tools ?? {}).filter((n) => !known.has(n));
}
