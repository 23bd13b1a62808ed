/**
 * A session's archive: its export (src/session/transfer.ts, the format of `keel export`), gzip
 * compressed, under a key of its own in the archive store; and the way back, with every id kept.
 */
import { gunzipSync, gzipSync } from 'node:zlib';
import { keySegment, type ArchiveStore } from '../archive/index.ts';
import { exportSession, importSession, type SessionLog } from '../session/index.ts';
import type { SessionRecord, StoreOps } from '../store/index.ts';

/** Where a session's archive goes in the store. */
export const archiveKey = (tenant: string, sessionId: string): string =>
  `sessions/${keySegment(tenant)}/${keySegment(sessionId)}.jsonl.gz`;

/** The session's export, compressed, and how many events it holds. */
export async function packSession(log: SessionLog, sessionId: string): Promise<{ bytes: Uint8Array; events: number }> {
  const lines: string[] = [];
  for await (const line of exportSession(log, sessionId)) lines.push(line);
  const header = JSON.parse(lines[0]!) as { session: { lastSeq: number } };
  return { bytes: gzipSync(lines.join('\n') + '\n'), events: header.session.lastSeq };
}

/** Puts the session's events back from its archive's bytes, ids kept; `within` runs in the same transaction. */
export async function unpackSession(
  log: SessionLog,
  bytes: Uint8Array,
  within: (tx: StoreOps, session: SessionRecord) => Promise<void>,
): Promise<SessionRecord> {
  return importSession(log, gunzipSync(bytes).toString('utf8'), { ids: 'restore', within });
}

/** The store an archive row names, if it is this one. */
export function storeFor(stores: readonly ArchiveStore[], name: string): ArchiveStore | undefined {
  return stores.find((s) => s.name === name);
}
