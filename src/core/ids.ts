import { randomFillSync } from 'node:crypto';

// One getrandom call per 256 ids instead of one per id: ids are minted on the step hot path.
const POOL = 16 * 256;
const pool = new Uint8Array(POOL);
let offset = POOL;
// RFC 9562 method 1: a counter seeded at random each millisecond keeps ids in creation order
// within a millisecond too.
let lastMs = -Infinity;
let seq = 0;

/** Two lowercase hex digits for each byte value. */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

/**
 * The UUIDv7 of a time in ms, a 32-bit counter and random bytes, laid out as the `uuid` package's
 * `v7({ msecs, seq, random })` lays it out (a test compares them): 48 bits of time; the version (7)
 * and the counter's top 12 bits; the variant and its next 14 bits; its low 6 bits and 2 random
 * bits (`random[at + 10]`); 5 random bytes (`random[at + 11 … at + 15]`).
 */
export function uuidV7(ms: number, counter: number, random: Uint8Array, at = 0): string {
  const b10 = ((counter << 2) & 0xff) | (random[at + 10]! & 0x03);
  return (
    HEX[(ms / 0x10000000000) & 0xff]! +
    HEX[(ms / 0x100000000) & 0xff]! +
    HEX[(ms / 0x1000000) & 0xff]! +
    HEX[(ms / 0x10000) & 0xff]! +
    '-' +
    HEX[(ms / 0x100) & 0xff]! +
    HEX[ms & 0xff]! +
    '-' +
    HEX[0x70 | ((counter >>> 28) & 0x0f)]! +
    HEX[(counter >>> 20) & 0xff]! +
    '-' +
    HEX[0x80 | ((counter >>> 14) & 0x3f)]! +
    HEX[(counter >>> 6) & 0xff]! +
    '-' +
    HEX[b10]! +
    HEX[random[at + 11]!]! +
    HEX[random[at + 12]!]! +
    HEX[random[at + 13]!]! +
    HEX[random[at + 14]!]! +
    HEX[random[at + 15]!]!
  );
}

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
