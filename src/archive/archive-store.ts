/**
 * Where archived sessions go (docs/operations.md): a small key → bytes store. Retention
 * puts a session's compressed export under a key, gets it back to restore it, and deletes it
 * when the session's deletion comes (erasure calls `delete` too). Keys are relative paths of
 * plain segments (`sessions/default/01J….jsonl.gz`): letters, digits and `._-=@+`, joined by `/`.
 */
export interface ArchiveStore {
  /** Names this store in what the database records of an archive (`dir:/var/keel/archive`, `s3:bucket/prefix`). */
  readonly name: string;
  /** Stores `bytes` under `key`, replacing what was there; resolves once they are durable. */
  put(key: string, bytes: Uint8Array): Promise<void>;
  /** The bytes under `key`, or undefined when there are none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** Removes `key`; false when there was nothing under it. */
  delete(key: string): Promise<boolean>;
  /** The keys that start with `prefix` (all without one), in no set order. */
  list(prefix?: string): Promise<string[]>;
}

/** Raised for a key that is not a relative path of plain segments. */
export class ArchiveKeyError extends Error {
  readonly code = 'invalid_archive_key';
  constructor(key: string) {
    super(`archive key ${JSON.stringify(key)} is not a relative path of plain segments (letters, digits, ._-=@+)`);
    this.name = 'ArchiveKeyError';
  }
}

const SEGMENT = /^[A-Za-z0-9._=@+-]+$/;

/** Checks a key (see ArchiveStore); returns it. */
export function checkedKey(key: string): string {
  const segments = key.split('/');
  if (key.length === 0 || key.length > 1024 || segments.some((s) => !SEGMENT.test(s) || s === '.' || s === '..'))
    throw new ArchiveKeyError(key);
  return key;
}

/** A key segment for any text (a tenant's name): URI-encoded, `%` written as `=`. */
export const keySegment = (text: string): string =>
  encodeURIComponent(text)
    .replace(/[!'()*~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%/g, '=');
