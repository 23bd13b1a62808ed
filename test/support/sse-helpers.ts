import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { EventSource } from 'eventsource';
import { z } from 'zod';
import type { LoadedConfig } from '../../src/config/index.ts';
import {
  defineAgent,
  openSqliteStore,
  ScriptedModel,
  tool,
  type AgentDefinition,
  type ScriptedResponse,
  type SqliteStore,
} from '../../src/index.ts';
import { startServer, type RunningServer, type StartOptions } from '../../src/server/serve.ts';
import { deferred, type Deferred } from './deferred.ts';

// ---------------------------------------------------------------------------------------------
// A long scripted agent
// ---------------------------------------------------------------------------------------------

export interface LongScript {
  /** Model calls with a tool call before the final answer. */
  toolSteps: number;
  /** Text chunks (deltas) of each model call. */
  chunks: number;
  chunkDelayMs: number;
  /** Characters of each chunk (at least the length of its label). */
  chunkChars?: number;
}

/** The text the model streams in step `step` (from 1): numbered chunks, so a gap or repeat is visible. */
export function stepChunks(step: number, s: LongScript): string[] {
  return Array.from({ length: s.chunks }, (_, i) => {
    const label = `s${step}c${i} `;
    return s.chunkChars && s.chunkChars > label.length
      ? `${label}${'x'.repeat(s.chunkChars - label.length - 1)} `
      : label;
  });
}

const stepOf = (call: LanguageModelV4CallOptions) => call.prompt.filter((m) => m.role === 'tool').length + 1;

/**
 * What the model answers, decided from the conversation (not from a call counter), so that any
 * process or server recovering the run continues exactly where the log says it is: `toolSteps`
 * steps (or, with `more`, as long as it says so) with long streamed texts and a `note` tool call
 * each, then a long final answer.
 */
export function longResponse(
  call: LanguageModelV4CallOptions,
  s: LongScript,
  more?: (step: number) => boolean,
): ScriptedResponse {
  const step = stepOf(call);
  const base = { chunks: stepChunks(step, s), chunkDelayMs: s.chunkDelayMs, usage: { input: 100, output: s.chunks } };
  if (more ? more(step) : step <= s.toolSteps)
    return { ...base, toolCalls: [{ id: `call-${step}`, name: 'note', input: { step, text: `note ${step}` } }] };
  return base;
}

export const noteTool = tool({
  name: 'note',
  description: 'Takes a note',
  input: z.object({ step: z.number(), text: z.string() }),
  execute: ({ step }) => `noted ${step}`,
});

/**
 * Holds a model's stream before a given text chunk of a given step until the test releases it:
 * a test knows for sure a message is streaming (and how far) when it drops a connection.
 */
export class Gate {
  private readonly holds = new Map<string, { reached: Deferred<void>; released: Deferred<void> }>();

  /** Holds step `step` before its chunk `chunk` (from 0): `reached` resolves when it waits there. */
  hold(step: number, chunk: number): { reached: Promise<void>; release(): void } {
    const h = { reached: deferred(), released: deferred() };
    this.holds.set(`${step}:${chunk}`, h);
    return { reached: h.reached.promise, release: () => h.released.resolve() };
  }

  async before(step: number, chunk: number, signal: AbortSignal | undefined): Promise<void> {
    const h = this.holds.get(`${step}:${chunk}`);
    if (!h) return;
    h.reached.resolve();
    await Promise.race([
      h.released.promise,
      new Promise((_, reject) =>
        signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true }),
      ),
    ]);
  }

  releaseAll(): void {
    for (const h of this.holds.values()) h.released.resolve();
  }
}

/** A scripted model whose text chunks pass a gate. */
class GatedModel implements LanguageModelV4 {
  readonly specificationVersion = 'v4' as const;
  readonly provider = 'scripted';
  readonly modelId = 'gated-1';
  readonly supportedUrls = {};
  private readonly inner: ScriptedModel;
  private readonly gate: Gate;

  constructor(inner: ScriptedModel, gate: Gate) {
    this.inner = inner;
    this.gate = gate;
  }

  doGenerate(options: LanguageModelV4CallOptions) {
    return this.inner.doGenerate(options);
  }

