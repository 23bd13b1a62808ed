import type { StoreOps } from '../store/index.ts';
import type { Claimed } from './lifecycle/types.ts';

/**
 * A worker slot taken for a claim made in another transaction (a message's, see
 * `Worker.offerSlot`; a turn end's, see `Worker.handOver`): `claim` inside that transaction, then,
 * once it committed, `start` with what it claimed; or `release` when it did not commit or claimed
 * nothing.
 */
export interface OfferedSlot {
  claim(tx: StoreOps): Promise<Claimed | undefined>;
  start(claimed: Claimed): void;
  release(): void;
}
