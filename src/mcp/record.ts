import type { JsonValue } from '../model/index.ts';
import type { SessionLog } from '../session/index.ts';
import type { StoreOps } from '../store/index.ts';
import { approvalOf, DEFAULT_TIMEOUT_MS, prefixOf, type McpServerConfig } from './config.ts';
import { McpUnavailableError, type McpPool } from './pool.ts';
import { listServerTools, McpToolListTooLongError } from './tool-list.ts';

/**
 * What a run got from its MCP servers when it started (the `mcp/tools` event, ADR-0019): every
 * tool as the model is shown it and as Keel runs it. A run uses this record for its whole life
 * (resumed after a wait, recovered after a crash), never a fresh `listTools`: the requests it
 * sends, their headers and `keel replay --verify` stay exact when a server changes.
 */
export interface McpToolsRecord {
  servers: RecordedServer[];
  /** Servers configured with `onUnavailable: 'skip'` that were down: the run has none of their tools. */
  skipped: Array<{ server: string; reason: string }>;
}

export interface RecordedServer {
  name: string;
  transport: 'stdio' | 'http';
  /** What the server said it is (`initialize`). */
  serverInfo?: { name: string; version: string };
  tools: RecordedTool[];
  /** Tools the server offered that Keel could not take (a name providers refuse, a clash). */
  dropped?: Array<{ tool: string; reason: string }>;
}

export interface RecordedTool {
  /** The name in Keel and at the provider (prefixed). */
  name: string;
  /** The server's name for it. */
  remoteName: string;
  description: string;
  inputSchema: JsonValue;
  annotations?: {
    readOnlyHint?: boolean;
    idempotentHint?: boolean;
    destructiveHint?: boolean;
    openWorldHint?: boolean;
  };
  approval: 'always' | 'never';
  idempotent: boolean;
  timeoutMs: number;
}

export const MCP_TOOLS_EVENT = 'mcp/tools';
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** The record written at the run's first start, if any (it is among the run's first events). */
export async function readMcpRecord(
  log: SessionLog,
  sessionId: string,
  runId: string,
): Promise<McpToolsRecord | undefined> {
  for (let after = 0; ;) {
    const page = await log.read(sessionId, { runId, afterSeq: after, limit: 200 });
    const found = page.find((e) => e.type === MCP_TOOLS_EVENT);
    if (found) return found.data as unknown as McpToolsRecord;
    // Written before the run's first turn starts: no need to read past it.
    if (page.length === 0 || page.some((e) => e.type === 'turn/start')) return undefined;
    after = page.at(-1)!.seq;
  }
}

/**
 * Appends the record, fenced: only while this execution still holds the run; `within` runs in the
 * same transaction (the run's agent spec is updated there).
 */
export async function writeMcpRecord(
  log: SessionLog,
  sessionId: string,
  runId: string,
  token: number,
  record: McpToolsRecord,
  within?: (tx: StoreOps) => Promise<void>,
): Promise<void> {
  await log.transaction(async (tx) => {
    await log.append(sessionId, [{ type: MCP_TOOLS_EVENT, runId, data: record as never }], {
      fence: { runId, token },
      tx,
    });
    await within?.(tx);
  });
}

/**
 * Connects to each server (or reuses its client) and lists its tools. A server that is down
 * throws McpUnavailableError, one whose list goes past its bounds McpToolListTooLongError; either
 * is listed in `skipped` instead when the server is configured with `onUnavailable: 'skip'`.
 */
export async function discoverMcpTools(
  pool: McpPool,
  servers: readonly McpServerConfig[],
  taken: ReadonlySet<string>,
): Promise<McpToolsRecord> {
  const record: McpToolsRecord = { servers: [], skipped: [] };
  const names = new Set(taken);
  const listed = await Promise.all(
    servers.map(async (s) => {
      try {
        return { s, listed: await listServerTools(pool, s) };
      } catch (e) {
        const error =
          e instanceof McpUnavailableError || e instanceof McpToolListTooLongError
            ? e
            : new McpUnavailableError(s.name, e instanceof Error ? e.message : String(e));
        if (s.onUnavailable === 'skip') return { s, skipped: error.message };
        throw error;
      }
    }),
  );
  for (const r of listed) {
    if (r.skipped !== undefined) {
      record.skipped.push({ server: r.s.name, reason: r.skipped });
      continue;
    }
    const { s, listed: l } = r;
    const server: RecordedServer = {
      name: s.name,
      transport: s.stdio ? 'stdio' : 'http',
      ...(l.serverInfo ? { serverInfo: l.serverInfo } : {}),
      tools: [],
    };
    const dropped: Array<{ tool: string; reason: string }> = [];
    for (const t of l.tools) {
      if (s.tools?.allow && !s.tools.allow.includes(t.name)) continue;
      const name = `${prefixOf(s)}${t.name}`;
      if (!TOOL_NAME.test(name)) {
        dropped.push({
          tool: t.name,
          reason: `the name ${JSON.stringify(name)} does not match ${TOOL_NAME} (what providers accept)`,
        });
        continue;
      }
      if (names.has(name)) {
        dropped.push({ tool: t.name, reason: `the agent already has a tool named ${name}` });
        continue;
      }
      names.add(name);
      const a = t.annotations ?? {};
      const readOnly = a.readOnlyHint === true;
      const { $schema: _ignored, ...inputSchema } = t.inputSchema as Record<string, JsonValue>;
      server.tools.push({
        name,
        remoteName: t.name,
        description: t.description ?? t.title ?? t.name,
        inputSchema: inputSchema as JsonValue,
        ...(Object.keys(a).length > 0 ? { annotations: pickHints(a) } : {}),
        approval: approvalOf(s, t.name, readOnly),
        // Read-only is idempotent: recovery may call it again. Otherwise the server's word.
        idempotent: readOnly || a.idempotentHint === true,
        timeoutMs: s.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      });
    }
    if (s.tools?.allow) {
      for (const wanted of s.tools.allow)
        if (!l.tools.some((t) => t.name === wanted))
          dropped.push({ tool: wanted, reason: 'allowed, but the server does not offer it' });
    }
    if (dropped.length > 0) server.dropped = dropped;
    record.servers.push(server);
  }
  return record;
}

function pickHints(a: Record<string, unknown>): NonNullable<RecordedTool['annotations']> {
  const out: NonNullable<RecordedTool['annotations']> = {};
  for (const k of ['readOnlyHint', 'idempotentHint', 'destructiveHint', 'openWorldHint'] as const)
    if (typeof a[k] === 'boolean') out[k] = a[k];
  return out;
}