  async doStream(options: LanguageModelV4CallOptions) {
    const r = await this.inner.doStream(options);
    const step = stepOf(options);
    const gate = this.gate;
    let chunk = 0;
    const gated = new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
      async transform(part, controller) {
        if (part.type === 'text-delta') await gate.before(step, chunk++, options.abortSignal);
        controller.enqueue(part);
      },
    });
    return { ...r, stream: r.stream.pipeThrough(gated) };
  }
}

export function longAgent(
  s: LongScript,
  o: { name?: string; gate?: Gate; more?: (step: number) => boolean } = {},
): AgentDefinition {
  const scripted = new ScriptedModel([(call) => longResponse(call, s, o.more)], { loop: true });
  return defineAgent({
    name: o.name ?? 'long',
    model: o.gate ? new GatedModel(scripted, o.gate) : scripted,
    tools: [noteTool],
  });
}

/** The complete text of every model call of a run of `longAgent`, in order. */
export function expectedTexts(s: LongScript): string[] {
  return Array.from({ length: s.toolSteps + 1 }, (_, i) => stepChunks(i + 1, s).join(''));
}

export const configOf = (agents: AgentDefinition[]): LoadedConfig => ({
  source: null,
  agents,
  compaction: {},
  demo: false,
});

// ---------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------

export interface TestServer {
  server: RunningServer;
  store: SqliteStore;
  url: string;
  /** Closes the server (workers hand their runs back within `graceMs`), then the store. */
  close(graceMs?: number): Promise<void>;
}

/** A server (API and a worker) on a store: a private in-memory one unless `path` names a file. */
export async function startTestServer(
  o: { agents: AgentDefinition[]; path?: string; port?: number } & Partial<Omit<StartOptions, 'store' | 'config'>>,
): Promise<TestServer> {
  const { agents, path, ...rest } = o;
  const store = openSqliteStore({ path: path ?? ':memory:' });
  let server: RunningServer;
  try {
    server = await startServer({ store, config: configOf(agents), port: 0, workers: 4, version: 'test', ...rest });
  } catch (e) {
    store.close();
    throw e;
  }
  let closed = false;
  return {
    server,
    store,
    url: server.url,
    async close(graceMs = 2000) {
      if (closed) return;
      closed = true;
      await server.close({ graceMs });
      store.close();
    },
  };
}

