import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

// One getrandom call per 256 ids instead of one per id: ids are minted on the step hot path.
const POOL = 16 * 256;
const pool = new Uint8Array(POOL);
let offset = POOL;

/** A unique id that sorts by creation time (UUIDv7), so ids double as a coarse clock. */
export function newId(): string {
  if (offset >= POOL) {
    randomFillSync(pool);
    offset = 0;
  }
  const random = pool.subarray(offset, offset + 16);
  offset += 16;
  return v7({ random });
}
