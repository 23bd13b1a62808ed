import { EventSource } from 'eventsource';
import type { Api, WireDelta, WireEvent } from './api.ts';
import type { StreamItem } from './render.ts';

export interface StreamHandlers {
  item(item: StreamItem): void;
  /**
   * `open`: connected (again); `lost`: the connection dropped, reconnecting by itself with the
   * last event id; `failed`: the server refused the stream (no such session, bad key).
   */
  state(s: 'open' | 'lost' | 'failed', detail?: string): void;
}

/**
 * A session's SSE stream that survives server restarts: EventSource reconnects with
 * Last-Event-ID (`seq` or `seq.n`), so the server sends exactly what this client has not seen.
 * If the server answers a reconnect with an error status it is retried as well (a restarting
 * server), except for 4xx answers, which are final.
 */
export class SessionStream {
  private es: EventSource | undefined;
  private lastId: string | undefined;
  private closed = false;
  private lost = false;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly api: Api;
  private readonly sessionId: string;
  private readonly h: StreamHandlers;

  constructor(api: Api, sessionId: string, after: string | undefined, h: StreamHandlers) {
    this.api = api;
    this.sessionId = sessionId;
    this.h = h;
    this.lastId = after;
    this.connect();
  }

  /** The id of the last item received. */
  get last(): string | undefined {
    return this.lastId;
  }

  private connect(): void {
    const es = new EventSource(this.api.streamUrl(this.sessionId, this.lastId), {
      fetch: (url, init) => fetch(url, { ...init, headers: { ...init.headers, ...this.api.headers() } }),
    });
    this.es = es;
    es.addEventListener('open', () => {
      if (this.lost) this.h.state('open');
      this.lost = false;
    });
    es.addEventListener('message', (ev) => {
      this.lastId = ev.lastEventId || this.lastId;
      let event: WireEvent;
      try {
        event = JSON.parse(ev.data as string) as WireEvent;
      } catch {
        return;
      }
      this.h.item({ kind: 'event', id: ev.lastEventId, event });
    });
    es.addEventListener('delta', (ev) => {
      this.lastId = ev.lastEventId || this.lastId;
      let delta: WireDelta;
      try {
        delta = JSON.parse(ev.data as string) as WireDelta;
      } catch {
        return;
      }
      this.h.item({ kind: 'delta', id: ev.lastEventId, delta });
    });
    es.addEventListener('error', (ev) => {
      if (this.closed) return;
      const code = (ev as { code?: number }).code;
      if (es.readyState === es.CLOSED) {
        if (code !== undefined && code >= 400 && code < 500) {
          this.h.state('failed', `${(ev as { message?: string }).message ?? 'refused'}`);
          return;
        }
        // Failed for good by EventSource's rules (e.g. a 5xx while the server restarts): start over from the last id.
        this.retryTimer = setTimeout(() => {
          if (!this.closed) this.connect();
        }, 1000);
      }
      if (!this.lost) {
        this.lost = true;
        this.h.state('lost', (ev as { message?: string }).message);
      }
    });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.es?.close();
  }
}
