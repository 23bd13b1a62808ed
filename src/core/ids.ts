import { randomFillSync } from 'node:crypto';
import { uuidV7 } from './uuid-v7.ts';

// One getrandom call per 256 ids instead of one per id: ids are minted on the step hot path.
const POOL = 16 * 256;
const pool = new Uint8Array(POOL);
let offset = POOL;
// RFC 9562 method 1: a counter seeded at random each millisecond keeps ids in creation order
// within a millisecond too.
let lastMs = -Infinity;
let seq = 0;

/** A unique id that sorts by creation time (UUIDv7, monotonic within this process). */
export function newId(): string {
  if (offset >= POOL) {
    randomFillSync(pool);
    offset = 0;
  }
  const at = offset;
  offset += 16;
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    seq = ((pool[at + 6]! & 0x7f) << 24) | (pool[at + 7]! << 16) | (pool[at + 8]! << 8) | pool[at + 9]!;
  } else {
    seq = (seq + 1) | 0;
    if (seq === 0) lastMs++;
  }
  // Written straight into the string: no view, byte array or options object per id.
  return uuidV7(lastMs, seq, pool, at);
}
