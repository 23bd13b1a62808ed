/** Which stored runs a dataset or a bulk rerun takes: by agent (and version), status and creation time, in one tenant. */
import type { RunRecord, RunStatus, StoreOps } from '../../store/index.ts';

export interface RunFilter {
  /** `name` or `name@version`. */
  agent?: string;
  statuses?: readonly RunStatus[];
  /** Created at or after (ms epoch). */
  createdFrom?: number;
  /** Created before (ms epoch). */
  createdTo?: number;
  /** At most this many (default and maximum: `max`), oldest first. */
  limit?: number;
}

/** The tenant's runs that `f` matches, oldest first, at most `max`; reruns of runs and subagents' runs are left out unless asked by status alone. */
export async function matchingRuns(
  store: Pick<StoreOps, 'runs' | 'sessions'>,
  tenant: string,
  f: RunFilter,
  max: number,
): Promise<RunRecord[]> {
  const [agentName, agentVersion] = f.agent?.split('@') ?? [];
  const want = Math.min(f.limit ?? max, max);
  const out: RunRecord[] = [];
  for (let after: string | undefined; out.length < want;) {
    const page = await store.runs.list({
      tenant,
      limit: 500,
      ...(after ? { after } : {}),
      ...(agentName ? { agentName } : {}),
      ...(agentVersion ? { agentVersion } : {}),
      ...(f.statuses ? { statuses: f.statuses } : {}),
      ...(f.createdFrom !== undefined ? { createdFrom: f.createdFrom } : {}),
      ...(f.createdTo !== undefined ? { createdTo: f.createdTo } : {}),
    });
    // A subagent's run is part of its parent's: it is rerun with it, not alone. An erased session's
    // runs keep only their totals: nothing of them can be rerun or frozen.
    const erased = new Set<string>();
    for (const id of new Set(page.map((r) => r.sessionId)))
      if ((await store.sessions.get(id))?.erasedAt !== null) erased.add(id);
    out.push(...page.filter((r) => r.parentRunId === null && !erased.has(r.sessionId)).slice(0, want - out.length));
    if (page.length < 500) break;
    after = page.at(-1)!.id;
  }
  return out;
}