export async function api<T = Record<string, unknown>>(
  url: string,
  path: string,
  init: { method?: string; body?: unknown } = {},
): Promise<T> {
  const res = await fetch(`${url}${path}`, {
    method: init.method ?? (init.body !== undefined ? 'POST' : 'GET'),
    ...(init.body !== undefined
      ? { body: JSON.stringify(init.body), headers: { 'content-type': 'application/json' } }
      : {}),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

export interface RunJson {
  id: string;
  session_id: string;
  status: string;
}

/** Creates a session and sends it a message: its run is queued. */
export async function startRun(url: string, content = 'Go.'): Promise<{ sessionId: string; runId: string }> {
  const s = await api<{ id: string }>(url, '/v1/sessions', { body: {} });
  const r = await api<{ run: RunJson }>(url, `/v1/sessions/${s.id}/messages`, { body: { content } });
  return { sessionId: s.id, runId: r.run.id };
}

export const getRun = (url: string, runId: string) => api<RunJson>(url, `/v1/runs/${runId}`);

const TERMINAL = new Set(['completed', 'failed', 'cancelled', 'timed_out']);

/** Polls until the run is terminal (no time limit of its own: the test's timeout is the limit). */
export async function waitForRun(
  url: string,
  runId: string,
  until: (status: string) => boolean = (s) => TERMINAL.has(s),
): Promise<RunJson> {
  for (;;) {
    const run = await getRun(url, runId);
    if (until(run.status)) return run;
    await sleep(25);
  }
}

/** Polls until `check` answers true. */
export async function until(check: () => boolean | Promise<boolean>, pollMs = 10): Promise<void> {
  while (!(await check())) await sleep(pollMs);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface EventJson {
  id: string;
  seq: number;
  type: string;
  time: string;
  run_id?: string;
  data: Record<string, unknown>;
}

/** The session's whole log, through GET /v1/sessions/{id}/events. */
export async function logOf(url: string, sessionId: string, runId?: string): Promise<EventJson[]> {
  const out: EventJson[] = [];
  for (;;) {
    const page = await api<{ data: EventJson[]; next_after: number | null }>(
      url,
      `/v1/sessions/${sessionId}/events?after=${out.at(-1)?.seq ?? 0}&limit=1000`,
    );
    out.push(...page.data);
    if (page.next_after === null) break;
  }
  return runId === undefined ? out : out.filter((e) => e.run_id === runId);
}

/** The text of an assistant/message event. */
export function messageText(e: EventJson): string {
  const m = e.data.message as { content: Array<{ type: string; text?: string }> };
  return m.content.map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');
}

export const messageIdOf = (e: EventJson) => (e.data.message as { id: string }).id;

export async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`no metric ${name}`);
  return Number(line.slice(name.length + 1));
}

// ---------------------------------------------------------------------------------------------
// SSE clients
// ---------------------------------------------------------------------------------------------

export interface DeltaJson {
  type: string;
  message_id: string;
  delta: string;
  turn: number;
  step: number;
}

export type Received =
  | { kind: 'event'; id: string; conn: number; event: EventJson }
  | { kind: 'delta'; id: string; conn: number; delta: DeltaJson }
  | { kind: 'end'; conn: number; data: { run_id?: string; last_seq: number } };

/** Orders SSE ids: `12` < `12.1` < `12.2` < `13`. */
export function compareIds(a: string, b: string): number {
  const [as, an = '0'] = a.split('.');
  const [bs, bn = '0'] = b.split('.');
  return Number(as) - Number(bs) || Number(an) - Number(bn);
}

/**
 * A resuming SSE client on the `eventsource` package: it collects what every connection received
 * in one list; `reconnect` closes the connection and opens a new one from the last id received,
 * with a Last-Event-ID header or `?after=`.
 */
export class ResumingClient {
  readonly items: Received[] = [];
  connections = 0;
  /** The URL of each connection (index: its number), for a trace that says which server sent what. */
  readonly connectionUrls: string[] = [];
  private es: EventSource | undefined;
  private readonly waiters = new Set<() => void>();
  lastId: string | undefined;
  ended = false;
  errors = 0;

  /** The stream's URL (a test points it at a restarted server's new address). */
  streamUrl: string;

  constructor(streamUrl: string) {
    this.streamUrl = streamUrl;
  }

  /** Opens a connection; `from` is sent as Last-Event-ID (`header`) or `?after=` (`query`). */
  open(via: 'header' | 'query' = 'header', from = this.lastId): this {
    this.close();
    // A connection number for each connection, also those the EventSource reopens on its own.
    let conn = ++this.connections;
    this.connectionUrls[conn] = this.streamUrl;
    let opened = 0;
    const url =
      via === 'query' && from !== undefined ? `${this.streamUrl}?after=${encodeURIComponent(from)}` : this.streamUrl;
    const es = new EventSource(url, {
      fetch: (input, init) =>
        fetch(input, {
          ...init,
          headers: {
            ...init.headers,
            ...(via === 'header' && from !== undefined && !('Last-Event-ID' in init.headers)
              ? { 'Last-Event-ID': from }
              : {}),
          },
        }),
    });
    this.es = es;
    es.addEventListener('open', () => {
      if (opened++ > 0 && this.es === es) {
        conn = ++this.connections;
        this.connectionUrls[conn] = `${this.streamUrl} (reconnected by the EventSource)`;
      }
    });
    es.addEventListener('message', (m) =>
      this.take({ kind: 'event', id: m.lastEventId, conn, event: JSON.parse(m.data as string) as EventJson }, es),
    );
    es.addEventListener('delta', (m) =>
      this.take({ kind: 'delta', id: m.lastEventId, conn, delta: JSON.parse(m.data as string) as DeltaJson }, es),
    );
    es.addEventListener('end', (m) => {
      if (this.es !== es) return;
      this.items.push({
        kind: 'end',
        conn,
        data: JSON.parse(m.data as string) as { run_id?: string; last_seq: number },
      });
      this.ended = true;
      this.close();
      this.notify();
    });
    es.addEventListener('error', () => {
      this.errors++;
      this.notify();
    });
    return this;
  }

  private take(item: Received & { id: string }, es: EventSource): void {
    if (this.es !== es) return; // a closed connection's last buffered events
    this.items.push(item);
    this.lastId = item.id;
    this.notify();
  }

  /** Checks the waiters again (after something outside the stream changed). */
  notify(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Resolves when `check` holds (checked at once and after every item). */
  waitFor(check: () => boolean): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve) => {
      const w = () => {
        if (!check()) return;
        this.waiters.delete(w);
        resolve();
      };
      this.waiters.add(w);
    });
  }

  /**
   * The EventSource gave up: the server answered with an error status (a 503 while its database
   * restarts, say), which it does not retry by itself. `open` resumes from the last id.
   */
  get gaveUp(): boolean {
    return this.es !== undefined && this.es.readyState === EventSource.CLOSED;
  }

  /** Items received on the current connection. */
  count(kind?: Received['kind']): number {
    return this.items.filter((i) => i.conn === this.connections && (kind === undefined || i.kind === kind)).length;
  }

  close(): void {
    this.es?.close();
    this.es = undefined;
  }

  get events(): EventJson[] {
    return this.items.flatMap((i) => (i.kind === 'event' ? [i.event] : []));
  }

  get deltas(): Array<Extract<Received, { kind: 'delta' }>> {
    return this.items.filter((i): i is Extract<Received, { kind: 'delta' }> => i.kind === 'delta');
  }
}

