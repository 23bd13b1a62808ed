/**
 * A recovered run (its worker let go of it at once mid-call, as a dying process would) executes again
 * with the MCP tools recorded at its first start, not with what the server offers now.
 */
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { writeFileSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { createRuntime, defineAgent, openSqliteStore, ScriptedModel, verifyReplay } from '../../src/index.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import { fixtureLog, stdioServer, until } from './helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('a recovered run sends the recorded tool list after the server changed; replay --verify passes', async () => {
  const log = fixtureLog();
  cleanups.push(() => log.cleanup());
  const seen: string[][] = [];
  const remember = (r: object) => (call: LanguageModelV4CallOptions) => (
    seen.push((call.tools ?? []).map((t) => t.name).sort()),
    r
  );
  const model = new ScriptedModel([
    remember({ toolCalls: [{ id: 'c1', name: 'fx__slow', input: { ms: 30_000 } }] }),
    remember({ text: 'done' }),
  ]);
  const agent = defineAgent({ name: 'a', model, mcpServers: [stdioServer('fx', log.path, { approval: 'never' })] });
  const store = openSqliteStore({ path: ':memory:' });
  const rt = createRuntime({ store, agents: [agent] });
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close();
  });
  rt.startWorker({});
  const s = await rt.sessions.create();
  const { run } = await rt.sessions.send(s.id, 'go');
  await until(() => log.entries().some((e) => e.tool === 'slow'));

  // The server now offers other tools; the worker lets go of the run mid-call, and the server process is gone.
  writeFileSync(`${log.path}.variant`, 'b');
  rt.executions.get(run.id)!.release(true);
  await rt.mcp.close();

  expect(await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 })).toMatchObject({ status: 'completed' });
  expect(seen).toHaveLength(2);
  expect(seen[1]).toEqual(seen[0]);
  expect(seen[1]).toEqual(['fx__die', 'fx__fails', 'fx__read_only_echo', 'fx__slow', 'fx__add'].sort());
  const events = await allEvents(rt.sessions, s.id);
  expect(ofType(events, 'mcp/tools' as never)).toHaveLength(1);
  // The idempotent call was not on record yet: the recovered execution asked the model again, with
  // the recorded tools, and never listed the changed server's (no server process was started for it).
  expect(ofType(events, 'run/status').some((e) => /released/.test(e.data.reason ?? ''))).toBe(true);
  expect(log.entries().filter((e) => e.event === 'started')).toHaveLength(1);
  expect(await verifyReplay(rt.sessions.log, s.id)).toMatchObject({ ok: true, mismatches: [] });
});
