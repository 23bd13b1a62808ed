/**
 * A run resumed after its wait ended takes what ended it, also when an earlier turn of the session
 * made calls with the same ids (a model that numbers its calls, a schedule that sends the same
 * message into one session): the open calls are those of the last model decision that its own
 * tool message has not answered, not every id some earlier result answered. Found by the chaos
 * test (`task sB … sleep` fired every second into one session slept again at each wake-up, for ever).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  manualClock,
  openSqliteStore,
  ScriptedModel,
  sleepTool,
  tool,
  type AgentDefinition,
  type ScriptEntry,
} from '../../src/index.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function start(agent: AgentDefinition) {
  const clock = manualClock();
  const store = openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents: [agent], clock });
  rt.startWorker({ pollMs: 10, sweepMs: 10 });
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  return { rt, clock };
}

/** The same two responses for every turn: a call with id `c1`, then an answer. */
const twice = (call: ScriptEntry): ScriptEntry[] => [call, { text: 'done' }, call, { text: 'done' }];

describe('a wait ended in a later turn that reuses an earlier turn’s call ids', () => {
  it('a sleep that woke is not slept again', async () => {
    const model = new ScriptedModel(twice({ toolCalls: [{ id: 'c1', name: 'sleep', input: { seconds: 60 } }] }));
    const { rt, clock } = start(defineAgent({ name: 'a', model, tools: [sleepTool()] }));
    const s = await rt.sessions.create();
    for (let turn = 1; turn <= 2; turn++) {
      const { run } = await rt.sessions.send(s.id, `turn ${turn}`);
      expect((await rt.runs.wait(run.id, { timeoutMs: 5000 })).status).toBe('sleeping');
      clock.advance(61_000);
      expect(
        (
          await rt.runs
            .wait(run.id, { until: 'terminal', timeoutMs: 5000 })
            .catch((e: Error) => ({ status: e.message }))
        ).status,
        `turn ${turn}`,
      ).toBe('completed');
      const mine = (await allEvents(rt.sessions, s.id)).filter((e) => e.runId === run.id);
      expect(ofType(mine, 'wait/resolved')).toHaveLength(1);
      expect(ofType(mine, 'tool/result').map((e) => e.data.output)).toEqual([
        { type: 'text', value: expect.stringMatching(/^slept until /) },
      ]);
    }
  });

  it('an approval given is not asked again', async () => {
    const danger = tool({
      name: 'danger',
      description: 'Needs approval',
      input: z.object({}),
      approval: 'always',
      execute: () => 'did it',
    });
    const model = new ScriptedModel(twice({ toolCalls: [{ id: 'c1', name: 'danger', input: {} }] }));
    const { rt } = start(defineAgent({ name: 'a', model, tools: [danger] }));
    const s = await rt.sessions.create();
    for (let turn = 1; turn <= 2; turn++) {
      const { run } = await rt.sessions.send(s.id, `turn ${turn}`);
      expect((await rt.runs.wait(run.id, { timeoutMs: 5000 })).status).toBe('waiting_approval');
      await rt.runs.approve(run.id, 'c1');
      expect((await rt.runs.wait(run.id, { timeoutMs: 5000 })).status, `turn ${turn}`).toBe('completed');
      const mine = (await allEvents(rt.sessions, s.id)).filter((e) => e.runId === run.id);
      expect(ofType(mine, 'tool/approval')).toHaveLength(1);
      expect(ofType(mine, 'tool/result').map((e) => e.data.output)).toEqual([{ type: 'text', value: 'did it' }]);
    }
  });
});
