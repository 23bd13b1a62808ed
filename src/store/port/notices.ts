/** The feed transport role of the port: change notices across connections and nodes, broadcasts, and the barrier on them. */
import type { JsonObject } from './json.ts';

/**
 * What a change notice may say: a commit appended to this session, up to this seq (`own`: every
 * commit to the session since its previous notice was this store instance's, which its caller
 * knows of already; a backend that cannot tell leaves it out); or a message another node broadcast
 * about the session (see `NoticeOps.broadcast`).
 */
export type StoreChange =
  | { sessionId: string; lastSeq: number; own?: true; message?: undefined }
  | { sessionId: string; message: JsonObject; lastSeq?: undefined; own?: undefined };

/**
 * The notices namespace of a store (`store.notices`): each member is absent when the backend
 * cannot do it (a store with no other node has no `broadcast`).
 */
export interface NoticeOps {
  /**
   * Calls `listener` soon after another connection (another process, another node) committed,
   * best effort, for as long as it is registered; returns the unregistration. With a `change`, the
   * commit appended to that session up to that seq (a store that relays broadcasts tells of this
   * instance's own commits too, in the same order as the others'); without one, anything may have
   * changed. What changed is read from the store. A store that cannot tell leaves it out.
   */
  changes?(listener: (change?: StoreChange) => void): () => void;
  /**
   * Tells the other nodes' `changes` listeners a short-lived message about a session (the live
   * feed's token deltas), stored nowhere: best effort, in the order sent, never to this store
   * instance itself, and before the notice of any commit this instance makes after it (a reader
   * that heard of a commit has heard the deltas streamed before it). PostgreSQL relays it by NOTIFY,
   * a SQLite file by its local bus (ADR-0035); a store with no other node (SQLite's `:memory:`)
   * leaves it out.
   */
  broadcast?(sessionId: string, message: JsonObject): void;
  /**
   * Resolves once every notice of what was committed (and broadcast) before the call, by any node,
   * has reached this instance's `changes` listeners: a barrier through the backend's own channel,
   * whatever the lag. Given by a store that has `broadcast`; it may never resolve while the
   * store's connection for notices is down (a caller bounds its wait).
   */
  caughtUp?(): Promise<void>;
}
