/**
 * A real Keel HTTP server for API tests: `startServer` on 127.0.0.1:0 with a SQLite store in a
 * temp file (or, with `backend: 'postgres'`, a PostgreSQL store in a schema of its own) and
 * deterministic scripted agents, plus small fetch helpers for JSON requests.
 *
 * The default agent `helper` reads the last user message as a command:
 *   `ask`              → calls ask_user (one question, id `color`); the run waits for the user
 *   `danger:<target>`  → calls `danger` (approval 'always'); the run waits for an approval
 *   `danger2:<a>,<b>`  → two `danger` calls in one step (two approvals)
 *   `block:<key>`      → calls `gate`, which runs until the test opens gate <key> (or the call is aborted);
 *                        `block:<key>/<words>` answers `done <words>` after it instead of `done`
 *   `slow:<text>`      → answers `<text>`, streamed a word every 5 ms
 *   `fail:<message>`   → the model call fails (400, not retried): the run fails
 *   `call:<a>,<b>`     → calls the tools named (a client's own, say) with `{ n: <index> }`; after their
 *                        results it answers `got <result> | <result>`
 *   anything else      → answers `echo: <text>`
 * After a tool result it answers `done`. The agent `terse` (version 2) always answers `ok`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { z } from 'zod';
import { agentsFromConfig, type LoadedConfig } from '../../src/config/index.ts';
import { tool } from '../../src/core/index.ts';
import { ScriptedModel, type ScriptedResponse } from '../../src/model/index.ts';
import type { Runtime } from '../../src/runs/index.ts';
import { createApiKey } from '../../src/server/auth.ts';
import { startServer, type RunningServer, type StartOptions } from '../../src/server/serve.ts';
import type { ApiKeyScope, Store } from '../../src/store/index.ts';
import { openSqliteStore } from '../../src/store/sqlite/index.ts';
import { openTestPostgres } from './postgres.ts';

/** Response bodies are whatever JSON the server sent: tests assert on their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface ApiResponse<T = Json> {
  status: number;
  headers: Headers;
  /** Parsed JSON when the response is JSON (or problem+json), else undefined. */
  body: T;
  text: string;
}

/** Gates the `gate` tool waits on: the test opens them when it is done looking at the running run. */
export class Gates {
  private readonly gates = new Map<
    string,
    { open: () => void; opened: Promise<void>; entered: () => void; wasEntered: Promise<void> }
  >();

  private get(key: string) {
    let g = this.gates.get(key);
    if (!g) {
      let open!: () => void;
      let entered!: () => void;
      const opened = new Promise<void>((r) => (open = r));
      const wasEntered = new Promise<void>((r) => (entered = r));
      g = { open, opened, entered, wasEntered };
      this.gates.set(key, g);
    }
    return g;
  }

  /** Called by the tool: resolves when the gate opens, rejects when the call is aborted. */
  wait(key: string, signal: AbortSignal): Promise<void> {
    const g = this.get(key);
    g.entered();
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      void g.opened.then(resolve);
    });
  }

  /** Resolves once the tool is waiting at the gate (the run is running, mid-step). */
  entered(key: string): Promise<void> {
    return this.get(key).wasEntered;
  }

  open(key: string): void {
    this.get(key).open();
  }

  openAll(): void {
    for (const g of this.gates.values()) g.open();
  }
}

function textOfLast(call: LanguageModelV4CallOptions): { role: string; text: string } {
  const last = call.prompt.at(-1);
  if (!last) return { role: 'none', text: '' };
  if (last.role === 'user')
    return { role: 'user', text: last.content.map((p) => (p.type === 'text' ? p.text : '')).join('') };
  return { role: last.role, text: '' };
}

function lastUserText(call: LanguageModelV4CallOptions): string {
  const user = call.prompt.findLast((m) => m.role === 'user');
  return user?.role === 'user' ? user.content.map((p) => (p.type === 'text' ? p.text : '')).join('') : '';
}