/**
 * What a resuming client received, checked against the log: the durable events are exactly the
 * log (same seqs, in order, no gap, no duplicate, same envelopes); ids only go forward; each
 * message's deltas are numbered without gap or repeat and spell a prefix of its final text (all of
 * it when the connection that received the message had seen it streaming).
 */
export function checkAgainstLog(
  items: readonly Received[],
  log: readonly EventJson[],
): {
  messages: number;
  completedAcrossReconnects: number;
  deltas: number;
  abandoned: Array<{ messageId: string; text: string; conns: number }>;
} {
  const problems: string[] = [];
  const events = items.flatMap((i) => (i.kind === 'event' ? [i.event] : []));
  const seqs = events.map((e) => e.seq);
  const want = log.map((e) => e.seq);
  if (JSON.stringify(seqs) !== JSON.stringify(want))
    problems.push(`durable seqs differ from the log:\n got  ${seqs.join(',')}\n want ${want.join(',')}`);
  else {
    for (let i = 0; i < events.length; i++) {
      if (JSON.stringify(events[i]) !== JSON.stringify(log[i]))
        problems.push(`event ${events[i]!.seq} differs from the log's`);
    }
  }
  const ids = items.flatMap((i) => (i.kind === 'end' ? [] : [i.id]));
  for (let i = 1; i < ids.length; i++)
    if (compareIds(ids[i - 1]!, ids[i]!) >= 0) problems.push(`id ${ids[i]} after ${ids[i - 1]}`);

  // Deltas by message.
  const byMessage = new Map<string, Array<Extract<Received, { kind: 'delta' }>>>();
  for (const i of items)
    if (i.kind === 'delta') byMessage.set(i.delta.message_id, [...(byMessage.get(i.delta.message_id) ?? []), i]);
  // Numbering: n counts 1, 2, 3… after the latest durable event (a message's first delta may
  // continue the count of an abandoned attempt's), and again from 1 after a durable event that
  // came while the message streamed: no gap, no repeat.
  const numbering = (id: string, ds: ReadonlyArray<Extract<Received, { kind: 'delta' }>>) => {
    const ids = ds.map((d) => d.id.split('.').map(Number) as [number, number]);
    ids.forEach(([seq, n], i) => {
      const prev = ids[i - 1];
      const ok = prev === undefined ? n >= 1 : seq === prev[0] ? n === prev[1] + 1 : seq > prev[0] && n === 1;
      if (!ok)
        problems.push(`message ${id}: delta ${seq}.${n} after ${prev ? prev.join('.') : 'nothing'}: a gap or a repeat`);
    });
  };
  let completedAcrossReconnects = 0;
  let messages = 0;
  for (const final of events.filter((e) => e.type === 'assistant/message')) {
    messages++;
    const id = messageIdOf(final);
    const ds = byMessage.get(id) ?? [];
    byMessage.delete(id);
    const text = messageText(final);
    const got = ds
      .filter((d) => d.delta.type === 'text/delta')
      .map((d) => d.delta.delta)
      .join('');
    if (!text.startsWith(got))
      problems.push(`message ${id}: the deltas ${JSON.stringify(got.slice(0, 80))}… are not a prefix of its text`);
    numbering(id, ds);
    const conn = items.find((i) => i.kind === 'event' && i.event.seq === final.seq)!.conn;
    if (ds.some((d) => d.conn === conn) && got !== text)
      problems.push(
        `message ${id}: streaming on connection ${conn} until its end, yet its deltas spell ${JSON.stringify(got.slice(-60))} instead of the whole text`,
      );
    if (got === text && new Set(ds.map((d) => d.conn)).size > 1) completedAcrossReconnects++;
  }
  // Messages that never became durable (abandoned by a crash or a retry): their deltas still spell a prefix once.
  for (const [id, ds] of byMessage) numbering(id, ds);
  const abandoned = [...byMessage].map(([messageId, ds]) => ({
    messageId,
    text: ds
      .filter((d) => d.delta.type === 'text/delta')
      .map((d) => d.delta.delta)
      .join(''),
    conns: new Set(ds.map((d) => d.conn)).size,
  }));
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return { messages, completedAcrossReconnects, deltas: items.filter((i) => i.kind === 'delta').length, abandoned };
}

