/**
 * `keel rerun` on a database holding a finished demo run (no configuration: the demo agent's two
 * versions): rerun from step 2 on demo@2 with --wait runs to the end here, reusing the approved
 * report and the answered question (no person asked again), and `keel compare` shows the new
 * answer beside the reused calls. Bad input exits with a message.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoAgent } from '../../src/config/demo.ts';
import { createRuntime } from '../../src/runs/index.ts';
import { openSqliteStore } from '../../src/store/sqlite/index.ts';
import { keel } from './io.ts';

let dir: string;
let db: string;
let source: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-rerun-'));
  db = join(dir, 'keel.db');
  const store = openSqliteStore({ path: db });
  const rt = createRuntime({ store, agents: [demoAgent('1'), demoAgent('2')] });
  rt.startWorker({ concurrency: 1, pollMs: 20 });
  const s = await rt.sessions.create({ title: 'weather' });
  const { run } = await rt.sessions.send(s.id, 'weather in tokyo?');
  source = run.id;
  let r = await rt.runs.wait(run.id, { timeoutMs: 20_000 });
  expect(r.status).toBe('waiting_approval');
  await rt.runs.approve(run.id, (r.waiting as { calls: Array<{ toolCallId: string }> }).calls[0]!.toolCallId);
  r = await rt.runs.wait(run.id, { timeoutMs: 20_000 });
  expect(r.status).toBe('waiting_for_user');
  await rt.runs.input(run.id, { units: 'celsius' });
  expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
  await rt.close({ graceMs: 0 });
  await store.close();
}, 60_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('keel rerun', () => {
  it('reruns from step 2 on version 2 here (--wait), reusing the approved call and the answer; compare shows the change', async () => {
    const r = await keel(['rerun', source, '--from', '2', '--agent', 'demo@2', '--wait', '--db', db]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const m = /^rerun (\S+) of run (\S+) from step 2 on demo@2 \(session (\S+)\): completed$/m.exec(r.out);
    expect(m?.[2]).toBe(source);
    expect(r.out).toContain(`keel compare ${source} ${m![1]}`);

    const cmp = JSON.parse((await keel(['compare', source, m![1]!, '--db', db, '--json'])).out);
    expect(cmp.finalAnswer).toMatchObject({
      a: 'It is 24°C in tokyo. The report was sent. Anything else?',
      b: 'Tokyo: 24°C. Report sent to the team.',
      equal: false,
    });
    const calls = cmp.steps.flatMap((s: { toolCalls: Array<{ b: { name: string; source: string } | null }> }) =>
      s.toolCalls.flatMap((c) => (c.b ? [[c.b.name, c.b.source]] : [])),
    );
    expect(calls).toEqual([
      ['send_report', 'reused'],
      ['ask_user', 'reused'],
    ]);
    const text = await keel(['compare', source, m![1]!, '--db', db]);
    expect(text.code).toBe(0);
    expect(text.out).toContain('reused');
  });

  it('--json prints the new run; without --wait it is queued for a worker', async () => {
    const r = await keel(['rerun', source, '--json', '--db', db]);
    expect(r.code).toBe(0);
    const run = JSON.parse(r.out);
    expect(run).toMatchObject({ status: 'queued', rerun_of: source, rerun: { of: { run_id: source, step: 1 } } });
  });

  it('refuses bad input with a message', async () => {
    const late = await keel(['rerun', source, '--from', '9', '--db', db]);
    expect(late.code).not.toBe(0);
    expect(late.err).toContain('recorded steps 1 to 4; from 9 is not one of them');
    const tools = await keel(['rerun', source, '--tools', 'sometimes', '--db', db]);
    expect(tools.code).toBe(2);
    expect(tools.err).toContain('--tools is reuse or execute');
    const missing = await keel(['rerun', 'nope', '--db', db]);
    expect(missing.code).not.toBe(0);
    expect(missing.err).toContain('nope');
    expect((await keel(['rerun', '--db', db])).code).toBe(2);
  });
});

describe('keel datasets and keel eval', () => {
  it('a dataset of the demo runs; the gate passes for the recording version and fails for version 2', async () => {
    const created = await keel([
      'datasets',
      'create',
      'demo-runs',
      '--agent',
      'demo@1',
      '--status',
      'completed',
      '--db',
      db,
    ]);
    expect(created.err).toBe('');
    expect(created.out).toMatch(/^dataset \S+ "demo-runs": 1 item$/m);
    const shown = await keel(['datasets', 'show', 'demo-runs', '--db', db]);
    expect(shown.out).toContain(source);
    expect(shown.out).toContain('It is 24°C in tokyo');

    const same = await keel([
      'eval',
      'demo-runs',
      '--candidate',
      'demo@1',
      '--min',
      '0.99',
      '--max-regressions',
      '0',
      '--db',
      db,
    ]);
    expect(same.err).toBe('');
    expect(same.out).toContain('gate: passed');
    expect(same.out).toMatch(/^demo@1\s+1\/1\s+1\.000/m);
    expect(same.code).toBe(0);

    const worse = await keel(['eval', 'demo-runs', '--candidate', 'demo@2', '--min', '0.99', '--db', db]);
    expect(worse.code).toBe(1);
    expect(worse.out).toContain('gate: FAILED');
    expect(worse.out).toContain('demo@2: 1 item worse than the baseline');
    expect(worse.out).toContain(source);

    const j = JSON.parse((await keel(['eval', 'demo-runs', '--candidate', 'demo@2', '--json', '--db', db])).out);
    expect(j.gate).toEqual({ passed: true, failures: [] });
    expect(j.candidates[0].scores.final_text).toBeLessThan(1);

    expect((await keel(['eval', 'demo-runs', '--db', db])).code).toBe(2);
    expect((await keel(['eval', 'demo-runs', '--candidate', 'demo@1', '--min', '2', '--db', db])).code).toBe(2);
    const missing = await keel(['eval', 'nope', '--candidate', 'demo@1', '--db', db]);
    expect(missing.code).not.toBe(0);
    expect(missing.err).toContain('no dataset nope');
  });
});
