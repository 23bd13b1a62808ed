import type { Run } from 'keel/client';
import type { AgentSpec } from './types.ts';

/**
 * The MCP tools a run got at its start (from its agent spec): each tool's name, its server, the
 * server's own name for it and its approval; the servers it came from, and the ones skipped or
 * tools left out, with why. Nothing for a run whose agent has no MCP servers, or before it started.
 */
export function McpTools(props: { run: Run }) {
  const spec = props.run.agent_spec as AgentSpec;
  if (!spec.mcp) return null;
  const tools = (spec.tools ?? []).filter((t) => t.mcp !== undefined);
  const { servers, skipped } = spec.mcp;
  return (
    <section class="mcp-tools" data-testid="mcp-tools">
      <h2>MCP tools</h2>
      <p class="muted">
        {servers.length === 0
          ? 'No server gave tools.'
          : `From ${servers.map((s) => `${s.name} (${s.transport}${s.serverInfo ? `, ${s.serverInfo.name} ${s.serverInfo.version}` : ''})`).join(', ')}, at the run's start.`}
      </p>
      {tools.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th>Tool</th>
              <th>Server</th>
              <th>Server's name</th>
              <th>Approval</th>
            </tr>
          </thead>
          <tbody>
            {tools.map((t) => (
              <tr key={t.name} data-testid="mcp-tool" title={t.description}>
                <td class="mono">{t.name}</td>
                <td>{t.mcp!.server}</td>
                <td class="mono">{t.mcp!.remoteName}</td>
                <td>{t.approval}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {servers.flatMap((s) =>
        (s.dropped ?? []).map((d) => (
          <p class="muted" data-testid="mcp-dropped" key={`${s.name}:${d.tool}`}>
            {s.name}: {d.tool} left out ({d.reason})
          </p>
        )),
      )}
      {skipped.map((s) => (
        <p class="error" data-testid="mcp-skipped" key={s.server}>
          Server {s.server} skipped: {s.reason}
        </p>
      ))}
    </section>
  );
}
