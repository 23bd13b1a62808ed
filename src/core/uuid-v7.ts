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
