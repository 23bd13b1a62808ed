/**
 * MCP tool servers (docs/mcp.md): real server processes written with the official SDK (stdio and
 * streamable HTTP, test/mcp/fixtures/), their tools run through a durable run's loop.
 */
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  verifyReplay,
  type AgentDefinition,
  type McpServerConfig,
  type McpToolsRecord,
  type Runtime,
  type ScriptEntry,
  type SqliteStore,
} from '../../src/index.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import { fixtureLog, httpServer, startHttpFixture, stdioServer, until, type HttpFixture } from './helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function start(agents: AgentDefinition[]): { rt: Runtime; store: SqliteStore } {
  const store = openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents });
  rt.startWorker({});
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, store };
}

/** A scripted model that keeps the tool names of every request it got. */
function scripted(script: ScriptEntry[]) {
  const seen: Array<Array<{ name: string; description?: string; inputSchema?: unknown }>> = [];
  const entries = script.map((e) => (call: LanguageModelV4CallOptions, i: number) => {
    seen.push(
      (call.tools ?? []).map((t) => ({
        name: t.name,
        ...(t.type === 'function' ? { description: t.description, inputSchema: t.inputSchema } : {}),
      })),
    );
    return typeof e === 'function' ? e(call, i) : e;
  });
  return { model: new ScriptedModel(entries), seen };
}

const NO_APPROVALS = { approval: 'never' as const };

interface Transport {
  kind: 'stdio' | 'http';
  /** A server config for this transport (a running fixture). */
  config(more?: Partial<McpServerConfig>): McpServerConfig;
  /** The server is running again (after it died), with this tool set. */
  restart(variant?: string): Promise<void>;
  /** A config for a server that is down. */
  down(more?: Partial<McpServerConfig>): McpServerConfig;
  log: ReturnType<typeof fixtureLog>;
}

async function stdioTransport(): Promise<Transport> {
  const log = fixtureLog();
  cleanups.push(() => log.cleanup());
  return {
    kind: 'stdio',
    log,
    config: (more) => stdioServer('fx', log.path, more),
    // The next process started for the same configuration offers this tool set.
    restart: async (v = 'a') => writeFileSync(`${log.path}.variant`, v),
    down: (more) => ({ name: 'fx', stdio: { command: '/nonexistent/mcp-server' }, ...more }),
  };
}

async function httpTransport(): Promise<Transport> {
  const log = fixtureLog();
  let fx: HttpFixture = await startHttpFixture(log.path);
  const port = fx.port;
  cleanups.push(async () => {
    await fx.stop();
    log.cleanup();
  });
  return {
    kind: 'http',
    log,
    config: (more) => httpServer('fx', fx.url, more),
    restart: async (variant = 'a') => {
      await fx.stop();
      fx = await startHttpFixture(log.path, { port, variant });
    },
    down: (more) => httpServer('fx', 'http://127.0.0.1:9/mcp', { connectTimeoutMs: 2000, ...more }),
  };
}

