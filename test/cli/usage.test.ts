import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRuntime, defineAgent, ScriptedModel, subagent, type Pricing, type Runtime } from '../../src/index.ts';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/index.ts';
import { keel } from './io.ts';

/**
 * keel usage on a temp database filled through the library: tenant acme's parent run with a
 * subagent, and tenant globex's plain run in a session that is then erased.
 */
let dir: string;
let db: string;
let store: SqliteStore;
let rt: Runtime;
const pricing: Pricing = { inputPerMTok: 1_000_000, outputPerMTok: 2_000_000 };
const today = new Date().toISOString().slice(0, 10);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-cli-usage-'));
  db = join(dir, 'keel.db');
  store = openSqliteStore({ path: db });
  rt = createRuntime({
    store,
    agents: [
      defineAgent({
        name: 'parent',
        model: new ScriptedModel(
          [
            { toolCalls: [{ id: 'd1', name: 'delegate', input: { task: 'x' } }], usage: { input: 100, output: 10 } },
            { text: 'done', usage: { input: 200, output: 20 } },
          ],
          { modelId: 'parent-1' },
        ),
        tools: [subagent({ name: 'delegate', description: 'Hands a task to the child', agent: 'child' })],
        pricing,
      }),
      defineAgent({
        name: 'child',
        model: new ScriptedModel([{ text: 'child done', usage: { input: 30, output: 3 } }], { modelId: 'child-1' }),
        pricing,
      }),
      defineAgent({
        name: 'plain',
        model: new ScriptedModel([{ text: 'hi', usage: { input: 7, output: 3 } }], { modelId: 'plain-1' }),
        pricing,
      }),
    ],
  });
  rt.startWorker({ concurrency: 2 });
  const a = await rt.sessions.create({ tenant: 'acme' });
  const p = await rt.sessions.send(a.id, 'go', { agent: 'parent' });
  expect((await rt.runs.wait(p.run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
  const g = await rt.sessions.create({ tenant: 'globex' });
  const q = await rt.sessions.send(g.id, 'hello', { agent: 'plain' });
  expect((await rt.runs.wait(q.run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
  await rt.sessions.erase(g.id);
}, 30_000);

afterAll(async () => {
  await rt?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('keel usage', () => {
  it('prints an aligned table by tenant, agent and model: each run once, the erased session counted, with a total line', async () => {
    const r = await keel(['usage', '--db', db, '--by', 'tenant,agent,model']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const lines = r.out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^runs that ended from .* to .*/);
    expect(lines[1]!.split(/\s+/)).toEqual([
      'TENANT',
      'AGENT',
      'MODEL',
      'RUNS',
      'INPUT_TOKENS',
      'OUTPUT_TOKENS',
      'CACHED_INPUT_TOKENS',
      'REASONING_TOKENS',
      'COST',
    ]);
    expect(lines.slice(2).map((l) => l.split(/\s+/))).toEqual([
      ['acme', 'child', 'scripted:child-1', '1', '30', '3', '0', '0', '$36.0000'],
      ['acme', 'parent', 'scripted:parent-1', '1', '300', '30', '0', '0', '$360.0000'],
      ['globex', 'plain', 'scripted:plain-1', '1', '7', '3', '0', '0', '$13.0000'],
      ['TOTAL', '3', '337', '36', '0', '0', '$409.0000'],
    ]);
    // Aligned: every line's COST column starts at the same place.
    const at = lines[1]!.indexOf('COST');
    expect(lines.slice(2, 5).every((l) => l.indexOf('$') === at)).toBe(true);
  });

  it('--json and --csv, by day, filtered by tenant', async () => {
    const j = await keel(['usage', '--db', db, '--tenant', 'acme', '--json']);
    expect(JSON.parse(j.out)).toMatchObject({
      group_by: ['day'],
      data: [{ day: today, runs: 2, input_tokens: 330, cost: 396 }],
      totals: { runs: 2 },
    });
    const c = await keel(['usage', '--db', db, '--by', 'model', '--from', today, '--to', today, '--csv']);
    expect(c.out).toBe(
      'model,runs,input_tokens,output_tokens,cached_input_tokens,reasoning_tokens,cost\r\n' +
        'scripted:child-1,1,30,3,0,0,36\r\n' +
        'scripted:parent-1,1,300,30,0,0,360\r\n' +
        'scripted:plain-1,1,7,3,0,0,13\r\n',
    );
  });

  it('bad options are usage errors naming the option', async () => {
    const r = await keel(['usage', '--db', db, '--from', '2025-02-30', '--by', 'day,hour']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--from: .*not a date of the calendar.*--by: day and hour exclude each other/);
    expect((await keel(['usage', '--db', db, '--csv', '--json'])).code).toBe(2);
  });
});
