/**
 * The command line on PostgreSQL: `--db postgres://…` (or KEEL_DB) selects it for `keel serve`,
 * `keel worker` and the commands that read the database; KEEL_DB_SCHEMA names the schema. An API
 * process and a worker process (here: two commands in this process, each with its own store) share
 * nothing but the database.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { Io } from '../../src/cli/args.ts';
import { main } from '../../src/cli/main.ts';
import { dropSchema, freshSchema, postgresUrl } from '../support/postgres.ts';
import { keel, sink, until } from './io.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Starts a long-running command (serve, worker); stopped (aborted) at cleanup. */
function start(
  argv: string[],
  env: NodeJS.ProcessEnv,
): { out: ReturnType<typeof sink>; err: ReturnType<typeof sink>; done: Promise<number> } {
  const out = sink();
  const err = sink();
  const stop = new AbortController();
  const io: Io = { out, err, env, signal: stop.signal };
  const done = main(argv, io);
  cleanups.push(async () => {
    stop.abort();
    await done;
  });
  return { out, err, done };
}

it('keel serve --workers 0 and keel worker on one PostgreSQL database: the API accepts, the worker executes, keel sessions reads', async () => {
  // With a password (the machine's server trusts local connections and ignores one): never printed.
  const parsed = new URL(postgresUrl());
  if (!parsed.password) parsed.password = 's3cret-not-printed';
  const password = parsed.password;
  const url = parsed.toString();
  const schema = freshSchema();
  cleanups.push(() => dropSchema(postgresUrl(), schema));
  // No keel.config here: the demo agent (its first step runs a tool, then it asks for an approval).
  const dir = mkdtempSync(join(tmpdir(), 'keel-cli-pg-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const before = process.cwd();
  process.chdir(dir);
  cleanups.push(() => process.chdir(before));
  const env = { KEEL_DB_SCHEMA: schema };

  const api = start(['serve', '--port', '0', '--workers', '0', '--db', url], env);
  await until(() => /listening on/.test(api.out.text()) || api.err.text() !== '', 'the serve banner');
  expect(api.err.text()).toBe('');
  const banner = api.out.text();
  expect(banner).toContain(`(schema ${schema})`);
  expect(banner).toContain('no worker');
  // The password in the URL is never printed.
  expect(banner).not.toContain(`:${password}@`);
  expect(banner).toContain(':***@');
  const base = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(banner)![1]!;

  const session = (await (
    await fetch(`${base}/v1/sessions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  ).json()) as { id: string };
  const sent = (await (
    await fetch(`${base}/v1/sessions/${session.id}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ content: 'weather in Paris?' }),
    })
  ).json()) as { run: { id: string } };
  const status = async () =>
    ((await (await fetch(`${base}/v1/runs/${sent.run.id}`)).json()) as { status: string }).status;
  expect(await status()).toBe('queued');

  // The worker, started through KEEL_DB, takes the run over.
  const worker = start(['worker'], { ...env, KEEL_DB: url });
  await until(() => /keel worker/.test(worker.out.text()) || worker.err.text() !== '', 'the worker banner');
  expect(worker.out.text()).toContain(`(schema ${schema})`);
  expect(worker.out.text()).not.toContain(`:${password}@`);
  let s = await status();
  for (let i = 0; i < 200 && s !== 'waiting_approval'; i++) {
    await new Promise((r) => setTimeout(r, 50));
    s = await status();
  }
  expect(s).toBe('waiting_approval');

  const listed = await keel(['sessions', 'ls', '--json'], { env: { ...env, KEEL_DB: url } });
  expect(listed.code).toBe(0);
  expect(listed.out).toContain(session.id);
});

it('an unreachable PostgreSQL is a clear error, not a hang', async () => {
  const r = await keel(['sessions', 'ls', '--db', 'postgres://nobody@127.0.0.1:1/none']);
  expect(r.code).not.toBe(0);
  expect(r.err).toMatch(/ECONNREFUSED|connect/);
});
