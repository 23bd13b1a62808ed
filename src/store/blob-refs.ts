/**
 * The content hashes a stretch of event JSON refers to (blob references, header hashes): every SQL
 * backend records them per session, so that erasing a session removes the blobs only it used.
 * A hash is `sha256:` and 64 lowercase hex digits, anywhere in the text, each reported once in
 * the order first seen.
 */
export function blobHashesIn(json: string): string[] {
  let at = json.indexOf(PREFIX);
  if (at < 0) return [];
  // Scanned by hand: every append passes its row here, and a step's row names the system prompt's
  // and tools' hashes. A global regex and a Set took ~1.5× as long for a step's row.
  const out: string[] = [];
  while (at >= 0) {
    const start = at + PREFIX.length;
    let end = start;
    while (end < json.length && end - start < HEX_DIGITS && isHex(json.charCodeAt(end))) end++;
    if (end - start === HEX_DIGITS) {
      const hash = own(json.slice(at, end));
      if (!out.includes(hash)) out.push(hash);
      at = json.indexOf(PREFIX, end);
    } else at = json.indexOf(PREFIX, at + 1);
  }
  return out;
}

/**
 * A hash as a string of its own. A slice of the text is a view of it to V8 (a sliced string) and
 * keeps the whole text alive: the SQLite store keeps the hashes each session refers to, and each
 * kept a 2 KB event row with it. The same few hashes (an agent's system prompt and tools) come
 * back at every step: the copy made for the first is handed out again.
 */
function own(slice: string): string {
  let hash = OWN.get(slice);
  if (hash === undefined) {
    // Decoded from bytes: a new flat string, not a view of the text.
    hash = Buffer.from(slice, 'latin1').toString('latin1');
    if (OWN.size >= MAX_OWN) OWN.clear();
    OWN.set(hash, hash);
  }
  return hash;
}

const OWN = new Map<string, string>();
const MAX_OWN = 1024;

const PREFIX = 'sha256:';
const HEX_DIGITS = 64;
/** 0-9, a-f. */
const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 97 && c <= 102);
