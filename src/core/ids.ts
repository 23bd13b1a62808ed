import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

// One getrandom call per 256 ids instead of one per id: ids are minted on the step hot path.
const POOL = 16 * 256;
const pool = new Uint8Array(POOL);
let offset = POOL;
// RFC 9562 method 1: a counter seeded at random each millisecond keeps ids in creation order
// within a millisecond too (uuid does this itself only when it draws the randomness).
let lastMs = -Infinity;
let seq = 0;

/** A unique id that sorts by creation time (UUIDv7, monotonic within this process). */
export function newId(): string {
  if (offset >= POOL) {
    randomFillSync(pool);
    offset = 0;
  }
  const random = pool.subarray(offset, offset + 16);
  offset += 16;
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
  } else {
    seq = (seq + 1) | 0;
    if (seq === 0) lastMs++;
  }
  return v7({ random, msecs: lastMs, seq });
}
