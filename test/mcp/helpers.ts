import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { McpServerConfig } from '../../src/index.ts';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

/** A temporary file the fixture servers note what they saw in (calls, aborts), and a reader for it. */
export function fixtureLog(): {
  path: string;
  entries(): Array<{ pid: number; event: string; tool?: string }>;
  cleanup(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), 'keel-mcp-'));
  const path = join(dir, 'log.jsonl');
  return {
    path,
    entries: () =>
      existsSync(path)
        ? readFileSync(path, 'utf8')
            .trim()
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as { pid: number; event: string; tool?: string })
        : [],
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export function stdioServer(
  name: string,
  log: string,
  more: Partial<McpServerConfig> = {},
  variant = 'a',
): McpServerConfig {
  return {
    name,
    stdio: {
      command: process.execPath,
      args: [fixture('stdio-server.mjs')],
      env: { MCP_FIXTURE_LOG: log, MCP_FIXTURE_VARIANT: variant },
    },
    ...more,
  };
}

/** The paging fixture: `perPage` tools a page, `pages` pages (0: a next cursor on every page, for ever). */
export function pagingServer(
  name: string,
  log: string,
  o: { perPage?: number; pages?: number },
  more: Partial<McpServerConfig> = {},
): McpServerConfig {
  const env = {
    MCP_FIXTURE_LOG: log,
    PAGING_TOOLS_PER_PAGE: String(o.perPage ?? 1),
    PAGING_PAGES: String(o.pages ?? 0),
  };
  return { name, stdio: { command: process.execPath, args: [fixture('paging-server.mjs')], env }, ...more };
}

export function httpServer(name: string, url: string, more: Partial<McpServerConfig> = {}): McpServerConfig {
  return { name, http: { url, headers: { 'x-fixture-token': 'secret' } }, ...more };
}

export interface HttpFixture {
  port: number;
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** Starts the streamable-HTTP fixture server in its own process (on `port`, or any). */
export async function startHttpFixture(log: string, o: { port?: number; variant?: string } = {}): Promise<HttpFixture> {
  const child = spawn(process.execPath, [fixture('http-server.mjs')], {
    env: { ...process.env, MCP_FIXTURE_LOG: log, MCP_FIXTURE_VARIANT: o.variant ?? 'a', PORT: String(o.port ?? 0) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { port: number }).port);
    });
    child.once('exit', (code) => reject(new Error(`the HTTP fixture exited (${code}) before listening`)));
  });
  return {
    port,
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

export async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting for a condition');
    await new Promise((r) => setTimeout(r, 20));
  }
}
