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
      const hash = json.slice(at, end);
      if (!out.includes(hash)) out.push(hash);
      at = json.indexOf(PREFIX, end);
    } else at = json.indexOf(PREFIX, at + 1);
  }
  return out;
}

const PREFIX = 'sha256:';
const HEX_DIGITS = 64;
/** 0-9, a-f. */
const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 97 && c <= 102);
