/**
 * The archive store as an erasure participant (ADR-0039, ADR-0041): an erasure already removes the
 * archive of an erased session that was in it (`Retention.eraseArchived`, through the runtime's
 * erase); what this adds is the proof: `verify` reads every archive in the store (decompressed)
 * and its key for the needles, so an archive an erasure missed, or an erased id inside another
 * session's archive, is reported like a row of a table.
 */
import { gunzipSync } from 'node:zlib';
import type { ArchiveStore } from '../../archive/index.ts';
import type { ErasureFinding } from '../../store/index.ts';
import type { ErasureParticipant } from './participant.ts';

export function archiveErasureParticipant(archives: readonly ArchiveStore[]): ErasureParticipant {
  return {
    name: 'archives',
    // The runtime's erase of a session in an archive store removes its archive (Retention.eraseArchived).
    erase: () => Promise.resolve({}),
    scan: async (needles) => {
      const findings: ErasureFinding[] = [];
      for (const archive of archives)
        for (const key of await archive.list()) {
          const bytes = await archive.get(key);
          if (!bytes) continue;
          let text: string;
          try {
            text = gunzipSync(bytes).toString('utf8');
          } catch {
            text = Buffer.from(bytes).toString('utf8');
          }
          for (const needle of needles) {
            if (key.includes(needle))
              findings.push({ table: `archives:${archive.name}`, column: 'key', row: key, needle });
            // JSON escapes a needle's quotes and backslashes: look for both forms.
            const escaped = JSON.stringify(needle).slice(1, -1);
            if (text.includes(needle) || text.includes(escaped))
              findings.push({ table: `archives:${archive.name}`, column: 'content', row: key, needle });
          }
        }
      return findings;
    },
  };
}
