/**
 * An experiment survives SIGKILL (issue 40): 50 dataset items × 2 candidates by step replay, a
 * worker process killed while items run, a new one started: the experiment completes, every item
 * is done once with its scores, and an item was scored again only if its process died while it
 * ran it (it was claimed a second time); none is counted twice.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { SqliteStore } from '../../src/index.ts';
import { travelRuntime } from '../support/travel-agents.ts';

const FIXTURE = fileURLToPath(new URL('./fixtures/eval-worker.ts', import.meta.url));
const ITEMS = 50;
let dir: string | undefined;

afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function worker(db: string, ledger: string, experiment: string) {
  const child = spawn(process.execPath, [FIXTURE, db, ledger, experiment], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, stderr: () => stderr };
}

it('an experiment killed with SIGKILL halfway resumes and completes, each item done and scored once', async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-eval-crash-'));
  const db = join(dir, 'keel.db');
  const ledger = join(dir, 'ledger');
  // Record the runs, then make the dataset and the experiment with no worker of this process.
  const store = new SqliteStore({ path: db });
  const recording = travelRuntime(store);
  const session = await recording.rt.sessions.create();
  const runs: string[] = [];
  for (let i = 0; i < ITEMS; i++) {
    const { run } = await recording.rt.sessions.send(session.id, `book city${i}`, { agent: 'travel@1' });
    await recording.rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    runs.push(run.id);
  }
  await recording.rt.close({ graceMs: 0 });
  const { rt } = travelRuntime(store, { scorers: { ledger: () => 1 } }, { worker: false });
  const dataset = await rt.evals.datasets.create({ name: 'crash', runs });
  const experiment = await rt.evals.experiments.create({
    dataset: dataset.id,
    candidates: ['travel@1', 'travel@2'],
    scorers: ['tool_calls', 'final_text', 'ledger'],
    concurrency: 8,
  });

  const first = worker(db, ledger, experiment.id);
  // Killed once some items are done and others run.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const c = await rt.evals.counts(experiment);
    if (c.done >= 30 && c.running > 0) break;
    if (Date.now() > deadline) throw new Error(`no progress: ${JSON.stringify(c)} ${first.stderr()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  first.child.kill('SIGKILL');
  expect((await first.exited).signal).toBe('SIGKILL');
  const atKill = await rt.evals.counts(experiment);
  expect(atKill.done).toBeLessThan(2 * ITEMS);

  const second = worker(db, ledger, experiment.id);
  const end = await second.exited;
  expect(end.code, second.stderr()).toBe(0);

  const results = await rt.evals.experiments.results(experiment.id);
  expect(results.status).toBe('completed');
  expect(results.counts).toEqual({ pending: 0, running: 0, done: 2 * ITEMS, failed: 0 });
  const items = await rt.evals.experiments.items(experiment.id, { limit: 1000 });
  expect(items).toHaveLength(2 * ITEMS);
  for (const i of items) {
    expect(i.status).toBe('done');
    expect(i.scores).toMatchObject({ tool_calls: expect.any(Number), final_text: expect.any(Number), ledger: 1 });
  }
  // Scored by the ledger scorer: every item at least once; more only if it was claimed again.
  expect(existsSync(ledger)).toBe(true);
  const lines = readFileSync(ledger, 'utf8').trim().split('\n');
  const byItem = new Map<string, number>();
  for (const l of lines) byItem.set(l.split(' ')[0]!, (byItem.get(l.split(' ')[0]!) ?? 0) + 1);
  const datasetItems = new Set((await rt.evals.datasets.items(dataset.id, { limit: 1000 })).map((i) => i.id));
  expect([...byItem.keys()].every((k) => datasetItems.has(k))).toBe(true);
  for (const i of items) expect(i.attempt).toBeGreaterThanOrEqual(1);
  const reclaimed = items.filter((i) => i.attempt > 1);
  expect(reclaimed.length).toBeGreaterThan(0);
  expect(reclaimed.length).toBeLessThanOrEqual(atKill.running);
  // Each experiment item scores twice (its candidate, and the recorded baseline against itself):
  // 2 × 2 × ITEMS lines, plus at most one more pair per item claimed again after the kill.
  expect(lines.length).toBeGreaterThanOrEqual(4 * ITEMS);
  expect(lines.length).toBeLessThanOrEqual(4 * ITEMS + 2 * reclaimed.length);
  // The aggregate counts each item once.
  expect(results.candidates.map((c) => [c.label, c.done])).toEqual([
    ['travel@1', ITEMS],
    ['travel@2', ITEMS],
  ]);
  expect(results.candidates[0]!.scores.score).toBe(1);
  await rt.close({ graceMs: 0 });
  await store.close();
}, 120_000);