// ---------------------------------------------------------------------------------------------
// Raw readers (comments, slow clients)
// ---------------------------------------------------------------------------------------------

/** An SSE response read as text, through node:http, so a test controls whether it reads at all. */
export interface RawStream {
  res: IncomingMessage;
  text(): string;
  /** Resolves when the server ended or dropped the connection. */
  closed: Promise<void>;
  destroy(): void;
}

export function rawStream(
  url: string,
  headers: Record<string, string> = {},
  o: { read?: boolean } = {},
): Promise<RawStream> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => {
      let text = '';
      const closed = new Promise<void>((done) => {
        res.once('close', () => done());
        res.once('error', () => done());
      });
      res.setEncoding('utf8');
      if (o.read === false) res.pause();
      else res.on('data', (c: string) => (text += c));
      resolve({
        res,
        text: () => text,
        closed,
        destroy: () => {
          req.destroy();
          res.destroy();
        },
      });
    });
    req.once('error', reject);
    req.end();
  });
}

/** The SSE blocks of a text: `{ id, event, data }` for each complete block with data; comments apart. */
export function parseSse(text: string): {
  blocks: Array<{ id?: string; event?: string; data: string }>;
  comments: string[];
} {
  const blocks: Array<{ id?: string; event?: string; data: string }> = [];
  const comments: string[] = [];
  const parts = text.split('\n\n');
  parts.pop(); // incomplete
  for (const part of parts) {
    const b: { id?: string; event?: string; data?: string } = {};
    for (const line of part.split('\n')) {
      if (line.startsWith(':')) comments.push(line.slice(1).trim());
      else if (line.startsWith('id: ')) b.id = line.slice(4);
      else if (line.startsWith('event: ')) b.event = line.slice(7);
      else if (line.startsWith('data: ')) b.data = b.data === undefined ? line.slice(6) : `${b.data}\n${line.slice(6)}`;
    }
    if (b.data !== undefined) blocks.push(b as { id?: string; event?: string; data: string });
  }
  return { blocks, comments };
}

// ---------------------------------------------------------------------------------------------
// A server in a child process (crash tests): this file is also its entry point
// ---------------------------------------------------------------------------------------------

const SELF = fileURLToPath(import.meta.url);

export interface ChildServer {
  child: ChildProcess;
  url: string;
  port: number;
  exited: Promise<void>;
  stderr(): string;
}

interface ChildOptions {
  path: string;
  port?: number;
  script: LongScript;
  leaseMs: number;
  /** Holds the model's stream there for good: the process is sure to die in the middle of that message. */
  hold?: { step: number; chunk: number };
}

/** Starts `longAgent(script)` behind a server in a child process on a database file. */
export function spawnServer(o: ChildOptions): Promise<ChildServer> {
  const child = spawn(process.execPath, [SELF, 'serve', JSON.stringify(o)], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    child.once('message', (m: { url: string; port: number }) =>
      resolve({ child, url: m.url, port: m.port, exited, stderr: () => stderr }),
    );
    void exited.then(() => reject(new Error(`the server process exited before it listened: ${stderr}`)));
  });
}

if (process.argv[1] === SELF && process.argv[2] === 'serve') {
  const o = JSON.parse(process.argv[3]!) as ChildOptions;
  const gate = new Gate();
  if (o.hold) gate.hold(o.hold.step, o.hold.chunk);
  const store = openSqliteStore({ path: o.path });
  const server = await startServer({
    store,
    config: configOf([longAgent(o.script, { gate })]),
    port: o.port ?? 0,
    workers: 4,
    version: 'test',
    leaseMs: o.leaseMs,
  });
  process.send!({ url: server.url, port: server.port });
}
