import { contentHash } from '../core/index.ts';

/**
 * Large or repeated payloads (system prompts, tool schemas, big tool outputs, files) live once in a
 * content-addressed table; events hold `{ "$blob": "sha256:…" }` in their place. A long session then
 * stores its system prompt once, not at every request.
 */
export const BLOB_MIN_BYTES = 512;

export interface BlobRef {
  $blob: string;
}

export const isBlobRef = (v: unknown): v is BlobRef =>
  typeof v === 'object' && v !== null && typeof (v as BlobRef).$blob === 'string' && Object.keys(v).length === 1;

export const blobHash: (json: string) => string = contentHash;

/**
 * Moves the named top-level fields of `data` into blobs when their JSON is large enough. Any
 * top-level value that looks like a reference (named or not: readers inflate every top-level
 * reference) always goes to a blob, so reading back is unambiguous.
 */
export function extractBlobs(
  data: Record<string, unknown>,
  fields: readonly string[] | undefined,
): { data: Record<string, unknown>; blobs: Array<{ hash: string; data: string }> } {
  let out = data;
  const blobs: Array<{ hash: string; data: string }> = [];
  // for…in, not Object.entries: no array per field (several events per step). Event data are
  // plain objects (JSON), with no inherited enumerable keys.
  for (const f in data) {
    const value = data[f];
    if (value === undefined || value === null) continue;
    const lookalike = isBlobRef(value);
    if (!lookalike && !fields?.includes(f)) continue;
    const text = JSON.stringify(value);
    if (text.length < BLOB_MIN_BYTES && !lookalike) continue;
    const hash = blobHash(text);
    blobs.push({ hash, data: text });
    if (out === data) out = { ...data };
    out[f] = { $blob: hash } satisfies BlobRef;
  }
  return { data: out, blobs };
}

/** The blob hashes a stored event's data refers to. */
export function blobRefsOf(data: unknown): string[] {
  if (typeof data !== 'object' || data === null) return [];
  const out: string[] = [];
  for (const v of Object.values(data)) if (isBlobRef(v)) out.push(v.$blob);
  return out;
}

/**
 * Every blob a stored event needs: its `$blob` references, and the content hashes a request
 * header (v2) holds for its system prompt and tool schemas (never inflated into the event: they
 * are the same for every request of an agent version, and read only by who needs them).
 */
export function contentRefsOf(type: string, v: number, data: unknown): string[] {
  const refs = blobRefsOf(data);
  if (type === 'request/header' && v >= 2 && typeof data === 'object' && data !== null) {
    const d = data as { system?: unknown; tools?: unknown };
    if (typeof d.system === 'string') refs.push(d.system);
    if (typeof d.tools === 'string') refs.push(d.tools);
  }
  return refs;
}

export class MissingBlobError extends Error {
  readonly code = 'missing_blob';
  constructor(hash: string) {
    super(`blob ${hash} is referenced but not stored`);
    this.name = 'MissingBlobError';
  }
}

/** Puts blob contents back in place of their references. */
export function inflateBlobs(data: unknown, blobs: ReadonlyMap<string, string>): unknown {
  if (typeof data !== 'object' || data === null) return data;
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(data)) {
    if (!isBlobRef(v)) continue;
    const text = blobs.get(v.$blob);
    if (text === undefined) throw new MissingBlobError(v.$blob);
    out ??= { ...(data as Record<string, unknown>) };
    out[k] = JSON.parse(text) as unknown;
  }
  return out ?? data;
}
