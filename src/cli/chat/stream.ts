import { KeelProblem, type KeelClient } from '../../client/index.ts';
import type { StreamItem } from './render.ts';
import type { WireEvent } from './wire.ts';

export interface StreamHandlers {
  item(item: StreamItem): void;
  /**
   * `open`: connected again after `lost`; `lost`: the connection dropped, reconnecting by itself
   * with the last event id; `failed`: the server refused the stream (no such session, bad key).
   */
  state(s: 'open' | 'lost' | 'failed', detail?: string): void;
}

/**
 * A session's SSE stream that survives server restarts: keel/client's `follow()` reconnects with
 * the last event id (`seq` or `seq.n`), so the server sends exactly what this client has not seen.
 * A network error or a 5xx (a restarting server) is retried; a 4xx answer is final.
 */
export class SessionStream {
  private readonly stop = new AbortController();
  private lastId: string | undefined;
  private lost = false;

  constructor(client: KeelClient, sessionId: string, after: string | undefined, h: StreamHandlers) {
    this.lastId = after;
    const items = client.sessions.follow(sessionId, {
      ...(after !== undefined ? { after } : {}),
      signal: this.stop.signal,
      retry: { initialDelayMs: 250, maxDelayMs: 2000 },
      onConnection: (c) => {
        if (c.state === 'open' && this.lost) h.state('open');
        else if (c.state === 'lost' && !this.lost) h.state('lost', (c.error as Error).message);
        this.lost = c.state === 'lost';
      },
    });
    void (async () => {
      try {
        for await (const item of items) {
          if (item.kind === 'end') continue;
          this.lastId = item.id;
          if (item.kind === 'event') h.item({ kind: 'event', id: item.id, event: item.event as WireEvent });
          else h.item({ kind: 'delta', id: item.id, delta: item.delta });
        }
      } catch (e) {
        if (!this.stop.signal.aborted)
          h.state('failed', e instanceof KeelProblem ? `${e.message} (${e.type})` : (e as Error).message);
      }
    })();
  }

  /** The id of the last item received. */
  get last(): string | undefined {
    return this.lastId;
  }

  close(): void {
    this.stop.abort();
  }
}
