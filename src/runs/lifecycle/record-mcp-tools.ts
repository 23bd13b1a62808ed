/** A run's agent spec with the tools its MCP servers gave it at its first start, written inside the transaction that records them. */
import type { McpToolsGot } from '../../mcp/index.ts';
import type { RunRecord, StoreOps } from '../../store/index.ts';
import { specWithMcpTools } from './run-spec.ts';

/** Writes the run's agent spec with its MCP tools (only while the caller still holds the run with its token). */
export async function recordMcpTools(
  tx: StoreOps,
  run: Pick<RunRecord, 'id' | 'agentSpec' | 'fencingToken'>,
  got: McpToolsGot,
): Promise<void> {
  await tx.runs.update(run.id, { agentSpec: specWithMcpTools(run.agentSpec, got) }, { fencingToken: run.fencingToken });
}
