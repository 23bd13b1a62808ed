/**
 * Blobs: content stored once by hash (`sha256:` of its text) that events refer to (ADR-0040). The
 * database keeps them (the events namespace's `putBlobs`, `getBlobs`, `blobInfo`, `blobHead`,
 * `blobTenant`); `BlobStore` is the port a large payload's content goes through, so that another
 * place (an archive store) can hold it instead of the database.
 */

/**
 * The first characters of a large payload (a blob with a media type) are also kept apart, in a
 * small row of their own: a model's truncated view reads them without the rest (SQLite reads a
 * value whole, 50 MB for a 50 MB result). A view of more characters reads the blob itself.
 */
export const BLOB_HEAD_CHARS = 64 * 1024;

/** The head kept of a large payload's text: its first BLOB_HEAD_CHARS characters, never half a surrogate pair. */
export function keptHead(data: string): string {
  const head = data.slice(0, BLOB_HEAD_CHARS);
  const last = head.charCodeAt(head.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? head.slice(0, -1) : head;
}

/** A blob to store: its hash, its text, and for a large payload what it is. */
export interface NewBlob {
  hash: string;
  /** The text whose hash is `hash`. */
  data: string;
  /** The media type of the content (a large payload's); absent for the JSON of an event field. */
  mediaType?: string;
  /** `base64`: `data` is the base64 text of the content's bytes (an attachment's file). */
  encoding?: 'base64';
}

/** What is known of a stored blob without reading it. */
export interface BlobInfo {
  hash: string;
  /** UTF-8 bytes of the stored text. */
  size: number;
  /** null for a blob stored without one (the JSON of an event field: application/json). */
  mediaType: string | null;
  encoding: 'base64' | null;
}

/**
 * Where large payloads are stored and read. `databaseBlobs` (src/session/blob-store.ts) keeps them
 * in the store's blobs table, in the appending transaction; an archive store may implement it
 * (issue 42, retention and archives): then they are put before the events that refer to them are
 * appended (content-addressed: a put whose append rolls back leaves an unreferenced blob, never a
 * reference to nothing).
 */
export interface BlobStore {
  readonly kind: string;
  put(blobs: readonly NewBlob[]): Promise<void>;
  /** Whole texts, by hash; missing hashes are absent. */
  get(hashes: readonly string[]): Promise<Map<string, string>>;
  info(hashes: readonly string[]): Promise<Map<string, BlobInfo>>;
  /** The first `chars` characters of a blob's text (all of it when shorter); undefined when missing. */
  head(hash: string, chars: number): Promise<string | undefined>;
}
