/** SQLite schema version 8: blob refs. */
import type Database from 'better-sqlite3';
import { blobHashesIn } from '../../blob-refs.ts';
import { decodeBatch } from '../event-batch-codec.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 8,
  sql: `
      -- Erasure: a session's owner can erase it. What remains is the session row as a tombstone.
      ALTER TABLE sessions ADD COLUMN erased_at INTEGER;
      ALTER TABLE sessions ADD COLUMN erased_totals TEXT;

      -- Which sessions refer to each blob (blobs are shared by content): an erasure removes the
      -- blobs no other session refers to. Kept by append from the hashes in the events it writes.
      CREATE TABLE blob_refs (session_id BLOB NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, hash)) WITHOUT ROWID;
      CREATE INDEX blob_refs_hash ON blob_refs(hash);

      -- The log's rows may be removed only for a session being erased: it is listed here first, in
      -- the erasing transaction. Every other removal is still refused.
      CREATE TABLE erased_logs (session_id BLOB PRIMARY KEY) WITHOUT ROWID;
      DROP TRIGGER event_batches_no_delete;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
         AND (OLD.codec <> 0 OR NOT EXISTS (
          SELECT 1 FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.codec <> 0 AND s.first_seq <= OLD.first_seq AND s.last_seq >= OLD.last_seq
        ))
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      DROP TRIGGER entries_no_delete;
      CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
  run: indexBlobReferences,
};

/** Schema v8: which sessions refer to which blobs, from every stored event. */
function indexBlobReferences(db: Database.Database): void {
  const insert = db.prepare('INSERT OR IGNORE INTO blob_refs (session_id, hash) VALUES (?, ?)');
  const sessions = db.prepare('SELECT DISTINCT session_id FROM event_batches').pluck().all() as Array<Buffer | string>;
  const rows = db.prepare('SELECT first_seq, codec, data FROM event_batches WHERE session_id = ? ORDER BY first_seq');
  for (const key of sessions) {
    for (const r of rows.all(key) as Array<{ first_seq: number; codec: number; data: string | Buffer }>) {
      const json =
        r.codec === 0 || r.codec === 2
          ? String(r.data)
          : JSON.stringify(decodeBatch('?', r.first_seq, r.codec, r.data).map((e) => e.data));
      for (const hash of blobHashesIn(json)) insert.run(key, hash);
    }
  }
}
