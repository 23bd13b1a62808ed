/**
 * The database as the blob store of large payloads (ADR-0040): the blobs table of the store, read
 * and written through the operations given (a transaction's, when inside one). The default; an
 * archive store is another `BlobStore` (src/store/port/blobs.ts), passed as `largePayloads.store`.
 */
import type { BlobInfo, BlobStore, NewBlob, StoreOps } from '../store/index.ts';

export function databaseBlobs(ops: StoreOps): BlobStore {
  return {
    kind: 'database',
    put: (blobs: readonly NewBlob[]) => ops.events.putBlobs(blobs),
    get: (hashes: readonly string[]) => ops.events.getBlobs(hashes),
    info: (hashes: readonly string[]): Promise<Map<string, BlobInfo>> => ops.events.blobInfo(hashes),
    head: (hash: string, chars: number) => ops.events.blobHead(hash, chars),
  };
}

/** Blobs held in memory (an import's, before they are stored): a `BlobStore` over a map of texts. */
export function mapBlobs(texts: ReadonlyMap<string, string>): BlobStore {
  return {
    kind: 'memory',
    put: () => Promise.reject(new Error('mapBlobs: read only')),
    get: (hashes) => Promise.resolve(new Map(hashes.flatMap((h) => (texts.has(h) ? [[h, texts.get(h)!]] : [])))),
    info: () => Promise.resolve(new Map()),
    head: (hash, chars) => Promise.resolve(texts.get(hash)?.slice(0, chars)),
  };
}

/**
 * A store of large payloads other than the database, read with the database behind it: what was
 * stored before it was configured, or imported (an import writes to the database), stays readable.
 */
export function layeredBlobs(primary: BlobStore, database: BlobStore): BlobStore {
  const missing = (hashes: readonly string[], found: ReadonlyMap<string, unknown>) =>
    hashes.filter((h) => !found.has(h));
  return {
    kind: primary.kind,
    put: (blobs) => primary.put(blobs),
    get: async (hashes) => {
      const found = await primary.get(hashes);
      const rest = missing(hashes, found);
      if (rest.length > 0) for (const [h, v] of await database.get(rest)) found.set(h, v);
      return found;
    },
    info: async (hashes) => {
      const found = await primary.info(hashes);
      const rest = missing(hashes, found);
      if (rest.length > 0) for (const [h, v] of await database.info(rest)) found.set(h, v);
      return found;
    },
    head: async (hash, chars) => (await primary.head(hash, chars)) ?? database.head(hash, chars),
  };
}
