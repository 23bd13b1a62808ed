/**
 * The MCP tools a run got at its start are in its agent spec (GET /v1/runs/{id}), beside its own
 * tools, each naming its server; the servers it skipped are there too. Real MCP server processes
 * (test/mcp/fixtures/), through the HTTP API.
 */
import { afterEach, expect, it } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/server/app.ts';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  tool,
  type AgentDefinition,
} from '../../src/index.ts';
import { fixtureLog, stdioServer } from './helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function api(agents: AgentDefinition[]) {
  const store = openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents });
  rt.startWorker({});
  const { app, close } = createApp({ runtime: rt, auth: 'off', version: '0.0.0-test' });
  cleanups.push(async () => {
    close();
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  const json = async (path: string, body?: unknown) => {
    const r = await app.request(
      path,
      body === undefined
        ? {}
        : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
    );
    expect(r.status, await r.clone().text()).toBeLessThan(300);
    return (await r.json()) as Record<string, unknown>;
  };
  return { rt, json };
}

type Spec = { tools: Array<Record<string, unknown>>; mcp?: Record<string, unknown> };

const echo = tool({
  name: 'own_echo',
  description: 'Echoes',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => text,
});

it("a run's agent spec lists the MCP tools it got, each with its server, and keeps them when the run resumes", async () => {
  const log = fixtureLog();
  cleanups.push(() => log.cleanup());
  const model = new ScriptedModel([
    { toolCalls: [{ id: 'c1', name: 'fx__add', input: { a: 1, b: 2 } }] },
    { text: 'done' },
  ]);
  const { rt, json } = api([
    defineAgent({ name: 'a', model, tools: [echo], mcpServers: [stdioServer('fx', log.path)] }),
  ]);
  const session = await json('/v1/sessions', {});
  const sent = (await json(`/v1/sessions/${session.id as string}/messages`, { content: 'go' })) as {
    run: { id: string };
  };
  const runId = sent.run.id;
  expect((await rt.runs.wait(runId)).status).toBe('waiting_approval');

  const spec = (await json(`/v1/runs/${runId}`)).agent_spec as Spec;
  // The agent's own tool first, then the server's, as the model is offered them.
  expect(spec.tools.map((t) => t.name)).toEqual([
    'own_echo',
    'fx__add',
    'fx__slow',
    'fx__read_only_echo',
    'fx__fails',
    'fx__die',
  ]);
  expect(spec.tools[0]).not.toHaveProperty('mcp');
  expect(spec.tools.find((t) => t.name === 'fx__add')).toEqual({
    name: 'fx__add',
    description: 'Adds two numbers',
    inputSchema: expect.objectContaining({
      type: 'object',
      properties: { a: { type: 'number' }, b: { type: 'number' } },
    }),
    approval: 'always',
    idempotent: false,
    interactive: false,
    sequential: false,
    timeoutMs: 60_000,
    mcp: { server: 'fx', remoteName: 'add' },
  });
  expect(spec.tools.find((t) => t.name === 'fx__read_only_echo')).toMatchObject({
    approval: 'never',
    idempotent: true,
    mcp: { server: 'fx', remoteName: 'read_only_echo' },
  });
  expect(spec.mcp).toEqual({
    servers: [{ name: 'fx', transport: 'stdio', serverInfo: { name: 'keel-fixture', version: '1.0.0' } }],
    skipped: [],
  });

  // Resumed after the approval: the spec is what the run got at its start.
  await json(`/v1/runs/${runId}/approvals/c1`, { decision: 'approve' });
  expect((await rt.runs.wait(runId, { until: 'terminal' })).status).toBe('completed');
  expect((await json(`/v1/runs/${runId}`)).agent_spec).toEqual(spec);
  // Listed in the runs of the session too.
  const listed = (await json(`/v1/sessions/${session.id as string}/runs`)) as {
    data: Array<{ id: string; agent_spec: Spec }>;
  };
  expect(listed.data.find((r) => r.id === runId)!.agent_spec).toEqual(spec);
});

it("a server skipped at the run's start is in its agent spec with the reason, and gives no tools", async () => {
  const model = new ScriptedModel([{ text: 'done without fx' }]);
  const down = { name: 'fx', stdio: { command: '/nonexistent/mcp-server' }, onUnavailable: 'skip' as const };
  const { rt, json } = api([defineAgent({ name: 'a', model, tools: [echo], mcpServers: [down] })]);
  const session = await json('/v1/sessions', {});
  const sent = (await json(`/v1/sessions/${session.id as string}/messages`, { content: 'go' })) as {
    run: { id: string };
  };
  expect((await rt.runs.wait(sent.run.id, { until: 'terminal' })).status).toBe('completed');
  const spec = (await json(`/v1/runs/${sent.run.id}`)).agent_spec as Spec;
  expect(spec.tools.map((t) => t.name)).toEqual(['own_echo']);
  expect(spec.mcp).toEqual({
    servers: [],
    skipped: [{ server: 'fx', reason: expect.stringMatching(/^MCP server fx is unavailable: /) }],
  });
});