/** The `helper` agent's script (see the module comment). */
export function helperScript(call: LanguageModelV4CallOptions): ScriptedResponse {
  const last = textOfLast(call);
  if (last.role === 'tool') {
    if (lastUserText(call).trim().startsWith('call:')) {
      // What the client's tools gave: each result's text (or JSON), in order.
      const tool = call.prompt.at(-1)!;
      const outputs =
        tool.role === 'tool' ? tool.content.flatMap((p) => (p.type === 'tool-result' ? [p.output] : [])) : [];
      return {
        text: `got ${outputs.map((o) => ('value' in o ? (typeof o.value === 'string' ? o.value : JSON.stringify(o.value)) : o.type)).join(' | ')}`,
      };
    }
    const after = /^block:[^/]*\/(.*)$/s.exec(lastUserText(call).trim())?.[1];
    return { text: after === undefined ? 'done' : `done ${after}` };
  }
  const m = /^(ask|danger|danger2|block|slow|fail|call)(?::(.*))?$/s.exec(last.text.trim());
  switch (m?.[1]) {
    case 'call': {
      // `call:<tool>[,<tool>…]`: calls each named tool (a client's), with `{ "n": <its index> }`.
      const names = (m[2] ?? '').split(',').filter(Boolean);
      return { toolCalls: names.map((name, n) => ({ name, input: { n } })) };
    }
    case 'ask':
      return {
        toolCalls: [
          {
            name: 'ask_user',
            input: { questions: [{ id: 'color', question: 'Which color?', choices: ['red', 'blue'] }] },
          },
        ],
      };
    case 'danger':
      return { toolCalls: [{ name: 'danger', input: { target: m[2] ?? 'x' } }] };
    case 'danger2': {
      const [a = 'a', b = 'b'] = (m[2] ?? '').split(',');
      return {
        toolCalls: [
          { name: 'danger', input: { target: a } },
          { name: 'danger', input: { target: b } },
        ],
      };
    }
    case 'block':
      return { toolCalls: [{ name: 'gate', input: { key: m[2]?.split('/')[0] ?? 'default' } }] };
    case 'slow':
      return { text: m[2] ?? '', chunkDelayMs: 5 };
    case 'fail':
      return { error: { kind: 'bad_request', message: m[2] ?? 'the model refused' } };
    default:
      return { text: `echo: ${last.text}` };
  }
}

/** The stores a test server can run on: SQLite in a temp file, or PostgreSQL in a schema of its own. */
export type Backend = 'sqlite' | 'postgres';
export const BACKENDS: readonly Backend[] = ['sqlite', 'postgres'];

export interface TestServerOptions extends Partial<Omit<StartOptions, 'store' | 'config'>> {
  /** Tenant quotas, as keel.config's `quotas` sets them (docs/operations.md). */
  quotas?: LoadedConfig['quotas'];
  /** API keys created before the server starts (with any key, auth is required). */
  keys?: Array<{ tenant: string; ratePerMinute?: number; revoked?: boolean; scope?: ApiKeyScope }>;
  /** Default `sqlite`. */
  backend?: Backend;
}