describe.each([
  ['stdio', stdioTransport],
  ['streamable HTTP', httpTransport],
] as const)('MCP over %s', (_name, transport) => {
  it('offers the server tools, prefixed, with their schemas; a run calls them and gets results (isError: an error result)', async () => {
    const t = await transport();
    const { model, seen } = scripted([
      {
        toolCalls: [
          { id: 'c1', name: 'fx__add', input: { a: 2, b: 3 } },
          { id: 'c2', name: 'fx__read_only_echo', input: { text: 'hi' } },
          { id: 'c3', name: 'fx__fails', input: {} },
        ],
      },
      { text: 'done' },
    ]);
    const agent = defineAgent({ name: 'a', model, mcpServers: [t.config(NO_APPROVALS)] });
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect(await rt.runs.wait(run.id, { until: 'terminal' })).toMatchObject({ status: 'completed' });

    expect(seen[0]!.map((x) => x.name).sort()).toEqual([
      'fx__add',
      'fx__die',
      'fx__fails',
      'fx__read_only_echo',
      'fx__slow',
    ]);
    const add = seen[0]!.find((x) => x.name === 'fx__add')!;
    expect(add.description).toBe('Adds two numbers');
    expect(add.inputSchema).toMatchObject({
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' } },
      required: ['a', 'b'],
    });

    const events = await allEvents(rt.sessions, s.id);
    const results = Object.fromEntries(ofType(events, 'tool/result').map((e) => [e.data.toolCallId, e.data.output]));
    expect(results).toEqual({
      c1: { type: 'text', value: '5' },
      c2: { type: 'text', value: 'echo: hi' },
      c3: { type: 'error', code: 'execution_error', message: 'it failed on purpose' },
    });
    const [recorded] = ofType(events, 'mcp/tools' as never) as unknown as Array<{
      data: McpToolsRecord;
      runId: string;
    }>;
    expect(recorded!.runId).toBe(run.id);
    expect(recorded!.data.servers[0]).toMatchObject({
      name: 'fx',
      transport: _name === 'stdio' ? 'stdio' : 'http',
      serverInfo: { name: 'keel-fixture', version: '1.0.0' },
    });
  });

  it('asks for approval by default, except for tools the server marks read-only (which are idempotent)', async () => {
    const t = await transport();
    const { model } = scripted([
      {
        toolCalls: [
          { id: 'c1', name: 'fx__add', input: { a: 1, b: 1 } },
          { id: 'c2', name: 'fx__read_only_echo', input: { text: 'x' } },
        ],
      },
      { text: 'done' },
    ]);
    const agent = defineAgent({
      name: 'a',
      model,
      mcpServers: [t.config({ approval: { tools: { fails: 'never' } } })],
    });
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    const parked = await rt.runs.wait(run.id);
    expect(parked).toMatchObject({
      status: 'waiting_approval',
      waiting: { calls: [{ toolCallId: 'c1', toolName: 'fx__add' }] },
    });
    const events = await allEvents(rt.sessions, s.id);
    expect(ofType(events, 'tool/result').map((e) => e.data.toolCallId)).toEqual(['c2']);
    const record = (ofType(events, 'mcp/tools' as never)[0] as unknown as { data: McpToolsRecord }).data;
    const byName = Object.fromEntries(
      record.servers[0]!.tools.map((x) => [x.remoteName, { approval: x.approval, idempotent: x.idempotent }]),
    );
    expect(byName).toEqual({
      add: { approval: 'always', idempotent: false },
      slow: { approval: 'always', idempotent: true },
      read_only_echo: { approval: 'never', idempotent: true },
      fails: { approval: 'never', idempotent: false },
      die: { approval: 'always', idempotent: false },
    });
    expect(await rt.runs.approve(run.id, 'c1')).toMatchObject({ status: 'queued' });
    expect(await rt.runs.wait(run.id, { until: 'terminal' })).toMatchObject({ status: 'completed' });
    const add = ofType(await allEvents(rt.sessions, s.id), 'tool/result').find((e) => e.data.toolCallId === 'c1');
    expect(add?.data.output).toEqual({ type: 'text', value: '2' });
  });

  it('a cancelled run and a tool timeout cancel the server request (the slow tool sees its abort)', async () => {
    const t = await transport();
    const { model } = scripted([
      { toolCalls: [{ id: 'c1', name: 'fx__slow', input: { ms: 30_000 } }] },
      { toolCalls: [{ id: 'c2', name: 'fx__slow', input: { ms: 30_000 } }] },
      { text: 'done' },
    ]);
    // The timeout first: the model sees it and goes on; then a cancel during the second call.
    const agent = defineAgent({ name: 'a', model, mcpServers: [t.config({ ...NO_APPROVALS, timeoutMs: 500 })] });
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    await until(() => t.log.entries().filter((e) => e.event === 'aborted').length === 1);
    await until(() => t.log.entries().filter((e) => e.tool === 'slow' && e.event === 'call').length === 2);
    await rt.runs.cancel(run.id);
    expect(await rt.runs.wait(run.id, { until: 'terminal' })).toMatchObject({ status: 'cancelled' });
    await until(() => t.log.entries().filter((e) => e.event === 'aborted').length === 2);
    const results = ofType(await allEvents(rt.sessions, s.id), 'tool/result').map((e) => e.data.output);
    expect(results).toMatchObject([
      { type: 'error', code: 'timeout' },
      { type: 'error', code: 'cancelled' },
    ]);
  });

  it('a server that dies mid-call gives the call an error result and the run goes on; the next run reconnects', async () => {
    const t = await transport();
    const { model } = scripted([
      { toolCalls: [{ id: 'c1', name: 'fx__die', input: {} }] },
      { text: 'the tool failed, going on' },
      { toolCalls: [{ id: 'c2', name: 'fx__add', input: { a: 20, b: 22 } }] },
      { text: 'done' },
    ]);
    const agent = defineAgent({ name: 'a', model, mcpServers: [t.config(NO_APPROVALS)] });
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const first = (await rt.sessions.send(s.id, 'go')).run;
    expect(await rt.runs.wait(first.id, { until: 'terminal', timeoutMs: 20_000 })).toMatchObject({
      status: 'completed',
    });
    const died = ofType(await allEvents(rt.sessions, s.id), 'tool/result').map((e) => e.data.output);
    expect(died).toEqual([
      { type: 'error', code: 'execution_error', message: expect.stringMatching(/^MCP server fx: /) },
    ]);

    // A stdio server is started again by the next connection; the HTTP one's process ended: the test starts it again (same port).
    if (t.kind === 'http') await t.restart();
    const second = (await rt.sessions.send(s.id, 'again')).run;
    expect(await rt.runs.wait(second.id, { until: 'terminal', timeoutMs: 20_000 })).toMatchObject({
      status: 'completed',
    });
    const results = ofType(await allEvents(rt.sessions, s.id), 'tool/result').map((e) => e.data.output);
    expect(results[1]).toEqual({ type: 'text', value: '42' });
    const pids = new Set(
      t.log
        .entries()
        .filter((e) => e.event === 'started')
        .map((e) => e.pid),
    );
    expect(pids.size).toBe(2);
  });

  it('a server down at run start fails the run with mcp_unavailable; with onUnavailable: skip the run goes on without its tools, recorded', async () => {
    const t = await transport();
    const failing = scripted([{ text: 'never' }]);
    const skipping = scripted([{ text: 'done without fx' }]);
    const { rt } = start([
      defineAgent({ name: 'strict', model: failing.model, mcpServers: [t.down()] }),
      defineAgent({ name: 'lenient', model: skipping.model, mcpServers: [t.down({ onUnavailable: 'skip' })] }),
    ]);
    const s1 = await rt.sessions.create();
    const r1 = (await rt.sessions.send(s1.id, 'go', { agent: 'strict' })).run;
    const failed = await rt.runs.wait(r1.id, { until: 'terminal', timeoutMs: 15_000 });
    expect(failed).toMatchObject({
      status: 'failed',
      error: {
        kind: 'mcp_unavailable',
        server: 'fx',
        message: expect.stringMatching(/^MCP server fx is unavailable: /),
      },
    });
    expect(failing.seen).toEqual([]);

    const s2 = await rt.sessions.create();
    const r2 = (await rt.sessions.send(s2.id, 'go', { agent: 'lenient' })).run;
    expect(await rt.runs.wait(r2.id, { until: 'terminal', timeoutMs: 15_000 })).toMatchObject({ status: 'completed' });
    expect(skipping.seen).toEqual([[]]);
    const record = (
      ofType(await allEvents(rt.sessions, s2.id), 'mcp/tools' as never)[0] as unknown as { data: McpToolsRecord }
    ).data;
    expect(record).toMatchObject({
      servers: [],
      skipped: [{ server: 'fx', reason: expect.stringMatching(/^MCP server fx is unavailable: /) }],
    });
  });

  it('a run keeps the tools recorded at its start after the server changes: its resumed execution sends them, replay --verify passes', async () => {
    const t = await transport();
    const { model, seen } = scripted([
      { toolCalls: [{ id: 'c1', name: 'fx__add', input: { a: 1, b: 2 } }] },
      { text: 'done' },
      { text: 'fresh' },
    ]);
    const agent = defineAgent({ name: 'a', model, mcpServers: [t.config()] });
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    expect(await rt.runs.wait(run.id)).toMatchObject({ status: 'waiting_approval' });

    // The server changes its tools while the run waits (and the old connection is gone).
    await t.restart('b');
    await rt.mcp.close();
    await rt.runs.approve(run.id, 'c1');
    expect(await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 15_000 })).toMatchObject({ status: 'completed' });
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[1]!.map((x) => x.name)).toContain('fx__slow');
    const report = await verifyReplay(rt.sessions.log, s.id);
    expect(report).toMatchObject({ ok: true, mismatches: [] });
    expect(report.requests).toBe(2);

    // A new run gets the server's tools as they are now.
    const next = (await rt.sessions.send(s.id, 'again')).run;
    expect(await rt.runs.wait(next.id, { until: 'terminal', timeoutMs: 15_000 })).toMatchObject({
      status: 'completed',
    });
    expect(seen[2]!.map((x) => x.name).sort()).toEqual(['fx__add', 'fx__multiply']);
    expect(seen[2]!.find((x) => x.name === 'fx__add')!.description).toBe('Adds three numbers (changed)');
    expect(await verifyReplay(rt.sessions.log, s.id)).toMatchObject({ ok: true, mismatches: [] });
  });
});
