import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type LoadedConfig } from '../../src/config/index.ts';
import { startServer, type RunningServer } from '../../src/server/serve.ts';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/index.ts';

/**
 * `keel chat` as a person uses it: a child process on a pseudo-terminal (util-linux `script`),
 * against a real server with the built-in demo agent. The test types into the terminal and waits
 * for output patterns (generous deadlines, no timing assertions).
 */
const MAIN = resolve(import.meta.dirname, '../../src/cli/main.ts');

let dir: string;
let store: SqliteStore;
let config: LoadedConfig;
let server: RunningServer;
const children: ChildProcessWithoutNullStreams[] = [];

const start = (port = 0) => startServer({ store, config, port, host: '127.0.0.1', workers: 2, version: 'test' });

beforeAll(async () => {
  const probe = spawnSync('script', ['--version'], { encoding: 'utf8' });
  if (probe.error) throw new Error('these tests need `script` from util-linux (apt-get install util-linux)');
  dir = mkdtempSync(join(tmpdir(), 'keel-chat-'));
  const empty = join(dir, 'cwd');
  mkdirSync(empty);
  config = await loadConfig(undefined, empty); // no keel.config.*: the demo agent
  expect(config.demo).toBe(true);
  store = openSqliteStore({ path: join(dir, 'keel.db') });
  server = await start();
});

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

afterAll(async () => {
  await server?.close({ graceMs: 1000 });
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const CSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;?]*[A-Za-z]`, 'g');
const strip = (s: string) => s.replace(CSI, '').replace(/\r/g, '');
const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** `keel chat` on a pseudo-terminal: type into it, wait for what it shows. */
function chat(url: string) {
  const cmd = `stty cols 200 rows 50 2>/dev/null; exec ${[process.execPath, MAIN, 'chat', '--url', url].map(quote).join(' ')}`;
  const env: NodeJS.ProcessEnv = { ...process.env, TERM: 'xterm-256color' };
  delete env.KEEL_API_KEY;
  delete env.KEEL_URL;
  delete env.NO_COLOR;
  const child = spawn('script', ['-q', '-f', '-e', '-c', cmd, '/dev/null'], { cwd: join(dir, 'cwd'), env });
  children.push(child);
  let raw = '';
  child.stdout.on('data', (d: Buffer) => (raw += d.toString('utf8')));
  child.stderr.on('data', (d: Buffer) => (raw += d.toString('utf8')));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const text = () => strip(raw);
  return {
    text,
    type: (s: string) => child.stdin.write(s),
    /** Waits until the output after position `from` matches; returns the match. */
    async waitFor(re: RegExp, from = 0, timeoutMs = 45_000): Promise<RegExpMatchArray> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = text().slice(from).match(re);
        if (m) return m;
        if (child.exitCode !== null || Date.now() > deadline)
          throw new Error(
            `no ${re} in the chat output${child.exitCode !== null ? ` (it exited with ${child.exitCode})` : ''}:\n${text()}`,
          );
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    exited,
  };
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${server.url}${path}`);
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

const count = (s: string, needle: string) => s.split(needle).length - 1;

describe('keel chat', () => {
  it('streams the reply, asks for approval and the agent question, cancels on Ctrl-C and quits on Ctrl-D', async () => {
    const c = chat(server.url);
    const [, sessionId] = await c.waitFor(/keel chat: session (\S+) on /);
    await c.waitFor(/\n> $/);

    c.type('What is the weather in Berlin?\r');
    await c.waitFor(/Let me check the weather in Berlin\.\n/);
    await c.waitFor(/ {2}→ get_weather\(\{"city":"berlin"\}\)\n {2}← get_weather: \{"city":"berlin","celsius":15\}\n/);
    await c.waitFor(
      /I will send a short report to the team; that needs your approval\.\nApprove send_report\(\{"to":"team@example\.com","body":"Weather in berlin: see the log\."\}\)\? \[y\/N\] $/,
    );

    c.type('y\r');
    await c.waitFor(/ {2}← send_report: \{"sent":true,"to":"team@example\.com"\}\n/);
    await c.waitFor(/One question before I finish\.\nCelsius or Fahrenheit\? \[celsius\/fahrenheit\] $/);

    c.type('celsius\r');
    await c.waitFor(/It is 15°C in berlin\. The report was sent\. Anything else\?\n> $/);
    expect(count(c.text(), 'Let me check the weather in Berlin.')).toBe(1);
    let runs = await api<{ data: Array<{ status: string }> }>(`/v1/sessions/${sessionId}/runs`);
    expect(runs.data.map((r) => r.status)).toEqual(['completed']);

    // Another message, and Ctrl-C while its reply streams: the run is cancelled, the session and the prompt stay.
    const mark = c.text().length;
    c.type('And in London?\r');
    await c.waitFor(/Let me/, mark);
    c.type('\x03');
    await c.waitFor(/\[cancelling the run…\][\s\S]*\[run cancelled\]\n> $/, mark);
    runs = await api(`/v1/sessions/${sessionId}/runs`);
    expect(runs.data.map((r) => r.status)).toEqual(['completed', 'cancelled']);

    // Ctrl-C at an empty prompt only warns; Ctrl-D quits.
    const mark2 = c.text().length;
    c.type('\x03');
    await c.waitFor(/press Ctrl-C again, or Ctrl-D, to quit\)\n> $/, mark2);
    c.type('\x04');
    expect(await c.exited).toBe(0);
    expect(c.text()).toContain(`session ${sessionId}: "keel chat ${sessionId}" continues it`);
  }, 180_000);

  it('reconnects by itself when the server restarts, with no text shown twice', async () => {
    const c = chat(server.url);
    const [, sessionId] = await c.waitFor(/keel chat: session (\S+) on /);
    await c.waitFor(/\n> $/);
    c.type('Weather in Tokyo please\r');
    await c.waitFor(/\[y\/N\] $/);

    // The server goes away while the run waits for the approval, and comes back on the same port.
    const port = server.port;
    await server.close({ graceMs: 1000 });
    await c.waitFor(/\[connection to the server lost; reconnecting…\]/);
    server = await start(port);
    await c.waitFor(/\[reconnected\]/);

    c.type('y\r');
    await c.waitFor(/\[celsius\/fahrenheit\] $/);
    c.type('2\r'); // the second choice
    await c.waitFor(/It is 75°F in tokyo\. The report was sent\. Anything else\?\n> $/);
    const out = c.text();
    for (const once of [
      'Let me check the weather in Tokyo.',
      '← get_weather',
      'I will send a short report',
      '← send_report',
      'One question before I finish.',
      'It is 75°F',
    ]) {
      expect(count(out, once), once).toBe(1);
    }
    const runs = await api<{ data: Array<{ status: string }> }>(`/v1/sessions/${sessionId}/runs`);
    expect(runs.data.map((r) => r.status)).toEqual(['completed']);

    c.type('\x04');
    expect(await c.exited).toBe(0);
  }, 180_000);
});
