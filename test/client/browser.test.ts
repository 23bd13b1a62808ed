/**
 * `keel/client` in a real browser (Debian's chromium, driven by playwright-core): src/client is
 * bundled for the browser by vite, loaded into a page of the server's origin, and drives a run:
 * a session, a message, `follow()` to the run's end, and a refusal as a `KeelProblem`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { build, type Rolldown } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as KeelClientModule from '../../src/client/index.ts';
import { startTestServer, type TestServer } from '../support/server-helpers.ts';

const ROOT = join(import.meta.dirname, '../..');
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';

let srv: TestServer;
let browser: Browser;
let bundle: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no chromium at ${CHROMIUM}: apt-get install -y chromium (or set KEEL_CHROMIUM to another Chromium)`,
    );
  // The client as a browser script, as a web app's bundler makes it: `KeelClient` is its module.
  const out = (await build({
    configFile: false,
    logLevel: 'warn',
    root: ROOT,
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      lib: { entry: join(ROOT, 'src/client/index.ts'), formats: ['iife'], name: 'KeelClient' },
    },
  })) as Rolldown.RolldownOutput[];
  bundle = out[0]!.output[0].code;
  srv = await startTestServer({ keys: [{ tenant: 'acme' }] });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await srv?.close();
});

describe('keel/client in a browser', () => {
  it('creates a session, sends a message, follows the run to its end, and throws problems', async () => {
    const page = await browser.newPage();
    await page.goto(`${srv.url}/healthz`);
    await page.addScriptTag({ content: bundle });
    const result = await page.evaluate(async (apiKey) => {
      const { createKeelClient, KeelProblem } = (globalThis as unknown as { KeelClient: typeof KeelClientModule })
        .KeelClient;
      const keel = createKeelClient({ baseUrl: location.origin, apiKey });
      const session = await keel.sessions.create({ title: 'from a browser' });
      const { run } = await keel.sessions.send(session.id, 'hello from chromium');
      const kinds: string[] = [];
      let answer = '';
      for await (const item of keel.runs.follow(run.id)) {
        kinds.push(item.kind);
        if (item.kind === 'event' && item.event.type === 'assistant/message') answer = JSON.stringify(item.event.data);
      }
      const status = (await keel.runs.get(run.id)).status;
      const problem = await keel.runs.get('run_nope').catch((e: unknown) => e);
      return {
        kinds,
        answer,
        status,
        problem: problem instanceof KeelProblem ? { type: problem.type, status: problem.status } : String(problem),
      };
    }, srv.secrets[0]!);
    expect(result.status).toBe('completed');
    expect(result.answer).toContain('echo: hello from chromium');
    expect(result.kinds.at(-1)).toBe('end');
    expect(result.kinds).toContain('event');
    expect(result.problem).toEqual({ type: 'not_found', status: 404 });
    await page.close();
  }, 60_000);
});
