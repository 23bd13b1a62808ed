/**
 * The content hashes a stretch of event JSON refers to (blob references, header hashes): every SQL
 * backend records them per session, so that erasing a session removes the blobs only it used.
 */
export function blobHashesIn(json: string): string[] {
  if (!json.includes('sha256:')) return [];
  return [...new Set(json.match(/sha256:[0-9a-f]{64}/g) ?? [])];
}
