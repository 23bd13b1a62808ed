import { useEffect, useRef, useState } from 'preact/hooks';
import { follow } from './sse.ts';
import type { Delta, SessionEvent } from './types.ts';

export interface LiveState {
  /** Durable events that arrived over the stream, in order. */
  events: SessionEvent[];
  /** Text (and reasoning) of messages still being streamed, by message id; gone once the message is committed. */
  streaming: Map<string, { text: string; reasoning: string }>;
  /** The run stream said the run ended. */
  ended: boolean;
}

/**
 * Follows a session's or a run's SSE stream from `after` (the seq the page already read) and
 * calls `onEvent` for each durable event: the page reloads what it shows from the API.
 */
export function useStream(
  path: string | null,
  after: number | undefined,
  onEvent: (e: SessionEvent) => void,
): LiveState {
  const [state, setState] = useState<LiveState>({ events: [], streaming: new Map(), ended: false });
  // Read at each event: a new function at each render must not reconnect the stream.
  const handler = useRef(onEvent);
  handler.current = onEvent;
  useEffect(() => {
    if (path === null || after === undefined) return;
    setState({ events: [], streaming: new Map(), ended: false });
    const stop = new AbortController();
    void follow(
      path,
      (item) => {
        if (item.event === 'end') return setState((s) => ({ ...s, ended: true }));
        if (item.event === 'delta') {
          const d = JSON.parse(item.data) as Delta;
          if (d.type === 'tool-input/delta') return;
          return setState((s) => {
            const streaming = new Map(s.streaming);
            const m = streaming.get(d.message_id) ?? { text: '', reasoning: '' };
            streaming.set(
              d.message_id,
              d.type === 'text/delta' ? { ...m, text: m.text + d.delta } : { ...m, reasoning: m.reasoning + d.delta },
            );
            return { ...s, streaming };
          });
        }
        const e = JSON.parse(item.data) as SessionEvent;
        setState((s) => {
          const streaming = new Map(s.streaming);
          if (e.type === 'assistant/message')
            streaming.delete((e.data as { message?: { id?: string } }).message?.id ?? '');
          return { ...s, events: [...s.events, e].slice(-500), streaming };
        });
        handler.current(e);
      },
      stop.signal,
      String(after),
    );
    return () => stop.abort();
  }, [path, after]);
  return state;
}
