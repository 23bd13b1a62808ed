/**
 * A server's tools/list is read page by page within bounds (docs/mcp.md): a real MCP server
 * (test/mcp/fixtures/paging-server.mjs) that pages its tools, for ever or with too many tools, fails
 * the run at its start with an error naming the server and the bound, after asking no more pages
 * than the bound allows; with `onUnavailable: 'skip'` the run goes on without its tools.
 */
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { afterEach, expect, it } from 'vitest';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  type AgentDefinition,
  type McpToolsRecord,
  type Runtime,
} from '../../src/index.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import { fixtureLog, pagingServer } from './helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function start(agents: AgentDefinition[]): Runtime {
  const store = openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents });
  rt.startWorker({});
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return rt;
}

function log() {
  const l = fixtureLog();
  cleanups.push(() => l.cleanup());
  return l;
}

/** A scripted model that keeps the tool names of every request it got. */
function scripted(text: string) {
  const seen: string[][] = [];
  const model = new ScriptedModel([
    (call: LanguageModelV4CallOptions) => (seen.push((call.tools ?? []).map((t) => t.name)), { text }),
  ]);
  return { model, seen };
}

async function runOnce(rt: Runtime, agent?: string) {
  const s = await rt.sessions.create();
  const { run } = await rt.sessions.send(s.id, 'go', agent ? { agent } : {});
  return { sessionId: s.id, run: await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 }) };
}

const pagesAsked = (l: ReturnType<typeof log>) => l.entries().filter((e) => e.event === 'list').length;

it('lists the tools of every page', async () => {
  const l = log();
  const { model, seen } = scripted('done');
  const rt = start([
    defineAgent({
      name: 'a',
      model,
      mcpServers: [pagingServer('pager', l.path, { perPage: 2, pages: 3 }, { approval: 'never' })],
    }),
  ]);
  const { run, sessionId } = await runOnce(rt);
  expect(run.status).toBe('completed');
  expect(seen[0]!.sort()).toEqual([
    'pager__tool_0_0',
    'pager__tool_0_1',
    'pager__tool_1_0',
    'pager__tool_1_1',
    'pager__tool_2_0',
    'pager__tool_2_1',
  ]);
  expect(pagesAsked(l)).toBe(3);
  const record = (
    ofType(await allEvents(rt.sessions, sessionId), 'mcp/tools' as never)[0] as unknown as { data: McpToolsRecord }
  ).data;
  expect(record.servers[0]!.tools).toHaveLength(6);
});

it('a tools/list that never ends fails the run after 100 pages, naming the server and the bound', async () => {
  const l = log();
  const { model, seen } = scripted('never');
  const rt = start([defineAgent({ name: 'a', model, mcpServers: [pagingServer('pager', l.path, { perPage: 1 })] })]);
  const { run } = await runOnce(rt);
  expect(run).toMatchObject({
    status: 'failed',
    error: {
      kind: 'mcp_tool_list_too_long',
      server: 'pager',
      message: 'MCP server pager: its tools/list has more than 100 pages (tools.maxPages: 100)',
    },
  });
  expect(pagesAsked(l)).toBe(100);
  expect(seen).toEqual([]);
});

it('the bounds are configurable per server: pages and tools', async () => {
  const l1 = log();
  const l2 = log();
  const pages = scripted('never');
  const tools = scripted('never');
  const rt = start([
    defineAgent({
      name: 'pages',
      model: pages.model,
      mcpServers: [pagingServer('pager', l1.path, { perPage: 1 }, { tools: { maxPages: 5 } })],
    }),
    defineAgent({
      name: 'tools',
      model: tools.model,
      mcpServers: [pagingServer('many', l2.path, { perPage: 4 }, { tools: { maxTools: 10 } })],
    }),
  ]);
  expect((await runOnce(rt, 'pages')).run).toMatchObject({
    status: 'failed',
    error: {
      kind: 'mcp_tool_list_too_long',
      server: 'pager',
      message: 'MCP server pager: its tools/list has more than 5 pages (tools.maxPages: 5)',
    },
  });
  expect(pagesAsked(l1)).toBe(5);
  // 4 + 4 tools fit in 10; the third page would make 12.
  expect((await runOnce(rt, 'tools')).run).toMatchObject({
    status: 'failed',
    error: {
      kind: 'mcp_tool_list_too_long',
      server: 'many',
      message: 'MCP server many: its tools/list has more than 10 tools (tools.maxTools: 10)',
    },
  });
  expect(pagesAsked(l2)).toBe(3);
});

it('a server with more than 1,000 tools fails the run by default; with onUnavailable: skip the run goes on without them, recorded', async () => {
  const l = log();
  const strict = scripted('never');
  const lenient = scripted('done without them');
  const rt = start([
    defineAgent({ name: 'strict', model: strict.model, mcpServers: [pagingServer('many', l.path, { perPage: 400 })] }),
    defineAgent({
      name: 'lenient',
      model: lenient.model,
      mcpServers: [pagingServer('many', l.path, { perPage: 400 }, { onUnavailable: 'skip' })],
    }),
  ]);
  expect((await runOnce(rt, 'strict')).run).toMatchObject({
    status: 'failed',
    error: {
      kind: 'mcp_tool_list_too_long',
      server: 'many',
      message: 'MCP server many: its tools/list has more than 1000 tools (tools.maxTools: 1000)',
    },
  });
  expect(pagesAsked(l)).toBe(3);
  const { run, sessionId } = await runOnce(rt, 'lenient');
  expect(run.status).toBe('completed');
  expect(lenient.seen).toEqual([[]]);
  const record = (
    ofType(await allEvents(rt.sessions, sessionId), 'mcp/tools' as never)[0] as unknown as { data: McpToolsRecord }
  ).data;
  expect(record).toEqual({
    servers: [],
    skipped: [
      { server: 'many', reason: 'MCP server many: its tools/list has more than 1000 tools (tools.maxTools: 1000)' },
    ],
  });
});
