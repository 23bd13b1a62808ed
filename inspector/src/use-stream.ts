import { follow, type FollowTarget, type KeelEvent } from 'keel/client';
import { useEffect, useRef, useState } from 'preact/hooks';
import { keel } from './keel.ts';

export interface LiveState {
  /** Durable events that arrived over the stream, in order. */
  events: KeelEvent[];
  /** Text (and reasoning) of messages still being streamed, by message id; gone once the message is committed. */
  streaming: Map<string, { text: string; reasoning: string }>;
  /** The run stream said the run ended. */
  ended: boolean;
  /** The connection dropped: `follow` is connecting again, to resume after the last item it had. */
  reconnecting: boolean;
  /** Why the stream ended early (a problem: the session is gone, the key was refused). */
  error: unknown;
}

const initial = (): LiveState => ({
  events: [],
  streaming: new Map(),
  ended: false,
  reconnecting: false,
  error: undefined,
});

/**
 * Follows a session's or a run's stream (keel/client's `follow`, which resumes by itself after a
 * dropped connection) from `after` (the seq the page already read; none: from the start), and
 * calls `onEvent` for each durable event: the page reloads what it shows from the API. Nothing
 * while `target` is null.
 */
export function useStream(target: FollowTarget | null, onEvent: (e: KeelEvent) => void, after?: number): LiveState {
  const [state, setState] = useState<LiveState>(initial);
  // Read at each event: a new function at each render must not reconnect the stream.
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const key = target === null ? null : 'runId' in target ? `run ${target.runId}` : `session ${target.sessionId}`;
  useEffect(() => {
    if (target === null) return;
    setState(initial());
    const stop = new AbortController();
    const items = follow(keel(), target, {
      ...(after !== undefined ? { after: String(after) } : {}),
      signal: stop.signal,
      onConnection: (c) => setState((s) => ({ ...s, reconnecting: c.state === 'lost' })),
    });
    void (async () => {
      try {
        for await (const item of items) {
          if (item.kind === 'end') setState((s) => ({ ...s, ended: true }));
          else if (item.kind === 'delta') {
            const d = item.delta;
            if (d.type === 'tool-input/delta') continue;
            setState((s) => {
              const streaming = new Map(s.streaming);
              const m = streaming.get(d.message_id) ?? { text: '', reasoning: '' };
              streaming.set(
                d.message_id,
                d.type === 'text/delta' ? { ...m, text: m.text + d.delta } : { ...m, reasoning: m.reasoning + d.delta },
              );
              return { ...s, streaming };
            });
          } else {
            const e = item.event;
            setState((s) => {
              const streaming = new Map(s.streaming);
              if (e.type === 'assistant/message')
                streaming.delete((e.data as { message?: { id?: string } } | undefined)?.message?.id ?? '');
              return { ...s, events: [...s.events, e].slice(-500), streaming };
            });
            handler.current(e);
          }
        }
      } catch (error) {
        if (!stop.signal.aborted) setState((s) => ({ ...s, reconnecting: false, error }));
      }
    })();
    return () => stop.abort();
  }, [key, after]);
  return state;
}
