/**
 * Cancel and pause requested in one process reach the worker running the run in another within a
 * second (not at its next lease renewal, 10 s later): the worker reads its runs' requests from the
 * store twice a second. On a shared SQLite file, and on PostgreSQL (another node).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { allEvents, ofType } from '../support/session-helpers.ts';
import type { RemoteWorkerMessage } from './fixtures/remote-worker.ts';

const FIXTURE = join(import.meta.dirname, 'fixtures', 'remote-worker.ts');

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Remote {
  api: Runtime;
  /** Resolves when the worker process reports `m` (now or before), with when it arrived. */
  next(m: RemoteWorkerMessage): Promise<number>;
}

/** The API side's store (no worker here), opened first so that the schema exists; and the worker's arguments. */
async function apiStore(
  backend: 'sqlite' | 'postgres',
): Promise<{ store: Store; args: string[]; cleanup(): Promise<void> }> {
  if (backend === 'postgres') {
    const db = await openTestPostgres();
    return { store: db.store, args: [db.url, db.schema], cleanup: db.cleanup };
  }
  const dir = mkdtempSync(join(tmpdir(), 'keel-remote-'));
  const path = join(dir, 'keel.db');
  const store = openSqliteStore({ path });
  return {
    store,
    args: [path],
    cleanup: async () => (await store.close(), rmSync(dir, { recursive: true, force: true })),
  };
}

async function remoteWorker(backend: 'sqlite' | 'postgres'): Promise<Remote> {
  const { store, args, cleanup } = await apiStore(backend);
  const api = createRuntime({
    store,
    agents: [defineAgent({ name: 'a', model: new ScriptedModel([]) })],
    leaseMs: 30_000,
  });
  const child: ChildProcess = spawn(process.execPath, [FIXTURE, ...args], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const seen = new Map<string, number>();
  const waiters: Array<{ m: string; resolve: (at: number) => void }> = [];
  child.on('message', (m: RemoteWorkerMessage) => {
    if (!seen.has(m)) seen.set(m, Date.now());
    for (const w of waiters.filter((x) => x.m === m)) w.resolve(seen.get(m)!);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  cleanups.push(async () => {
    child.send('stop');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
    await api.close({ graceMs: 50 });
    await cleanup();
  });
  const next = (m: RemoteWorkerMessage) =>
    new Promise<number>((resolve, reject) => {
      if (seen.has(m)) return resolve(seen.get(m)!);
      const timer = setTimeout(() => reject(new Error(`the worker process did not report ${m}`)), 15_000);
      waiters.push({ m, resolve: (at) => (clearTimeout(timer), resolve(at)) });
    });
  await next('ready');
  return { api, next };
}

describe.each(['sqlite', 'postgres'] as const)('cancel and pause from another process (%s)', (backend) => {
  it('a cancel reaches the worker within a second: it aborts its own tool and ends the run', async () => {
    const { api, next } = await remoteWorker(backend);
    const s = await api.sessions.create();
    const { run } = await api.sessions.send(s.id, 'go', { agent: 'a' });
    await next('tool-start');
    const t0 = Date.now();
    // A grace shorter than the tool: only the worker holding the run can end it in time.
    const ended = await api.runs.cancel(run.id, { graceMs: 1500 });
    expect(ended.status).toBe('cancelled');
    expect((await next('tool-aborted')) - t0).toBeLessThan(1000);
    // Ended by its worker: the tool's call has a cancelled result and the turn ended cancelled.
    const events = await allEvents(api.sessions, s.id);
    expect(ofType(events, 'tool/result').map((e) => e.data.output)).toEqual([
      expect.objectContaining({ type: 'error', code: 'cancelled' }),
    ]);
    expect(ofType(events, 'turn/end').map((e) => e.data.reason)).toEqual(['cancelled']);
  });

  it('a pause reaches the worker within a second: the run pauses at the end of the step it is in', async () => {
    const { api, next } = await remoteWorker(backend);
    const s = await api.sessions.create();
    const { run } = await api.sessions.send(s.id, 'go', { agent: 'a' });
    await next('tool-start');
    await api.runs.pause(run.id);
    // The tool finishes its 2 s; the step ends and the run pauses, without a second step.
    const paused = await api.runs.wait(run.id, { until: 'settled', timeoutMs: 4000 });
    expect(paused.status).toBe('paused');
    const events = await allEvents(api.sessions, s.id);
    expect(ofType(events, 'step/start')).toHaveLength(1);
  });
});
