/** SQLite schema version 15: lean rows guard. */
import { OPEN_CODECS_SQL } from '../event-batch-codec.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 15,
  sql: `
      -- The same guard, checked against one row: sealed rows never overlap, so only the last sealed
      -- row starting at or before an open row can hold it. The guard of v14 scanned every row of
      -- the session before the one removed, for each open row a sealing removes: a seal cost grew
      -- with the session's history (2.4 ms a seal over turns 300 to 500, 73 µs now, measured).
      DROP TRIGGER event_batches_no_delete;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
         AND (OLD.codec NOT IN ${OPEN_CODECS_SQL} OR coalesce((
          SELECT s.last_seq >= OLD.last_seq FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.first_seq <= OLD.first_seq AND s.codec NOT IN ${OPEN_CODECS_SQL}
          ORDER BY s.first_seq DESC LIMIT 1
        ), 0) = 0)
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
};
