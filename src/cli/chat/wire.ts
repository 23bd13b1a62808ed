import type { StreamDelta } from '../../client/index.ts';
import type { SessionEventDataMap, SessionEventType } from '../../session/index.ts';

/**
 * A durable event as the API sends it, its `data` typed by its `type` (the library's event map:
 * the chat talks to a server, and knows the events it renders). keel/client types `data` as unknown.
 */
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

/** A model delta as the API streams it. */
export type WireDelta = StreamDelta;
