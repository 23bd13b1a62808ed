/**
 * Tools a client declares and executes itself (issue 41, core/client-tool.ts, runs/client-tools.ts):
 * the model sees the client's schema; a call waits durably (`waiting_for_signal`) until the
 * client's output comes, across a restart; the output is the call's result as given (text, JSON,
 * or an error); several calls of one step wait for all; unknown calls, repeats, clashing names and
 * bad declarations are refused.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  createRuntime,
  defineAgent,
  InvalidSendOptionError,
  openSqliteStore,
  pendingClientToolCalls,
  ScriptedModel,
  tool,
  type AgentDefinition,
  type Runtime,
  type ScriptEntry,
  type SqliteStore,
} from '../../src/index.ts';
import { z } from 'zod';
import { allEvents, ofType, tempDbPath } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function start(agents: AgentDefinition[], store: SqliteStore = openSqliteStore({ path: ':memory:' })) {
  const rt = createRuntime({ store, agents });
  rt.startWorker({ pollMs: 10, sweepMs: 10 });
  let closed = false;
  const stop = async () => {
    if (closed) return;
    closed = true;
    await rt.close({ graceMs: 50 });
    await store.close();
  };
  cleanups.push(stop);
  return { rt, store, stop };
}

const weather = {
  name: 'get_weather',
  description: 'The weather in a city, from the user’s device',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

const agentOf = (script: ScriptEntry[]) => {
  const model = new ScriptedModel(script);
  const lookup = tool({ name: 'lookup', description: 'Server side', input: z.object({}), execute: () => 'x' });
  return { model, agent: defineAgent({ name: 'a', model, tools: [lookup] }) };
};

/** The tool results the model was sent in its last call. */
const lastToolResults = (model: ScriptedModel): unknown[] =>
  model.calls
    .at(-1)!
    .prompt.flatMap((m) =>
      m.role === 'tool' ? m.content.map((p) => (p.type === 'tool-result' ? p.output : null)) : [],
    );

async function waitingRun(rt: Runtime, clientTools = [weather]) {
  const s = await rt.sessions.create();
  const { run } = await rt.sessions.send(s.id, 'weather in Paris?', { clientTools });
  return { session: s, run: await rt.runs.wait(run.id) };
}

