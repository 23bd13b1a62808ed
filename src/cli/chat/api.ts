import { randomUUID } from 'node:crypto';
import type { runJson, sessionJson } from '../../server/schemas.ts';
import type { SessionEventDataMap, SessionEventType } from '../../session/index.ts';

/** What the HTTP API sends (types only: the chat client talks to a server, not to the library). */
export type SessionJson = ReturnType<typeof sessionJson>;
export type RunJson = ReturnType<typeof runJson>;
export type WireEvent = {
  [K in SessionEventType]: {
    id: string;
    session_id: string;
    seq: number;
    type: K;
    v: number;
    time: string;
    run_id?: string;
    turn?: number;
    step?: number;
    entry: boolean;
    parent_id?: string;
    data: SessionEventDataMap[K];
  };
}[SessionEventType];
export type WireDelta = {
  type: 'text/delta' | 'reasoning/delta' | 'tool-input/delta';
  turn: number;
  step: number;
  message_id: string;
  delta: string;
  tool_call_id?: string;
  tool_name?: string;
};

/** A problem+json answer of the API. */
export class ApiError extends Error {
  readonly status: number;
  /** The problem type's last segment: `run_busy`, `not_found`, … */
  readonly type: string;
  readonly body: Record<string, unknown>;
  constructor(status: number, body: Record<string, unknown>) {
    const type = typeof body.type === 'string' ? body.type.replace(/^.*\//, '') : `http_${status}`;
    super(typeof body.detail === 'string' ? body.detail : `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.type = type;
    this.body = body;
  }
}

/** The server could not be reached (down, restarting, wrong URL). */
export class NetworkError extends Error {
  constructor(url: string, cause: unknown) {
    const c = (cause as { cause?: { code?: string; message?: string } })?.cause;
    super(`cannot reach the Keel server at ${url}: ${c?.code ?? c?.message ?? (cause as Error).message}`, { cause });
    this.name = 'NetworkError';
  }
}

export interface ApiOptions {
  url: string;
  key?: string;
  fetch?: typeof fetch;
}

/** The few API calls the chat client makes; `request` for the other commands that talk to a server (keel webhooks). */
export class Api {
  readonly url: string;
  private readonly key: string | undefined;
  private readonly fetchFn: typeof fetch;

  constructor(o: ApiOptions) {
    this.url = o.url.replace(/\/+$/, '');
    this.key = o.key;
    this.fetchFn = o.fetch ?? fetch;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...extra, ...(this.key ? { authorization: `Bearer ${this.key}` } : {}) };
  }

  async request<T>(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
    o: { idempotencyKey?: string } = {},
  ): Promise<T> {
    let res: Response;
    try {
      res = await this.fetchFn(`${this.url}${path}`, {
        method,
        headers: this.headers({
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          // POSTs that change state may be retried after a lost answer: the server replays the first.
          ...(o.idempotencyKey ? { 'idempotency-key': o.idempotencyKey } : {}),
        }),
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (e) {
      throw new NetworkError(this.url, e);
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = { detail: text.slice(0, 200) };
    }
    if (!res.ok) throw new ApiError(res.status, (parsed ?? {}) as Record<string, unknown>);
    return parsed as T;
  }

  createSession(agent?: string): Promise<SessionJson> {
    return this.request('POST', '/v1/sessions', agent ? { agent } : {});
  }

  getSession(id: string): Promise<SessionJson> {
    return this.request('GET', `/v1/sessions/${encodeURIComponent(id)}`);
  }

  /** Runs of a session, oldest first (the first 1000). */
  async runs(sessionId: string): Promise<RunJson[]> {
    return (
      await this.request<{ data: RunJson[] }>('GET', `/v1/sessions/${encodeURIComponent(sessionId)}/runs?limit=1000`)
    ).data;
  }

  send(
    sessionId: string,
    content: string,
    agent?: string,
  ): Promise<{ outcome: string; message: { id: string }; run: RunJson }> {
    return this.request('POST', `/v1/sessions/${encodeURIComponent(sessionId)}/messages`, {
      content,
      if_busy: 'reject',
      ...(agent ? { agent } : {}),
    });
  }

  getRun(id: string): Promise<RunJson> {
    return this.request('GET', `/v1/runs/${encodeURIComponent(id)}`);
  }

  cancel(id: string): Promise<RunJson> {
    return this.request('POST', `/v1/runs/${encodeURIComponent(id)}/cancel`);
  }

  /** Pass the same `idempotencyKey` when retrying after a lost answer. */
  decide(
    runId: string,
    approvalId: string,
    decision: 'approve' | 'deny',
    o: { reason?: string; idempotencyKey?: string } = {},
  ): Promise<RunJson> {
    const body = { decision, ...(o.reason ? { reason: o.reason } : {}) };
    return this.request(
      'POST',
      `/v1/runs/${encodeURIComponent(runId)}/approvals/${encodeURIComponent(approvalId)}`,
      body,
      { idempotencyKey: o.idempotencyKey ?? randomUUID() },
    );
  }

  answer(runId: string, toolCallId: string, answers: unknown, o: { idempotencyKey?: string } = {}): Promise<RunJson> {
    return this.request(
      'POST',
      `/v1/runs/${encodeURIComponent(runId)}/input`,
      { answers, tool_call_id: toolCallId },
      { idempotencyKey: o.idempotencyKey ?? randomUUID() },
    );
  }

  streamUrl(sessionId: string, after: string | undefined): string {
    return `${this.url}/v1/sessions/${encodeURIComponent(sessionId)}/stream${after ? `?after=${encodeURIComponent(after)}` : ''}`;
  }
}
