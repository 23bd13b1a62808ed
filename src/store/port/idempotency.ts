/** Idempotency records: the first response to a request key, replayed to its retries. */

export interface IdempotencyRecord {
  tenant: string;
  key: string;
  /** What the first request was (method, path, body hash): a reuse must match it. */
  fingerprint: string;
  /**
   * The HTTP status of the response, or 0: the request's effect committed (the record was written
   * in the effect's own transaction) but its response was not recorded yet. `body` is then the
   * effect's JSON (what a retry needs to answer the same), not a response.
   */
  status: number;
  body: string;
  createdAt: number;
}

/** The idempotency namespace of the port (`store.idempotency`). */
export interface IdempotencyOps {
  get(tenant: string, key: string): Promise<IdempotencyRecord | undefined>;
  /**
   * Stores the first response for a key; returns the one already stored if another request won.
   * A record with status 0 (an effect committed without its response, see `IdempotencyRecord`)
   * is completed by the first put of a response with the same fingerprint.
   */
  put(r: IdempotencyRecord): Promise<IdempotencyRecord>;
  /** Forgets records older than `before`. */
  prune(before: number): Promise<number>;
}
