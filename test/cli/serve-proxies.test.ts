/**
 * `keel serve --trusted-proxies` (or KEEL_TRUSTED_PROXIES): behind a trusted proxy, the client of
 * a request is the address X-Forwarded-For names, for the limits kept per client address.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { keel, keelLive, until } from './io.ts';

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it('limits each client behind the trusted proxy on its own; from anyone else X-Forwarded-For is ignored', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'keel-serve-proxies-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const server = keelLive(
    ['serve', '--port', '0', '--workers', '0', '--db', join(dir, 'keel.db'), '--trusted-proxies', '127.0.0.1'],
    { env: { KEEL_LOG_LEVEL: 'silent' } },
  );
  cleanups.push(() => server.stop());
  await until(() => /listening on (\S+)/.test(server.out()), 'the serve banner');
  const base = /listening on (\S+)/.exec(server.out())![1]!;
  // Unknown callback tokens count as failed authentications of the client: 30 a minute.
  const callback = (client: string) =>
    fetch(`${base}/v1/callbacks/${'x'.repeat(43)}`, { method: 'POST', headers: { 'x-forwarded-for': client } });
  for (let i = 0; i < 30; i++) expect((await callback('203.0.113.1')).status).toBe(404);
  expect((await callback('203.0.113.1')).status).toBe(429);
  expect((await callback('203.0.113.2')).status).toBe(404);
});

it('refuses a --trusted-proxies list with an empty entry', async () => {
  const r = await keel(['serve', '--port', '0', '--trusted-proxies', '127.0.0.1,,10.0.0.1']);
  expect(r.code).not.toBe(0);
  expect(r.err).toMatch(/--trusted-proxies/);
});
