/**
 * `keel worker --metrics-port`: a worker without the HTTP API serves its own Prometheus metrics,
 * and logs its runs as JSON lines on stderr.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { Io } from '../../src/cli/args.ts';
import { main } from '../../src/cli/main.ts';
import { createRuntime, openSqliteStore } from '../../src/index.ts';
import { demoAgent } from '../../src/config/demo.ts';
import { keel, sink, until } from './io.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('serves /metrics on its own port (behind the metrics token), counts the runs it executes, and logs them on stderr', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'keel-worker-metrics-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const db = join(dir, 'keel.db');
  // A run waits in the queue before the worker starts.
  const store = openSqliteStore({ path: db });
  const rt = createRuntime({ store, agents: [demoAgent()] });
  const s = await rt.sessions.create();
  const sent = await rt.sessions.send(s.id, 'hello there');
  await rt.close();
  await store.close();

  const out = sink();
  const err = sink();
  const stop = new AbortController();
  const io: Io = { out, err, env: { KEEL_METRICS_TOKEN: 'scrape-me' }, signal: stop.signal };
  const done = main(['worker', '--db', db, '--metrics-port', '0', '--concurrency', '1'], io);
  cleanups.push(async () => {
    stop.abort();
    await done;
  });
  await until(() => /metrics at (\S+)/.test(out.text()), 'the worker banner');
  const url = /metrics at (\S+)/.exec(out.text())![1]!;
  expect((await fetch(url)).status).toBe(401);
  expect(
    (await fetch(url.replace('/metrics', '/other'), { headers: { authorization: 'Bearer scrape-me' } })).status,
  ).toBe(404);
  await until(
    () => err.text().includes(sent.run.id) && /"run (completed|waits for an approval)"/.test(err.text()),
    'the run executed and logged',
  );
  const r = await fetch(url, { headers: { authorization: 'Bearer scrape-me' } });
  expect(r.status).toBe(200);
  const text = await r.text();
  expect(text).toMatch(/^keel_run_claims_total\{kind="start"\} 1$/m);
  expect(text).toMatch(/^keel_store_commit_seconds_count \d+$/m);
  const line = err
    .text()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === 'run started');
  expect(line).toMatchObject({ run_id: sent.run.id, session_id: s.id, level: 30 });
});

it('refuses a bad --log-level and a bad --metrics-port with a clear error', async () => {
  const bad = await keel(['worker', '--log-level', 'loud']);
  expect(bad.code).not.toBe(0);
  expect(bad.err).toMatch(/--log-level must be one of fatal, error, warn, info, debug, trace, silent, not "loud"/);
  const port = await keel(['worker', '--metrics-port', 'x']);
  expect(port.code).not.toBe(0);
  expect(port.err).toMatch(/--metrics-port must be 0-65535/);
});
