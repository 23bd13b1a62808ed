import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local HTTP server that speaks a model provider's streaming wire format from a script,
 * so tests can drive the real provider packages (`@ai-sdk/openai`, `@ai-sdk/anthropic`)
 * end to end without a network. It records every request it receives.
 */

/** One server-sent event. `data` is sent verbatim when a string, as JSON otherwise. */
export interface SseEvent {
  event?: string;
  data: unknown;
  /** Milliseconds to wait before writing this event. */
  delayMs?: number;
}

export type WireResponse =
  | {
      kind: 'sse';
      events: SseEvent[];
      headers?: Record<string, string>;
      /**
       * What happens after the last event:
       * - `end` (default): the response ends cleanly;
       * - `hang`: the response stays open until the client goes away (or the server closes);
       * - `drop`: the connection is destroyed without ending the response.
       */
      after?: 'end' | 'hang' | 'drop';
    }
  | { kind: 'error'; status: number; body: unknown; headers?: Record<string, string> };

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The body parsed as JSON (undefined when it is not JSON). */
  body: unknown;
  rawBody: string;
  /** How many scripted events were written to the client. */
  eventsWritten: number;
  /**
   * True once the connection closed before the response ended: the client went away (an abort
   * or a cancelled body), or the script dropped it.
   */
  closedByClient: boolean;
  /** Resolves when the response is over, however it ended. */
  closed: Promise<void>;
  /** Resolves once every scripted event has been written (before a hang or drop). */
  allEventsWritten: Promise<void>;
}

export interface WireServer {
  /** e.g. `http://127.0.0.1:53124`; append the provider's API prefix (`/v1`). */
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Queues responses; each incoming request takes the next one in order. */
  respond(...responses: WireResponse[]): void;
  /** Forgets recorded requests and unused responses. */
  reset(): void;
  close(): Promise<void>;
}

export function sse(
  events: SseEvent[],
  options: { headers?: Record<string, string>; after?: 'end' | 'hang' | 'drop' } = {},
): WireResponse {
  return { kind: 'sse', events, ...options };
}

export function httpError(status: number, body: unknown, headers?: Record<string, string>): WireResponse {
  return { kind: 'error', status, body, ...(headers ? { headers } : {}) };
}

function encodeEvent(e: SseEvent): string {
  const data = typeof e.data === 'string' ? e.data : JSON.stringify(e.data);
  const lines = data
    .split('\n')
    .map((l) => `data: ${l}`)
    .join('\n');
  return `${e.event !== undefined ? `event: ${e.event}\n` : ''}${lines}\n\n`;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function wait(ms: number, res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      res.off('close', done);
      resolve();
    }
    res.once('close', done);
  });
}

async function serve(
  res: ServerResponse,
  response: WireResponse | undefined,
  rec: RecordedRequest,
  markWritten: () => void,
): Promise<void> {
  if (!response) {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: { message: `wire-server: no scripted response for ${rec.method} ${rec.path}`, type: 'wire_server' },
      }),
    );
    markWritten();
    return;
  }
  if (response.kind === 'error') {
    res.writeHead(response.status, { 'content-type': 'application/json', ...response.headers });
    res.end(typeof response.body === 'string' ? response.body : JSON.stringify(response.body));
    markWritten();
    return;
  }
  res.socket?.setNoDelay(true);
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    ...response.headers,
  });
  res.flushHeaders();
  for (const e of response.events) {
    if (e.delayMs) await wait(e.delayMs, res);
    if (res.destroyed || res.writableEnded) return;
    // Waiting for the write to be handed to the socket keeps a following `drop` from discarding it.
    await new Promise<void>((resolve) => res.write(encodeEvent(e), () => resolve()));
    rec.eventsWritten++;
  }
  markWritten();
  switch (response.after ?? 'end') {
    case 'end':
      res.end();
      break;
    case 'drop':
      res.socket?.destroy();
      break;
    case 'hang':
      // Left open: the client aborting (or the server closing) ends it.
      break;
  }
}

export async function startWireServer(): Promise<WireServer> {
  const queue: WireResponse[] = [];
  const requests: RecordedRequest[] = [];

  const server: Server = createServer((req, res) => {
    let resolveClosed!: () => void;
    let resolveWritten!: () => void;
    const rec: RecordedRequest = {
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body: undefined,
      rawBody: '',
      eventsWritten: 0,
      closedByClient: false,
      closed: new Promise<void>((r) => (resolveClosed = r)),
      allEventsWritten: new Promise<void>((r) => (resolveWritten = r)),
    };
    res.on('close', () => {
      rec.closedByClient = !res.writableFinished;
      resolveClosed();
    });
    const response = queue.shift();
    requests.push(rec);
    readBody(req)
      .then((raw) => {
        rec.rawBody = raw;
        try {
          rec.body = raw ? JSON.parse(raw) : undefined;
        } catch {
          rec.body = undefined;
        }
        return serve(res, response, rec, resolveWritten);
      })
      .catch(() => res.destroy());
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    respond(...responses) {
      queue.push(...responses);
    },
    reset() {
      queue.length = 0;
      requests.length = 0;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
