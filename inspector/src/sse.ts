import { authHeaders } from './api.ts';

/** One server-sent event: `message` (a durable event, id = seq), `delta` (id = seq.n) or `end`. */
export interface StreamItem {
  id: string | undefined;
  event: string;
  data: string;
}

/**
 * Follows one of the API's SSE streams (`/v1/sessions/{id}/stream`, `/v1/runs/{id}/stream`).
 * EventSource cannot send an Authorization header, so this reads the stream with fetch. When the
 * connection drops it reconnects with `Last-Event-ID`: the server resumes exactly after the last
 * item seen. Stops when `signal` aborts, or after an `end` event (a run stream's last).
 */
export async function follow(
  path: string,
  onItem: (item: StreamItem) => void,
  signal: AbortSignal,
  after?: string,
): Promise<void> {
  let lastId = after;
  let failures = 0;
  while (!signal.aborted) {
    try {
      const res = await fetch(path, {
        headers: { ...authHeaders(), accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) },
        signal,
      });
      if (!res.ok || !res.body) throw new Error(`stream ${path}: ${res.status}`);
      failures = 0;
      let ended = false;
      for await (const item of parse(res.body, signal)) {
        if (item.id !== undefined) lastId = item.id;
        onItem(item);
        if (item.event === 'end') ended = true;
      }
      if (ended) return;
    } catch (e) {
      if (signal.aborted) return;
      failures++;
      if (failures > 1) console.warn('keel inspector:', (e as Error).message);
    }
    // Reconnect, a little later each time it fails (at most every 5 s).
    await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** failures)));
  }
}

async function* parse(body: ReadableStream<Uint8Array>, signal: AbortSignal): AsyncGenerator<StreamItem> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const stop = () => void reader.cancel().catch(() => {});
  signal.addEventListener('abort', stop, { once: true });
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + (buffer[cut] === '\r' ? 4 : 2));
        let id: string | undefined;
        let event = 'message';
        const data: string[] = [];
        for (const line of block.split(/\r?\n/)) {
          if (line === '' || line.startsWith(':')) continue;
          const i = line.indexOf(':');
          const field = i < 0 ? line : line.slice(0, i);
          const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
          if (field === 'id') id = value;
          else if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
        }
        if (data.length > 0) yield { id, event, data: data.join('\n') };
      }
    }
  } finally {
    signal.removeEventListener('abort', stop);
  }
}
