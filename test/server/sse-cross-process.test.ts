/**
 * `keel serve --workers 0` and a `keel worker` elsewhere: the API process streams what the worker
 * process writes. Its session log notices other processes' commits (SQLite's data_version, read
 * every 50 ms while something is followed) and publishes them, so a run's SSE stream goes on past
 * `queued` and ends with `end`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defineAgent, ScriptedModel } from '../../src/index.ts';
import { api, startTestServer, type RunJson, type TestServer } from '../support/sse-helpers.ts';

const WORKER = join(import.meta.dirname, '..', 'runs', 'fixtures', 'remote-worker.ts');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('an API process without workers streams what a worker process writes', () => {
  it('GET /v1/runs/{id}/stream follows the run through another process\'s steps and ends with `end`', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-xproc-'));
    const path = join(dir, 'keel.db');
    // The API: no worker. Its agent `a` has the worker's name (it only sends to it).
    const srv: TestServer = await startTestServer({ agents: [defineAgent({ name: 'a', model: new ScriptedModel([]) })], path, workers: 0 });
    const child: ChildProcess = spawn(process.execPath, [WORKER, path], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    cleanups.push(async () => {
      child.send('stop');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
      await srv.close(0);
      rmSync(dir, { recursive: true, force: true });
    });
    await new Promise<void>((resolve) => child.once('message', () => resolve()));

    const s = await api<{ id: string }>(srv.url, '/v1/sessions', { body: {} });
    const sent = await api<{ run: RunJson }>(srv.url, `/v1/sessions/${s.id}/messages`, { body: { content: 'go', agent: 'a' } });
    const res = await fetch(`${srv.url}/v1/runs/${sent.run.id}/stream`, { signal: AbortSignal.timeout(20_000) });
    expect(res.status).toBe(200);
    const text = await res.text();
    const types = [...text.matchAll(/"type":"([a-z_/-]+)"/g)].map((m) => m[1]);
    // Everything the worker process wrote, in order, then the end.
    expect(types).toContain('turn/start');
    expect(types.filter((t) => t === 'tool/result')).toHaveLength(2);
    expect(text).toMatch(/"to":"completed"/);
    expect(text).toMatch(/event: end\n/);
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
  }, 40_000);
});
