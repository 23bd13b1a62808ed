/** Idempotency keys recorded with a message's effect (a send or a steer), in the transaction of the effect. */
import { StoreError, type JsonObject, type StoreOps } from '../../store/index.ts';

/**
 * An idempotency key the caller wants recorded with the effect of a send, in the same
 * transaction: a retry after a crash between the effect and the response finds the effect.
 */
export interface IdempotencyClaim {
  tenant: string;
  key: string;
  /** What the request was (see `IdempotencyRecord.fingerprint`). */
  fingerprint: string;
}

/** What a send recorded under its idempotency key (the body of a status-0 record). */
export interface RecordedSend {
  outcome: 'created' | 'enqueued' | 'steered';
  message_id: string;
  run_id: string;
}

/** Throws when a request already took the key (its effect, or its answer, is recorded). */
export async function refuseTakenKey(
  store: { idempotency: Pick<StoreOps['idempotency'], 'get'> },
  claim: IdempotencyClaim,
): Promise<void> {
  if (await store.idempotency.get(claim.tenant, claim.key)) {
    throw new StoreError(
      'idempotency_in_progress',
      `a request with Idempotency-Key ${JSON.stringify(claim.key)} was already accepted`,
    );
  }
}

/**
 * Writes a message's effect (a send or a steer) under its key. Another request that recorded an effect under the same
 * key first (in another process) wins: this transaction rolls back, so nothing is sent twice.
 */
export async function recordEffect(
  tx: StoreOps,
  claim: IdempotencyClaim,
  effect: RecordedSend | JsonObject,
): Promise<void> {
  const body = JSON.stringify(effect);
  const stored = await tx.idempotency.put({ ...claim, status: 0, body, createdAt: Date.now() });
  if (stored.status !== 0 || stored.body !== body) {
    throw new StoreError(
      'idempotency_in_progress',
      `a request with Idempotency-Key ${JSON.stringify(claim.key)} was already accepted`,
    );
  }
}
