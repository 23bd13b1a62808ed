import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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

describe('keel usage --tenant with quotas', () => {
  it("prints the tenant's quotas (keel.config's) against what its calls used today, and has them in --json", async () => {
    writeFileSync(join(dir, 'script.json'), JSON.stringify([{ text: 'hi' }]));
    const config = join(dir, 'keel.config.json');
    writeFileSync(
      config,
      JSON.stringify({
        agents: [{ name: 'a', model: 'scripted:script.json' }],
        quotas: { default: { tokensPerDay: 1000, costPerMonth: 5 } },
      }),
    );
    // A call of acme's, reserved then settled (as a run's step does), and one still in flight.
    const now = Date.now();
    const day = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate());
    const month = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1);
    const charge = (callId: string) =>
      store.quotas.reserve({
        callId,
        runId: 'r1',
        scopes: [{ scope: 'tenant:acme', budget: { tokensPerDay: 1000 } }],
        tokens: 200,
        cost: 0.5,
        day,
        month,
        now,
      });
    expect(await charge('r1:0:1')).toEqual({ granted: true });
    await store.quotas.settle('r1:0:1', 150, 0.25);
    expect(await charge('r1:0:2')).toEqual({ granted: true });
    const r = await keel(['usage', '--db', db, '--tenant', 'acme', '--config', config]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('quotas of tenant:acme (at a limit: wait)');
    expect(r.out).toMatch(/tokens per day\s+1000\s+150\s+200\s+\d{4}-\d{2}-\d{2}T00:00:00\.000Z/);
    expect(r.out).toMatch(/cost per month\s+\$5\.0000\s+\$0\.2500\s+\$0\.5000/);
    const j = await keel(['usage', '--db', db, '--tenant', 'acme', '--config', config, '--json']);
    expect(JSON.parse(j.out).quota).toMatchObject({
      tenant: { scope: 'tenant:acme', tokens_per_day: { limit: 1000, used: 150, reserved: 200 } },
      key: null,
    });
    // A tenant's own quotas in the registry (keel tenants set) override the configuration's default.
    expect(
      (await keel(['tenants', 'set', 'acme', '--db', db, '--quota', 'tokensPerDay=700', '--on-limit', 'fail'])).code,
    ).toBe(0);
    const own = await keel(['usage', '--db', db, '--tenant', 'acme', '--config', config, '--json']);
    expect(JSON.parse(own.out).quota.tenant).toMatchObject({
      on_limit: 'fail',
      tokens_per_day: { limit: 700, used: 150, reserved: 200 },
      cost_per_month: { limit: 5 },
    });
    // A bad quota in the configuration is refused, naming it.
    writeFileSync(
      config,
      JSON.stringify({
        agents: [{ name: 'a', model: 'scripted:script.json' }],
        quotas: { default: { tokensPerDya: 5 } },
      }),
    );
    const bad = await keel(['usage', '--db', db, '--tenant', 'acme', '--config', config]);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toContain('tokensPerDya');
  });
});
