/**
 * The inspector in a real browser (Debian's chromium, driven by playwright-core): a Keel server
 * with the demo agent and an API key, the inspector at /inspect. The test enters the key, starts a
 * session from the UI, watches its run arrive live, approves send_report and answers the question
 * in the Inbox, and reads the finished run's timeline (then a refused message's problem, compaction
 * and the export); a run's MCP tools (an agent with a real
 * MCP server, test/mcp/fixtures/, and one that is down); and a rerun on the demo's version 2 made
 * from the run page, its lineage both ways and its comparison with the source run, step by step;
 * an experiment (step replay on demo@1 and demo@2) on a dataset of two demo runs, started from the
 * Experiments page: its results, regressions, one item's recorded decisions beside each
 * candidate's, and a rating.
 * Screenshots go to test-results/inspector/;
 * with KEEL_UPDATE_SCREENSHOT=1 the run timeline also goes to docs/inspector.png (the README's picture).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoAgent } from '../../src/config/index.ts';
import { defineAgent, ScriptedModel } from '../../src/index.ts';
import { createApiKey } from '../../src/server/auth.ts';
import { startServer, type RunningServer } from '../../src/server/serve.ts';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/index.ts';
import { fixtureLog, stdioServer } from '../mcp/helpers.ts';

const ROOT = join(import.meta.dirname, '../..');
const SHOTS = join(ROOT, 'test-results/inspector');
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';
/** Generous: the CI machine is a slow shared 2-core box. */
const WAIT = 20_000;

let dir: string;
let store: SqliteStore;
let server: RunningServer;
let secret: string;
let browser: Browser;
let mcpLog: ReturnType<typeof fixtureLog>;

