/**
 * A worker process killed (SIGKILL) while its run's model call is in flight, its quota reserved:
 * the run recovered by another worker reserves the same call again, which replaces the first
 * reservation, and the tenant is charged once, at the call's actual usage (ADR-0043). Both backends.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, defineAgent, openSqliteStore, ScriptedModel, type Store } from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';

const FIXTURE = join(import.meta.dirname, 'fixtures', 'quota-worker.ts');
const PER_CALL = 51;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function backendStore(backend: 'sqlite' | 'postgres'): Promise<{ store: Store; args: string[] }> {
  if (backend === 'postgres') {
    const db = await openTestPostgres();
    cleanups.push(db.cleanup);
    return { store: db.store, args: [db.url, db.schema] };
  }
  const dir = mkdtempSync(join(tmpdir(), 'keel-quota-kill-'));
  const path = join(dir, 'keel.db');
  const store = openSqliteStore({ path });
  cleanups.push(async () => (await store.close(), rmSync(dir, { recursive: true, force: true })));
  return { store, args: [path] };
}

const today = () => {
  const d = new Date();
  return {
    day: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()),
    month: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1),
  };
};

describe.each(['sqlite', 'postgres'] as const)('a worker killed mid-call (%s)', (backend) => {
  it('is charged once: the recovered run replaces its reservation, then settles it', async () => {
    const { store, args } = await backendStore(backend);
    const child = spawn(process.execPath, [FIXTURE, ...args], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    cleanups.push(async () => {
      child.kill('SIGKILL');
      await exited;
    });
    const heard = (m: string) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the worker did not report ${m}`)), 15_000);
        child.on('message', (x) => x === m && (clearTimeout(timer), resolve()));
      });
    await heard('ready');
    // The API side: no worker yet (the child takes the run).
    const rt = createRuntime({
      store,
      agents: [
        defineAgent({
          name: 'a',
          model: new ScriptedModel([{ text: 'done', usage: { input: 1, output: 50 } }], { loop: true }),
          settings: { maxOutputTokens: 50 },
        }),
      ],
      quotas: { default: { tokensPerDay: 10 * PER_CALL } },
    });
    cleanups.push(() => rt.close({ graceMs: 100 }));
    const s = await rt.sessions.create({ tenant: 'acme' });
    const calling = heard('model-call');
    const { run } = await rt.sessions.send(s.id, 'go');
    await calling;
    const { day, month } = today();
    expect((await store.quotas.usage('tenant:acme', day, month)).tokensDay).toEqual({ used: 0, reserved: PER_CALL });
    child.kill('SIGKILL');
    await exited;
    // This process's worker recovers the run once its lease (1 s) has run out.
    rt.startWorker({ pollMs: 20 });
    const ended = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 15_000 });
    expect(ended.status).toBe('completed');
    expect(ended.attempt).toBeGreaterThanOrEqual(2);
    expect((await store.quotas.usage('tenant:acme', day, month)).tokensDay).toEqual({ used: PER_CALL, reserved: 0 });
  }, 30_000);
});