describe('client-executed tools', () => {
  it('the model sees the client’s tool; its call waits for the client’s output, which the model then gets', async () => {
    const { agent, model } = agentOf([
      { toolCalls: [{ id: 'c1', name: 'get_weather', input: { city: 'Paris' } }] },
      { text: 'sunny in Paris' },
    ]);
    const { rt } = start([agent]);
    const { session, run } = await waitingRun(rt);
    expect(run.status).toBe('waiting_for_signal');
    expect(pendingClientToolCalls(run)).toEqual([{ callId: 'c1', name: 'get_weather', input: { city: 'Paris' } }]);
    // The model was offered the client's JSON Schema beside the agent's own tool.
    const offered = model.calls[0]!.tools!.map((t) => (t.type === 'function' ? [t.name, t.inputSchema] : []));
    expect(offered).toEqual([
      ['lookup', expect.anything()],
      ['get_weather', weather.parameters],
    ]);

    const resumed = await rt.runs.submitToolResults(run.id, [{ callId: 'c1', output: '21 °C, sunny' }]);
    expect(resumed.status).toBe('queued');
    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 });
    expect(done).toMatchObject({ status: 'completed', attempt: 1 });
    expect(lastToolResults(model)).toEqual([{ type: 'text', value: '21 °C, sunny' }]);
    const events = await allEvents(rt.sessions, session.id);
    expect(ofType(events, 'tool/result').map((e) => e.data.output)).toEqual([{ type: 'text', value: '21 °C, sunny' }]);

    // Once only: a second output for the call is refused, as is a call the run never made.
    await expect(rt.runs.submitToolResults(run.id, [{ callId: 'c1', output: 'again' }])).rejects.toMatchObject({
      code: 'already_delivered',
    });
    await expect(rt.runs.submitToolResults(run.id, [{ callId: 'c9', output: 'x' }])).rejects.toMatchObject({
      code: 'illegal_transition',
    });
  });

  it('waits for every call of a step; JSON and error outputs reach the model as given', async () => {
    const { agent, model } = agentOf([
      {
        toolCalls: [
          { id: 'c1', name: 'get_weather', input: { city: 'Paris' } },
          { id: 'c2', name: 'get_weather', input: { city: 'Oslo' } },
        ],
      },
      { text: 'done' },
    ]);
    const { rt } = start([agent]);
    const { run } = await waitingRun(rt);
    expect(pendingClientToolCalls(run).map((c) => c.callId)).toEqual(['c1', 'c2']);
    await expect(rt.runs.submitToolResults(run.id, [{ callId: 'nope', output: 'x' }])).rejects.toMatchObject({
      code: 'unknown_tool_call',
    });
    const half = await rt.runs.submitToolResults(run.id, [{ callId: 'c1', output: { celsius: 21 } }]);
    expect(half.status).toBe('waiting_for_signal');
    expect(pendingClientToolCalls(half).map((c) => c.callId)).toEqual(['c2']);
    await expect(rt.runs.submitToolResults(run.id, [{ callId: 'c1', output: 'x' }])).rejects.toMatchObject({
      code: 'already_delivered',
    });
    await rt.runs.submitToolResults(run.id, [{ callId: 'c2', output: 'no network', isError: true }]);
    expect(await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).toMatchObject({ status: 'completed' });
    expect(lastToolResults(model)).toEqual([
      { type: 'json', value: { celsius: 21 } },
      { type: 'error-text', value: '[execution_error] no network' },
    ]);
  });

  it('a waiting call survives a restart: a new runtime on the same file takes the output and finishes the run', async () => {
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const first = agentOf([{ toolCalls: [{ id: 'c1', name: 'get_weather', input: { city: 'Paris' } }] }]);
    const one = start([first.agent], openSqliteStore({ path: db.path }));
    const { run } = await waitingRun(one.rt);
    await one.stop();

    const second = agentOf([{ text: 'sunny in Paris' }]);
    const two = start([second.agent], openSqliteStore({ path: db.path }));
    expect(pendingClientToolCalls(await two.rt.runs.get(run.id))).toHaveLength(1);
    await two.rt.runs.submitToolResults(run.id, [{ callId: 'c1', output: 'sunny' }]);
    expect(await two.rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 5000 })).toMatchObject({
      status: 'completed',
    });
    // The resumed step offered the client's tool again (from the run's options).
    expect(second.model.calls[0]!.tools!.map((t) => (t.type === 'function' ? t.name : ''))).toContain('get_weather');
    expect(lastToolResults(second.model)).toEqual([{ type: 'text', value: 'sunny' }]);
  });

  it('refuses a client tool named like one of the agent’s, two of one name, and a bad declaration', async () => {
    const { agent } = agentOf([{ text: 'never' }]);
    const { rt } = start([agent]);
    const s = await rt.sessions.create();
    const refused = async (clientTools: unknown, field: string) => {
      const e = await rt.sessions
        .send(s.id, 'hi', { clientTools } as never)
        .then(() => undefined)
        .catch((err: unknown) => err);
      expect(e).toBeInstanceOf(InvalidSendOptionError);
      expect((e as InvalidSendOptionError).field).toBe(field);
    };
    await refused([{ name: 'lookup' }], 'clientTools[0].name');
    await refused([weather, weather], 'clientTools[1].name');
    await refused([{ name: 'has space' }], 'clientTools.0.name');
    await refused([{ name: 'ok', parameters: 'a string' }], 'clientTools.0.parameters');
    // Nothing was queued by the refusals.
    expect(await rt.runs.list({ sessionId: s.id })).toEqual([]);
  });
});