beforeAll(async () => {
  // `npm ci` builds the inspector (prepare → build); a checkout that was never built builds it here.
  if (!existsSync(join(ROOT, 'dist/inspector/index.html'))) {
    execFileSync(
      process.execPath,
      [join(ROOT, 'node_modules/vite/bin/vite.js'), 'build', '--config', 'inspector/vite.config.ts'],
      { cwd: ROOT, stdio: 'inherit' },
    );
  }
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no chromium at ${CHROMIUM}: apt-get install -y chromium (or set KEEL_CHROMIUM to another Chromium)`,
    );
  mkdirSync(SHOTS, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), 'keel-inspector-'));
  store = openSqliteStore({ path: join(dir, 'keel.db') });
  ({ secret } = await createApiKey(store, { tenant: 'acme' }));
  mcpLog = fixtureLog();
  // An agent with an MCP server (the stdio fixture) and one that is down (skipped); not the default agent.
  const mcpAgent = defineAgent({
    name: 'mcp-agent',
    model: new ScriptedModel([{ text: 'Nothing to do.' }], { loop: true }),
    mcpServers: [
      stdioServer('fx', mcpLog.path),
      { name: 'docs', stdio: { command: '/nonexistent/mcp-server' }, onUnavailable: 'skip' },
    ],
  });
  server = await startServer({
    store,
    config: { source: null, agents: [demoAgent('1'), demoAgent('2'), mcpAgent], compaction: {}, demo: true },
    port: 0,
    host: '127.0.0.1',
    workers: 2,
    version: '0.0.0-test',
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close({ graceMs: 200 });
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  mcpLog?.cleanup();
});

const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

/** The API as the test's own client (not the browser's). */
async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

interface RunJson {
  id: string;
  status: string;
  waiting: { requests: Array<{ approval_id: string; tool_call_id: string; kind: string }> } | null;
}

/** A demo run to its end through the API: send_report approved, the question answered (celsius). */
async function completedDemoRun(title: string): Promise<string> {
  const session = await api<{ id: string }>('POST', '/v1/sessions', { title });
  const sent = await api<{ run: { id: string } }>('POST', `/v1/sessions/${session.id}/messages`, {
    content: 'What is the weather in Tokyo?',
  });
  const id = sent.run.id;
  const run = () => api<RunJson>('GET', `/v1/runs/${id}`);
  await expect.poll(async () => (await run()).status, { timeout: WAIT }).toBe('waiting_approval');
  const approval = (await run()).waiting!.requests[0]!;
  await api('POST', `/v1/runs/${id}/approvals/${encodeURIComponent(approval.approval_id)}`, { decision: 'approve' });
  await expect.poll(async () => (await run()).status, { timeout: WAIT }).toBe('waiting_for_user');
  const question = (await run()).waiting!.requests[0]!;
  await api('POST', `/v1/runs/${id}/input`, { answers: { units: 'celsius' }, tool_call_id: question.tool_call_id });
  await expect.poll(async () => (await run()).status, { timeout: WAIT }).toBe('completed');
  return id;
}

/**
 * A TCP relay to the server for the browser, whose connections the test can drop: `down()` cuts
 * every open one (the streams among them) and refuses new ones until `up()`.
 */
async function relay(to: string): Promise<{ url: string; down: () => void; up: () => void; close: () => void }> {
  const target = new URL(to);
  const sockets = new Set<Socket>();
  let refusing = false;
  const srv = createServer((client) => {
    if (refusing) return void client.destroy();
    const upstream = connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as { port: number };
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    down: () => {
      refusing = true;
      cut();
    },
    up: () => {
      refusing = false;
    },
    close: () => {
      cut();
      srv.close();
    },
  };
}

describe('the inspector', () => {
  it('serves the app, its hashed assets with long caching, and index.html for its own pages', async () => {
    const index = await fetch(`${server.url}/inspect`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const html = await index.text();
    const asset = /src="(\/inspect\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset).toBeDefined();
    const js = await fetch(`${server.url}${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.headers.get('cache-control')).toContain('immutable');
    const page = await fetch(`${server.url}/inspect/runs/whatever`);
    expect(page.status).toBe(200);
    expect(await page.text()).toBe(html);
    expect((await fetch(`${server.url}/inspect/assets/missing-123.js`)).status).toBe(404);
    expect((await fetch(`${server.url}/inspect/..%2f..%2fpackage.json`)).status).toBe(404);
  });

  it('follows a run that needs an approval and an answer, from the first message to its timeline', async () => {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    // The browser reaches the server through a relay the test can cut (below, a dropped stream).
    const net = await relay(server.url);
    try {
      // The API answers 401: the inspector asks for a key, and again for a key the server refuses.
      await page.goto(`${net.url}/inspect`);
      await page.getByLabel('API key').fill('keel_wrong');
      await page.getByRole('button', { name: 'Use this key' }).click();
      await page.getByText('The server refused the key').waitFor();
      await page.getByLabel('API key').fill(secret);
      await shot(page, '01-key');
      await page.getByRole('button', { name: 'Use this key' }).click();
      await expect
        .poll(() => page.getByRole('heading', { name: 'Sessions' }).isVisible(), { timeout: WAIT })
        .toBe(true);

      // A session and its first message, from the UI: the session page opens, the run arrives live.
      await page.getByLabel('New session title').fill('Weather in Tokyo');
      await page.getByLabel('First message').fill('What is the weather in Tokyo?');
      await page.getByRole('button', { name: 'New session' }).click();
      await page.getByRole('heading', { name: 'Weather in Tokyo' }).waitFor();
      await page.getByTestId('transcript').getByText('Let me check the weather in Tokyo.').waitFor();
      await page.getByTestId('run-row').getByText('waiting for approval').waitFor();
      await page.getByTestId('event-log').getByText('request/header').first().waitFor();
      await page.getByTestId('branch-tree').getByText('What is the weather in Tokyo?').waitFor();
      await shot(page, '02-session');

      // The Inbox: approve send_report, then answer the question that follows.
      await page.getByRole('link', { name: 'Inbox' }).click();
      const approval = page.getByTestId('approval');
      await approval.getByText('send_report').waitFor();
      await expect(approval.textContent()).resolves.toContain('team@example.com');
      await shot(page, '03-inbox-approval');
      await approval.getByRole('button', { name: 'Approve' }).click();
      const question = page.getByTestId('question');
      await question.getByText('Celsius or Fahrenheit?').waitFor();
      await question.getByLabel('Celsius or Fahrenheit?').selectOption('fahrenheit');
      await shot(page, '04-inbox-question');
      await question.getByRole('button', { name: 'Answer' }).click();
      await page.getByText('Nothing is waiting for you.').waitFor();

      // The sessions list shows the run completed, with its cost; its badge opens the run.
      await page.getByRole('link', { name: 'Sessions' }).click();
      const row = page.getByTestId('session-row').filter({ hasText: 'Weather in Tokyo' });
      await row.getByText('completed').waitFor();
      await page.getByLabel('Search sessions').fill('tokyo');
      await row.waitFor();
      await shot(page, '05-sessions');
      await row.getByText('completed').click();

      // The run's timeline: every model call and tool call, the approval, the answer, the totals.
      await page.getByRole('heading', { name: /^Run / }).waitFor();
      await page.getByText('It is 75°F in tokyo. The report was sent. Anything else?').waitFor();
      const calls = page.getByTestId('model-call');
      await expect.poll(() => calls.count(), { timeout: WAIT }).toBe(4);
      expect(await calls.first().textContent()).toMatch(/demo-script.*attempt 1.*in \/ .*out/);
      const tools = page.getByTestId('tool-call');
      await expect.poll(() => tools.count(), { timeout: WAIT }).toBe(3);
      expect(await tools.nth(0).textContent()).toContain('get_weather');
      expect(await tools.nth(0).textContent()).toContain('"celsius":24');
      expect(await tools.nth(1).textContent()).toMatch(/send_report.*approved/);
      expect(await tools.nth(2).textContent()).toMatch(/ask_user.*fahrenheit/);
      expect(await page.getByTestId('lifecycle').filter({ hasText: '→ completed' }).count()).toBe(1);
      expect(await page.getByTestId('run-tokens').textContent()).toMatch(/^[\d,]+ in \/ [\d,]+ out/);
      await shot(page, '06-run');
      if (process.env.KEEL_UPDATE_SCREENSHOT === '1')
        await page.screenshot({ path: join(ROOT, 'docs/inspector.png'), fullPage: false });

      // Back to the session: the replay check's verdict.
      await page.getByRole('link', { name: /^session / }).click();
      await page.getByRole('button', { name: 'Replay check' }).click();
      await page
        .getByTestId('verdict')
        .getByText(/Replay check passed: the log explains all 4 model requests/)
        .waitFor();
      await shot(page, '07-replay');

      // Switch the leaf: a fork into a branch at the first message moves the leaf there (the next
      // message starts the branch); the transcript and context follow; then back to the last entry.
      const tree = page.getByTestId('branch-tree');
      const first = tree.locator('.entry').filter({ hasText: 'What is the weather in Tokyo?' });
      await first.hover();
      await first.getByRole('button', { name: 'fork → branch' }).click();
      await first.getByText('leaf', { exact: true }).waitFor();
      await expect.poll(() => page.getByTestId('transcript').locator('li').count(), { timeout: WAIT }).toBe(1);
      await shot(page, '07b-leaf-moved');
      const last = tree.locator('.entry').filter({ hasText: 'It is 75°F in tokyo.' });
      await last.hover();
      await last.getByRole('button', { name: 'make leaf' }).click();
      await last.getByText('leaf', { exact: true }).waitFor();
      await expect.poll(() => page.getByTestId('transcript').locator('li').count(), { timeout: WAIT }).toBe(5);

      // Live: a message sent by another client shows up on the open page, without a reload, its
      // text streaming in first (the deltas), then the committed message.
      let loads = 0;
      page.on('load', () => loads++);
      await page.evaluate(() => {
        const w = window as unknown as { streamed: string[] };
        w.streamed = [];
        new MutationObserver(() => {
          for (const el of document.querySelectorAll('[data-testid="streaming"]'))
            w.streamed.push(el.textContent ?? '');
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      const sessionId = /\/inspect\/sessions\/([^/?#]+)/.exec(page.url())![1]!;
      const sent = await fetch(`${server.url}/v1/sessions/${sessionId}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ content: 'And in Berlin?' }),
      });
      expect(sent.status).toBe(202);
      await page.getByTestId('transcript').getByText('Let me check the weather in Berlin.').waitFor();
      await page.getByTestId('run-row').getByText('waiting for approval').waitFor();
      expect(await page.getByTestId('run-row').count()).toBe(2);
      expect(loads).toBe(0);
      const streamed = await page.evaluate(() => (window as unknown as { streamed: string[] }).streamed);
      expect(streamed.some((t) => t.includes('Let me check'))).toBe(true);
      await shot(page, '08-live');

      // The stream drops (and the server is out of reach a while) while the run moves on:
      // keel/client's follow() connects again by itself and resumes after the last event it had;
      // the page catches up without a reload.
      const runs = await api<{ data: RunJson[] }>('GET', `/v1/sessions/${sessionId}/runs?limit=1000`);
      const waiting = runs.data.find((r) => r.status === 'waiting_approval')!;
      const approvalId = waiting.waiting!.requests[0]!.approval_id;
      net.down();
      await page.getByText('reconnecting…').waitFor();
      await api('POST', `/v1/runs/${waiting.id}/approvals/${encodeURIComponent(approvalId)}`, { decision: 'approve' });
      net.up();
      await page.getByTestId('run-row').getByText('waiting for an answer').waitFor();
      await page.getByText('reconnecting…').waitFor({ state: 'detached' });
      expect(loads).toBe(0);

      // A refusal shows the API's problem: another message, rejected while the run waits.
      await page.getByLabel('If a run is active').selectOption('reject');
      await page.getByLabel('Message').fill('And in Paris?');
      await page.getByRole('button', { name: 'Send' }).click();
      await page
        .getByRole('alert')
        .getByText(/^run_busy: /)
        .waitFor();

      // Compact (its verdict, whichever it is) and export: the JSONL holds the whole log.
      await page.getByRole('button', { name: 'Compact' }).click();
      await page
        .getByTestId('verdict')
        .getByText(/^(Not compacted|Compacted)/)
        .waitFor();
      const download = page.waitForEvent('download');
      await page.getByRole('button', { name: 'Export JSONL' }).click();
      const jsonl = readFileSync(await (await download).path(), 'utf8')
        .trim()
        .split('\n');
      expect(jsonl.length).toBeGreaterThan(10);
      for (const line of jsonl) expect(() => JSON.parse(line) as unknown).not.toThrow();
      expect(jsonl.join('\n')).toContain('And in Berlin?');
      expect(failures).toEqual([]);
    } finally {
      await context.close();
      net.close();
    }
  }, 90_000);
  it('shows the MCP tools a run got, each with its server, and the server it skipped', async () => {
    const headers = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
    const session = (await (
      await fetch(`${server.url}/v1/sessions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ title: 'MCP tools' }),
      })
    ).json()) as { id: string };
    const sent = await fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ content: 'Hello', agent: 'mcp-agent' }),
    });
    expect(sent.status).toBe(202);
    const runId = ((await sent.json()) as { run: { id: string } }).run.id;
    const status = async () =>
      ((await (await fetch(`${server.url}/v1/runs/${runId}`, { headers })).json()) as { status: string }).status;
    await expect.poll(status, { timeout: WAIT }).toBe('completed');

    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    try {
      await page.goto(`${server.url}/inspect/runs/${runId}`);
      await page.getByLabel('API key').fill(secret);
      await page.getByRole('button', { name: 'Use this key' }).click();
      const section = page.getByTestId('mcp-tools');
      await section.getByRole('heading', { name: 'MCP tools' }).waitFor();
      const rows = section.getByTestId('mcp-tool');
      await expect.poll(() => rows.count(), { timeout: WAIT }).toBe(5);
      const cells = await Promise.all(
        (await rows.all()).map(async (row) => (await row.locator('td').allTextContents()).join(' | ')),
      );
      expect(cells).toEqual([
        'fx__add | fx | add | always',
        'fx__slow | fx | slow | always',
        'fx__read_only_echo | fx | read_only_echo | never',
        'fx__fails | fx | fails | always',
        'fx__die | fx | die | always',
      ]);
      expect(await section.textContent()).toContain('From fx (stdio, keel-fixture 1.0.0)');
      expect(await section.getByTestId('mcp-skipped').textContent()).toMatch(
        /^Server docs skipped: MCP server docs is unavailable: /,
      );
      await shot(page, '09-mcp-tools');
      expect(failures).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('shows the tenant’s usage by day and its quotas against their use', async () => {
    // The tenant's quotas in the registry (the server's process reads them within 2 s).
    await store.tenants.put(
      { id: 'acme', quotas: { tokensPerDay: 1_000_000, costPerMonth: 50, onLimit: 'fail' } },
      Date.now(),
    );
    await completedDemoRun('usage');
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    try {
      await page.goto(`${server.url}/inspect/usage`);
      await page.getByLabel('API key').fill(secret);
      await page.getByRole('button', { name: 'Use this key' }).click();
      await page.getByRole('heading', { name: 'Usage' }).waitFor();
      const quota = page.getByTestId('quota');
      await quota.waitFor();
      expect(await quota.textContent()).toContain('tenant:acme');
      expect(await quota.textContent()).toContain('a run fails');
      const tokensLine = quota.getByTestId('quota-tokens_per_day');
      await expect
        .poll(async () => (await tokensLine.textContent()) ?? '', { timeout: WAIT })
        .toMatch(/used.* of 1,000,000/);
      expect(await quota.getByTestId('quota-cost_per_month').textContent()).toContain('of $50');
      const days = page.getByTestId('usage-days').locator('tbody tr');
      await expect.poll(() => days.count(), { timeout: WAIT }).toBeGreaterThan(0);
      await shot(page, '10-usage');
      expect(failures).toEqual([]);
    } finally {
      await context.close();
      await store.tenants.delete('acme');
    }
  }, 60_000);

  it('reruns a finished run on another agent version from its page, shows the lineage both ways and compares the two', async () => {
    const source = await completedDemoRun('Rerun me');
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    try {
      await page.goto(`${server.url}/inspect/runs/${source}`);
      await page.getByLabel('API key').fill(secret);
      await page.getByRole('button', { name: 'Use this key' }).click();
      await page.getByText('It is 24°C in tokyo. The report was sent. Anything else?').waitFor();
      // Not a rerun, and not rerun yet.
      expect(await page.getByTestId('rerun-of').count()).toBe(0);
      expect(await page.getByTestId('reruns').count()).toBe(0);

      // The rerun form of a finished run: from step 2, on demo@2, tools reused; it opens the rerun.
      const form = page.getByTestId('rerun-form');
      await form.getByLabel('Rerun from step').selectOption('2');
      await form.getByLabel('Rerun on agent').fill('demo@2');
      await form.getByLabel('Rerun tools').selectOption('reuse');
      await shot(page, '10-rerun-form');
      await form.getByRole('button', { name: 'Rerun' }).click();
      await page.waitForURL((u) => u.pathname.startsWith('/inspect/runs/') && !u.pathname.endsWith(source));
      const rerun = /\/inspect\/runs\/([^/?#]+)/.exec(page.url())![1]!;
      const lineage = page.getByTestId('rerun-of');
      await lineage.waitFor();
      expect(await lineage.textContent()).toMatch(
        /^Rerun of run .* from step 2 on demo@2 · tools reuse · Compare with source$/,
      );
      await page.getByText('Tokyo: 24°C. Report sent to the team.').waitFor();
      await page.getByTestId('lifecycle').filter({ hasText: '→ completed' }).waitFor();

      // The API agrees: the rerun's lineage, and the source's reruns.
      expect(await api('GET', `/v1/runs/${rerun}`)).toMatchObject({
        rerun_of: source,
        agent: { name: 'demo', version: '2' },
        rerun: { of: { run_id: source, step: 2 }, tools: { default: 'reuse' } },
      });

      // Back to the source: its Reruns section lists the rerun, with a link to compare the two.
      await lineage.getByRole('link', { name: /^run / }).click();
      const row = page.getByTestId('reruns').getByTestId('rerun-row');
      // (Its status as the list last read it: the list is read again every 3 s.)
      await row.getByText('completed').waitFor();
      expect(await row.count()).toBe(1);
      expect(await row.locator('td').allTextContents()).toEqual([
        expect.stringMatching(/^run /),
        'demo@2',
        '2',
        'completed',
        expect.any(String),
        'compare',
      ]);
      await shot(page, '11-reruns');
      await row.getByRole('link', { name: 'compare' }).click();

      // The comparison: A the source, B the rerun.
      await page.getByRole('heading', { name: 'Compare runs' }).waitFor();
      expect(page.url()).toBe(`${server.url}/inspect/compare/${source}/${rerun}`);
      expect(await page.getByTestId('side-a').textContent()).toContain('demo@1');
      expect(await page.getByTestId('side-b').textContent()).toContain('demo@2');
      const totals = page.getByTestId('compare-totals').getByTestId('compare-row');
      expect(await totals.filter({ hasText: 'Status' }).textContent()).toContain('= same');
      expect(await totals.filter({ hasText: 'Tokens in' }).textContent()).toContain('≠ differs');
      // The final answer: each run's text, what only A says struck out, what only B says inserted.
      const answer = page.getByTestId('final-answer');
      expect(await answer.getByTestId('diff-a').textContent()).toBe(
        'It is 24°C in tokyo. The report was sent. Anything else?',
      );
      expect(await answer.getByTestId('diff-b').textContent()).toBe('Tokyo: 24°C. Report sent to the team.');
      expect(await answer.locator('del').allTextContents()).toContain('It is 24°C in tokyo.');
      expect(await answer.locator('ins').allTextContents()).toContain('Tokyo:');
      // Then the same calls, B's reused.
      const steps = page.getByTestId('compare-step');
      // Step 1 is the context both share (the rerun is from step 2): left out, and said so.
      expect(await page.getByTestId('forked-at').textContent()).toContain('from step 2');
      expect(await steps.count()).toBe(3);
      expect(await steps.nth(0).textContent()).toContain('demo-script-2');
      const call = steps.nth(0).getByTestId('compare-call');
      expect(await call.getByTestId('call-a').textContent()).toMatch(/send_report\s*executed/);
      expect(await call.getByTestId('call-b').textContent()).toMatch(/send_report\s*reused/);
      expect(await call.textContent()).toContain('= same');
      expect(await steps.nth(1).getByTestId('call-b').getByTestId('call-source').textContent()).toBe('reused');
      await shot(page, '12-compare');

      // B's link opens the rerun, which says where it came from.
      await page.getByTestId('side-b').getByRole('link', { name: /^run / }).click();
      await page.getByTestId('rerun-of').getByText('Compare with source').waitFor();
      expect(page.url()).toBe(`${server.url}/inspect/runs/${rerun}`);
      await shot(page, '13-rerun');
      expect(failures).toEqual([]);
    } finally {
      await context.close();
    }
  }, 90_000);
  it('starts an experiment on a dataset of demo runs, reads its results and regressions, compares an item step by step and rates it', async () => {
    // Two finished demo runs (celsius), frozen into a dataset.
    const runs = [await completedDemoRun('Eval one'), await completedDemoRun('Eval two')];
    const dataset = await api<{ id: string }>('POST', '/v1/datasets', { name: 'Tokyo weather', runs });
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(WAIT);
    const failures: string[] = [];
    page.on('pageerror', (e) => failures.push(e.message));
    try {
      await page.goto(`${server.url}/inspect`);
      await page.getByLabel('API key').fill(secret);
      await page.getByRole('button', { name: 'Use this key' }).click();

      // The Experiments page from the navigation: the dataset, and the form that starts an experiment on it.
      await page.getByRole('link', { name: 'Experiments', exact: true }).click();
      await page.getByRole('heading', { name: 'Experiments' }).waitFor();
      const datasetRow = page.getByTestId('dataset-row').filter({ hasText: 'Tokyo weather' });
      await datasetRow.waitFor();
      expect(await datasetRow.locator('td').allTextContents()).toEqual([
        expect.stringMatching(/^Tokyo weather/),
        '2',
        '2 runs',
        expect.any(String),
      ]);
      const form = page.getByTestId('experiment-form');
      await form.getByLabel('Dataset').selectOption(dataset.id);
      await form.getByLabel('Candidates').fill('demo@1, demo@2');
      await form.getByLabel('Mode').selectOption('step_replay');
      await shot(page, '14-experiment-form');
      await form.getByRole('button', { name: 'Start experiment' }).click();

      // It opens the experiment, which fills in as its items end (read every 2 s while it runs).
      await page.waitForURL((u) => /^\/inspect\/experiments\/[^/]+$/.test(u.pathname));
      const id = /\/inspect\/experiments\/([^/?#]+)/.exec(page.url())![1]!;
      await page.getByTestId('experiment-summary').getByText('completed').waitFor();
      expect(await page.getByTestId('experiment-summary').textContent()).toContain('4 of 4 done');

      // The list shows it too, done; its name opens it.
      await page.getByRole('link', { name: 'Experiments', exact: true }).click();
      const row = page.getByTestId('experiment-row').filter({ hasText: 'Tokyo weather: demo@1, demo@2' });
      await row.getByText('completed').waitFor();
      expect(await row.locator('td').allTextContents()).toEqual([
        expect.stringMatching(/^Tokyo weather: demo@1, demo@2/),
        'step replay',
        'completed',
        '4 of 4 done',
        expect.any(String),
      ]);
      await shot(page, '15-experiments');
      await row.getByRole('link', { name: 'Tokyo weather: demo@1, demo@2' }).click();
      expect(page.url()).toBe(`${server.url}/inspect/experiments/${id}`);

      // The results: demo@1 (the version that recorded the runs) scores 1 everywhere; demo@2 answers
      // in another form, so its final_text and overall score drop, below the recorded baseline.
      const results = page.getByTestId('results');
      const v1 = results.locator('[data-candidate="demo@1"]');
      const v2 = results.locator('[data-candidate="demo@2"]');
      await v1.getByTestId('overall').getByText('1.00').waitFor();
      expect(await results.locator('thead th').allTextContents()).toEqual([
        'Candidate',
        'Agent',
        'Items',
        'Score',
        'tool_calls',
        'arguments',
        'final_text',
        'status',
        'Tokens',
        'Cost',
        'Latency',
        'vs baseline',
      ]);
      const cells1 = await v1.locator('td').allTextContents();
      expect(cells1.slice(0, 8)).toEqual(['demo@1', 'demo@1', '2 of 2 done', '1.00', '1.00', '1.00', '1.00', '1.00']);
      expect(cells1[11]).toBe('±0.00');
      const cells2 = await v2.locator('td').allTextContents();
      expect(cells2.slice(0, 3)).toEqual(['demo@2', 'demo@2', '2 of 2 done']);
      const overall2 = Number(cells2[3]);
      expect(overall2).toBeGreaterThan(0);
      expect(overall2).toBeLessThan(1);
      expect(Number(cells2[6])).toBeLessThan(1); // final_text
      expect(cells2[11]).toMatch(/^−0\.\d\d$/);
      expect(await v2.getByTestId('vs-baseline').getAttribute('class')).toContain('worse');

      // The regressions: both items, on demo@2, worst first, each with its source run.
      const regressions = page.getByTestId('regressions').getByTestId('regression-row');
      expect(await regressions.count()).toBe(2);
      const regressed = await Promise.all((await regressions.all()).map((r) => r.locator('td').allTextContents()));
      for (const r of regressed) {
        expect(r[0]).toBe('demo@2');
        expect(Number(r[3])).toBeLessThan(1);
        expect(r[4]).toBe('1.00');
        expect(r[5]).toMatch(/^−0\.\d\d$/);
      }
      expect(Number(regressed[0]![5]!.slice(1))).toBeGreaterThanOrEqual(Number(regressed[1]![5]!.slice(1)));
      const linked = await Promise.all((await regressions.getByRole('link').all()).map((a) => a.getAttribute('href')));
      expect(linked.sort()).toEqual(runs.map((r) => `/inspect/runs/${r}`).sort());

      // The items: one row per dataset item, each candidate's score.
      const items = page.getByTestId('item-row');
      expect(await items.count()).toBe(2);
      expect(await items.nth(0).locator('td').allTextContents()).toEqual([
        'item 1',
        'What is the weather in Tokyo?',
        expect.stringMatching(/^run /),
        '1.00',
        '1.00',
        cells2[3] === '1.00' ? '1.00' : expect.stringMatching(/^0\.\d\d$/),
      ]);
      await shot(page, '16-experiment');

      // An item's comparison: each recorded step beside each candidate's decision on the same request.
      await items.nth(0).getByRole('button', { name: 'item 1' }).click();
      const detail = page.getByTestId('item-detail');
      await detail.getByRole('heading', { name: 'Item 1' }).waitFor();
      const steps = detail.getByTestId('replay-step');
      expect(await steps.count()).toBe(4);
      const cell = (step: number, label: string) =>
        steps.nth(step - 1).locator(`[data-testid="step-candidate"][data-candidate="${label}"]`);
      // demo@1 sends every request byte for byte as recorded, and decides the same.
      for (let s = 1; s <= 4; s++) {
        expect(await cell(s, 'demo@1').getByTestId('request-match').textContent()).toBe('= request, byte for byte');
        expect(await cell(s, 'demo@1').textContent()).toContain('= same decision');
        // demo@2 has another system prompt: another request at every step.
        expect(await cell(s, 'demo@2').getByTestId('request-match').textContent()).toBe('≠ request differs');
      }
      // The same calls at first (get_weather, send_report, ask_user), another answer at the end.
      expect(await steps.nth(0).getByTestId('step-recorded').textContent()).toContain('get_weather {"city":"tokyo"}');
      expect(await cell(1, 'demo@2').textContent()).toContain('= same decision');
      expect(await cell(1, 'demo@2').getByTestId('decision-call').textContent()).toBe('get_weather {"city":"tokyo"}');
      expect(await steps.nth(3).getByTestId('step-recorded').getByTestId('decision-text').textContent()).toBe(
        'It is 24°C in tokyo. The report was sent. Anything else?',
      );
      expect(await cell(4, 'demo@1').getByTestId('decision-text').textContent()).toBe(
        'It is 24°C in tokyo. The report was sent. Anything else?',
      );
      expect(await cell(4, 'demo@2').getByTestId('decision-text').textContent()).toBe(
        'Tokyo: 24°C. Report sent to the team.',
      );
      expect(await cell(4, 'demo@2').textContent()).toContain('≠ decision differs');
      const card2 = detail.locator('[data-testid="candidate-card"][data-candidate="demo@2"]');
      expect(await card2.textContent()).toContain('0 of 4 requests the same, byte for byte');
      expect(await detail.locator('[data-testid="candidate-card"][data-candidate="demo@1"]').textContent()).toContain(
        '4 of 4 requests the same, byte for byte',
      );
      await shot(page, '17-experiment-item');

      // A rating of demo@2's answer: a late score, in the item, its row and the results' mean.
      await card2.getByLabel('Rating of demo@2').fill('0.8');
      await card2.getByRole('button', { name: 'Rate' }).click();
      await card2.getByTestId('rating').getByText('rated 0.80').waitFor();
      await items
        .nth(0)
        .locator('[data-testid="item-score"][data-candidate="demo@2"]')
        .getByText('rated 0.80')
        .waitFor();
      await v2.locator('[data-scorer="rating"]').getByText('0.80').waitFor();
      expect(await v1.locator('[data-scorer="rating"]').textContent()).toBe('–');
      const rated = await api<{
        data: Array<{ candidate: string; dataset_item_id: string; scores: Record<string, number> }>;
      }>('GET', `/v1/experiments/${id}/items`);
      expect(
        rated.data.filter((i) => i.scores.rating !== undefined).map((i) => [i.candidate, i.scores.rating]),
      ).toEqual([['demo@2', 0.8]]);
      await shot(page, '18-experiment-rated');

      // By full reruns: an item shows the recorded final answer beside the rerun's, and links to
      // the comparison of the source run with the candidate's run.
      const rerunExp = await api<{ id: string }>('POST', '/v1/experiments', {
        dataset: dataset.id,
        candidates: ['demo@2'],
        mode: 'rerun',
      });
      await page.goto(`${server.url}/inspect/experiments/${rerunExp.id}`);
      await page.getByTestId('experiment-summary').getByText('completed').waitFor();
      expect(await page.getByTestId('experiment-summary').textContent()).toContain('full rerun');
      await page.getByTestId('item-row').nth(0).getByRole('button', { name: 'item 1' }).click();
      const outcomes = page.getByTestId('item-detail').getByTestId('rerun-outcomes');
      expect(await outcomes.locator('tbody tr').first().locator('td').allTextContents()).toEqual([
        'It is 24°C in tokyo. The report was sent. Anything else?',
        'Tokyo: 24°C. Report sent to the team.',
      ]);
      const compare = page.getByTestId('candidate-card').getByRole('link', { name: 'compare with the source run' });
      const rerunId = (
        await api<{ data: Array<{ run_id: string; dataset_item_id: string; position: number }> }>(
          'GET',
          `/v1/experiments/${rerunExp.id}/items`,
        )
      ).data[0]!.run_id;
      expect(await compare.getAttribute('href')).toBe(`/inspect/compare/${runs[0]}/${rerunId}`);
      await shot(page, '19-experiment-rerun');
      await compare.click();
      await page.getByRole('heading', { name: 'Compare runs' }).waitFor();
      expect(await page.getByTestId('final-answer').getByTestId('diff-b').textContent()).toBe(
        'Tokyo: 24°C. Report sent to the team.',
      );
      expect(failures).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);
});