export interface TestServer {
  url: string;
  server: RunningServer;
  runtime: Runtime;
  store: Store;
  backend: Backend;
  /** With `backend: 'postgres'`: where the store is, for tests that write rows in bulk. */
  postgres: { url: string; schema: string } | undefined;
  gates: Gates;
  /** Inputs the `danger` tool executed with, in order. */
  dangerRuns: Array<{ target: string }>;
  /** Secrets of `keys`, in order. */
  secrets: string[];
  keyIds: string[];
  /** A client without a key (auth off), or with `secret`. */
  api(secret?: string): Api;
  /**
   * Closes the server (its connections drop, its workers hand their runs back) and starts a new
   * one on the same store, port and agents: `url`, `server` and `runtime` are the new server's.
   */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** Agents built from a configuration (as `keel serve` would load it), on scripted models. */
export function scriptedConfig(gates: Gates, dangerRuns: Array<{ target: string }>): LoadedConfig {
  const danger = tool({
    name: 'danger',
    description: 'Does something that needs approval',
    input: z.object({ target: z.string() }),
    execute: (input) => {
      dangerRuns.push(input);
      return `did ${input.target}`;
    },
  });
  const gate = tool({
    name: 'gate',
    description: 'Waits until the test opens the gate',
    input: z.object({ key: z.string() }),
    execute: async ({ key }, ctx) => {
      await gates.wait(key, ctx.signal);
      return `passed ${key}`;
    },
  });
  const { agents, compaction } = agentsFromConfig(
    {
      agents: [
        {
          name: 'helper',
          model: new ScriptedModel([helperScript], { loop: true, modelId: 'helper-1' }),
          system: 'You are a test helper.',
          tools: ['ask_user', danger, gate],
          approvals: { danger: 'always' },
        },
        { name: 'terse', version: '2', model: new ScriptedModel([{ text: 'ok' }], { loop: true, modelId: 'terse-1' }) },
      ],
    },
    'test-config',
    process.cwd(),
  );
  return { source: null, agents, compaction, demo: false };
}

/** A fresh store of the backend, and how to remove it. */
async function openBackend(
  backend: Backend,
): Promise<{ store: Store; postgres?: { url: string; schema: string }; remove(): Promise<void> }> {
  if (backend === 'postgres') {
    const pg = await openTestPostgres();
    return { store: pg.store, postgres: { url: pg.url, schema: pg.schema }, remove: () => pg.cleanup() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'keel-api-'));
  const store = openSqliteStore({ path: join(dir, 'keel.db') });
  return {
    store,
    async remove() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A server on 127.0.0.1:0 with a fresh store (a temp-file SQLite one by default); `close()` removes everything. */
export async function startTestServer(o: TestServerOptions = {}): Promise<TestServer> {
  const backend = o.backend ?? 'sqlite';
  const { store, postgres, remove } = await openBackend(backend);
  const secrets: string[] = [];
  const keyIds: string[] = [];
  for (const k of o.keys ?? []) {
    const { secret, key } = await createApiKey(store, {
      tenant: k.tenant,
      ...(k.ratePerMinute !== undefined ? { ratePerMinute: k.ratePerMinute } : {}),
      ...(k.scope !== undefined ? { scope: k.scope } : {}),
    });
    if (k.revoked) await store.keys.revoke(key.id, Date.now());
    secrets.push(secret);
    keyIds.push(key.id);
  }
  const gates = new Gates();
  const dangerRuns: Array<{ target: string }> = [];
  const { keys: _keys, backend: _backend, quotas, ...rest } = o;
  const config = { ...scriptedConfig(gates, dangerRuns), ...(quotas ? { quotas } : {}) };
  const start = (port: number) =>
    startServer({
      store,
      config,
      port,
      host: '127.0.0.1',
      workers: 2,
      version: '0.0.0-test',
      leaseMs: 10_000,
      ...rest,
      ...(port !== 0 ? { port } : {}),
    });
  let server: RunningServer;
  try {
    server = await start(0);
  } catch (e) {
    await remove();
    throw e;
  }
  let closed = false;
  return {
    get url() {
      return server.url;
    },
    get server() {
      return server;
    },
    get runtime() {
      return server.runtime;
    },
    store,
    backend,
    postgres,
    gates,
    dangerRuns,
    secrets,
    keyIds,
    api: (secret) => new Api(server.url, secret),
    async restart() {
      const port = server.port;
      await server.close({ graceMs: 200 });
      server = await start(port);
      // The old server closed its connections: let the clients of this process see that before
      // they send again, or a pooled keep-alive socket fails the next request ("other side closed").
      await new Promise((r) => setTimeout(r, 50));
    },
    async close() {
      if (closed) return;
      closed = true;
      gates.openAll();
      await server.close({ graceMs: 200 });
      await remove();
    },
  };
}

export interface RequestOptions {
  headers?: Record<string, string>;
  /** A raw body (sent as is); otherwise `json` is serialized with content-type application/json. */
  body?: string | Uint8Array<ArrayBuffer>;
  json?: unknown;
}

/** A tiny fetch client for the API. */
export class Api {
  readonly base: string;
  readonly secret: string | undefined;

  constructor(base: string, secret?: string) {
    this.base = base;
    this.secret = secret;
  }

  async request<T = Json>(method: string, path: string, o: RequestOptions = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(this.secret ? { authorization: `Bearer ${this.secret}` } : {}) };
    let body: string | Uint8Array<ArrayBuffer> | undefined = o.body;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers['content-type'] = 'application/json';
    }
    Object.assign(headers, o.headers);
    const res = await fetch(`${this.base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    let parsed: unknown = undefined;
    if (/^application\/(problem\+)?json/.test(type) && text !== '') parsed = JSON.parse(text);
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  get<T = Json>(path: string, headers?: Record<string, string>): Promise<ApiResponse<T>> {
    return this.request<T>('GET', path, headers ? { headers } : {});
  }

  post<T = Json>(path: string, json?: unknown, headers?: Record<string, string>): Promise<ApiResponse<T>> {
    return this.request<T>('POST', path, { ...(json !== undefined ? { json } : {}), ...(headers ? { headers } : {}) });
  }

  delete<T = Json>(path: string, headers?: Record<string, string>): Promise<ApiResponse<T>> {
    return this.request<T>('DELETE', path, headers ? { headers } : {});
  }

  /** Creates a session (expects 201) and returns it. */
  async session(body: Record<string, unknown> = {}): Promise<Json> {
    const r = await this.post('/v1/sessions', body);
    if (r.status !== 201) throw new Error(`creating a session: ${r.status} ${r.text}`);
    return r.body;
  }

  /** Sends a message (expects 202) and returns `{ outcome, message, run }`. */
  async send(sessionId: string, content: string, extra: Record<string, unknown> = {}): Promise<Json> {
    const r = await this.post(`/v1/sessions/${sessionId}/messages`, { content, ...extra });
    if (r.status !== 202) throw new Error(`sending a message: ${r.status} ${r.text}`);
    return r.body;
  }

  /** Polls GET /v1/runs/{id} until the run's status is one of `statuses`. */
  async waitForRun(runId: string, statuses: string | readonly string[], timeoutMs = 20_000): Promise<Json> {
    const want = typeof statuses === 'string' ? [statuses] : statuses;
    const deadline = Date.now() + timeoutMs;
    let last: ApiResponse | undefined;
    for (;;) {
      last = await this.get(`/v1/runs/${runId}`);
      if (last.status === 200 && want.includes(last.body.status)) return last.body;
      if (Date.now() > deadline)
        throw new Error(`run ${runId} did not reach ${want.join('|')}: last ${last.status} ${last.text}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Polls until `check` returns a value other than undefined. */
  async until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await check();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Every event of a session, paged through /events. */
  async allEvents(sessionId: string): Promise<Json[]> {
    const out: Json[] = [];
    let after = 0;
    for (;;) {
      const r = await this.get(`/v1/sessions/${sessionId}/events?after=${after}&limit=1000`);
      if (r.status !== 200) throw new Error(`events: ${r.status} ${r.text}`);
      out.push(...r.body.data);
      if (r.body.next_after === null) return out;
      after = r.body.next_after;
    }
  }
}

export const PROBLEM = 'https://keel.dev/problems/';

/** Asserts the RFC 9457 shape and returns the body, for further checks. */
export function expectProblem(r: ApiResponse, type: string, status: number): Json {
  const problems: string[] = [];
  if (r.status !== status) problems.push(`status ${r.status}, expected ${status}`);
  if (!(r.headers.get('content-type') ?? '').startsWith('application/problem+json'))
    problems.push(`content-type ${r.headers.get('content-type')}`);
  const b = r.body ?? {};
  if (b.type !== `${PROBLEM}${type}`) problems.push(`type ${b.type}, expected ${PROBLEM}${type}`);
  if (typeof b.title !== 'string' || b.title === '') problems.push('no title');
  if (b.status !== status) problems.push(`body status ${b.status}`);
  if (typeof b.detail !== 'string' || b.detail === '') problems.push('no detail');
  if (problems.length > 0) throw new Error(`not the expected problem (${problems.join('; ')}): ${r.text}`);
  return b;
}
