import type Database from 'better-sqlite3';

/**
 * Turns a database of the latest schema back into schema v17's layout (before ADR-0028): the open
 * rows back in event_batches beside the sealed ones under v15's guard, no open_rows table, no log
 * numbers. For the tests of what a newer Keel does with a file an older one wrote.
 */
export function asSchemaV17(db: Database.Database): void {
  db.exec(`
    DROP TRIGGER event_batches_sealed_only;
    DROP TRIGGER event_batches_no_delete;
    INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data, leaf_id, turn)
      SELECT session_id, pos & 4294967295, last_seq, codec, data, leaf_id, turn FROM open_rows ORDER BY pos;
    CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
      WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
       AND (OLD.codec NOT IN (0, 2) OR coalesce((
        SELECT s.last_seq >= OLD.last_seq FROM event_batches s
        WHERE s.session_id = OLD.session_id AND s.first_seq <= OLD.first_seq AND s.codec NOT IN (0, 2)
        ORDER BY s.first_seq DESC LIMIT 1
      ), 0) = 0)
      BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    DROP TABLE open_rows;
    DROP INDEX sessions_log_no;
    ALTER TABLE sessions DROP COLUMN log_no;
    PRAGMA user_version = 17;
  `);
}

/** Every row of the log, sealed (event_batches) and open (open_rows), by first seq: codec, first and last seq, bytes. */
export const LOG_ROWS_SQL = `SELECT codec, first_seq, last_seq, length(data) AS bytes FROM event_batches
  UNION ALL SELECT codec, pos & 4294967295, last_seq, length(data) FROM open_rows ORDER BY 2, 1`;
