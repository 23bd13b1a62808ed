/** SQLite schema version 5: event batches. */
import type Database from 'better-sqlite3';
import { type StoredEvent } from '../../port/index.ts';
import { encodeOpen0, seal, SEALED_CODEC } from '../event-batch-codec.ts';
import { idKey, idKeyOrNull } from '../id-keys.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 5,
  sql: `
      -- The log in rows of consecutive events (ADR-0009): an append writes one open row (codec 0,
      -- JSON); sealing replaces a session's open rows with one sealed row (codec 1, compressed)
      -- holding the same events. Every seq of a session is in exactly one row once a transaction
      -- commits; the rows after sealed_seq are the open ones. Ids are stored as their 16 bytes
      -- when they are UUIDs (see id-keys.ts).
      CREATE TABLE event_batches (
        session_id BLOB NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        codec INTEGER NOT NULL,
        data BLOB NOT NULL
      );
      -- With the codec: a sealed row and the open rows it replaces coexist inside the sealing
      -- transaction.
      CREATE UNIQUE INDEX event_batches_position ON event_batches(session_id, first_seq, codec);
      ALTER TABLE sessions ADD COLUMN sealed_seq INTEGER NOT NULL DEFAULT 0;

      -- The conversation tree: every entry event by its session and id, with its seq and its parent.
      -- Event ids are unique within their session (an import under a new session id keeps them).
      CREATE TABLE entries (
        session_id BLOB NOT NULL,
        id BLOB NOT NULL,
        seq INTEGER NOT NULL,
        parent_id BLOB,
        PRIMARY KEY (session_id, id)
      ) WITHOUT ROWID;

      -- The log is append-only: no code path may change or remove an event. A row is never
      -- changed; an open row may only be removed once a sealed row holds its events.
      CREATE TRIGGER event_batches_no_update BEFORE UPDATE ON event_batches
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN OLD.codec <> 0 OR NOT EXISTS (
          SELECT 1 FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.codec <> 0 AND s.first_seq <= OLD.first_seq AND s.last_seq >= OLD.last_seq
        )
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
      CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
  run: moveEventsIntoBatches,
};

/** At most this many events of a session in one sealed row when an older database's log is moved. */
const MIGRATED_ROW = 1024;

type V4EventRow = {
  id: string;
  session_id: string;
  seq: number;
  type: string;
  v: number;
  time: number;
  run_id: string | null;
  turn: number | null;
  step: number | null;
  entry: number;
  parent_id: string | null;
  ignorable: number;
  data: string;
};

/**
 * Schema v5: the one-row-per-event log of v1–v4 moved into sealed rows of up to MIGRATED_ROW
 * consecutive events of a session, every event kept as it was; then the old table goes.
 */
function moveEventsIntoBatches(db: Database.Database): void {
  const insertRow = db.prepare(
    'INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES (?, ?, ?, ?, ?)',
  );
  const insertEntry = db.prepare('INSERT INTO entries (id, session_id, seq, parent_id) VALUES (?, ?, ?, ?)');
  const sealedUpTo = db.prepare('UPDATE sessions SET sealed_seq = ? WHERE id = ?');
  // One session at a time, a page at a time (a connection cannot write while it iterates a read).
  const sessions = db.prepare('SELECT DISTINCT session_id FROM events').pluck().all() as string[];
  const page = db.prepare('SELECT * FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT 1024');
  for (const sessionId of sessions) {
    let after = 0;
    for (;;) {
      const rows = page.all(sessionId, after) as V4EventRow[];
      if (rows.length === 0) break;
      // Seqs are 1..last_seq without a gap; a row holds consecutive ones.
      let run: StoredEvent[] = [];
      const flush = () => {
        if (run.length > 0)
          insertRow.run(idKey(sessionId), run[0]!.seq, run.at(-1)!.seq, SEALED_CODEC, seal([encodeOpen0(run)]));
        run = [];
      };
      for (const r of rows) {
        if (run.length > 0 && (run.at(-1)!.seq + 1 !== r.seq || run.length >= MIGRATED_ROW)) flush();
        const e: StoredEvent = {
          id: r.id,
          sessionId,
          seq: r.seq,
          type: r.type,
          v: r.v,
          time: r.time,
          entry: r.entry === 1,
          ignorable: r.ignorable === 1,
          data: JSON.parse(r.data) as unknown,
        };
        if (r.run_id !== null) e.runId = r.run_id;
        if (r.turn !== null) e.turn = r.turn;
        if (r.step !== null) e.step = r.step;
        if (r.parent_id !== null) e.parentId = r.parent_id;
        run.push(e);
        if (e.entry) insertEntry.run(idKey(e.id), idKey(sessionId), e.seq, idKeyOrNull(r.parent_id));
      }
      flush();
      after = rows.at(-1)!.seq;
    }
    sealedUpTo.run(after, sessionId);
  }
  db.exec(`
    DROP TRIGGER events_no_update;
    DROP TRIGGER events_no_delete;
    DROP TABLE events;
  `);
}
