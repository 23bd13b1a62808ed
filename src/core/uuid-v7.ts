/** The ASCII codes of the two lowercase hex digits of each byte value, high digit in the high byte. */
const HEX = Uint16Array.from({ length: 256 }, (_, b) => {
  const s = b.toString(16).padStart(2, '0');
  return (s.charCodeAt(0) << 8) | s.charCodeAt(1);
});
const DASH = 0x2d;
/** Where the dashes go in the 36 characters of a UUID. */
const DASHES = [8, 13, 18, 23];
/** Where each of the 16 bytes' two digits go. */
const AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
/** The characters of the UUID being written: read out as one flat string, one allocation per id. */
const text = Buffer.alloc(36);
for (const d of DASHES) text[d] = DASH;

function put(i: number, byte: number): void {
  const h = HEX[byte & 0xff]!;
  const at = AT[i]!;
  text[at] = h >> 8;
  text[at + 1] = h & 0xff;
}

/**
 * The UUIDv7 of a time in ms, a 32-bit counter and random bytes, laid out as the `uuid` package's
 * `v7({ msecs, seq, random })` lays it out (a test compares them): 48 bits of time; the version (7)
 * and the counter's top 12 bits; the variant and its next 14 bits; its low 6 bits and 2 random
 * bits (`random[at + 10]`); 5 random bytes (`random[at + 11 … at + 15]`).
 */
export function uuidV7(ms: number, counter: number, random: Uint8Array, at = 0): string {
  put(0, ms / 0x10000000000);
  put(1, ms / 0x100000000);
  put(2, ms / 0x1000000);
  put(3, ms / 0x10000);
  put(4, ms / 0x100);
  put(5, ms);
  put(6, 0x70 | ((counter >>> 28) & 0x0f));
  put(7, counter >>> 20);
  put(8, 0x80 | ((counter >>> 14) & 0x3f));
  put(9, counter >>> 6);
  put(10, ((counter << 2) & 0xff) | (random[at + 10]! & 0x03));
  for (let i = 11; i < 16; i++) put(i, random[at + i]!);
  return text.toString('latin1', 0, 36);
}
