/** SQLite schema version 14: lean rows. */
import { OPEN_CODECS_SQL } from '../event-batch-codec.ts';
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 14,
  sql: `
      -- Lean rows (ADR-0020): appends write open rows of codec 2, sealing writes codec 3. Codecs 0
      -- and 2 are open, 1 and 3 sealed: an open row of either may be removed once a sealed row of
      -- either holds its seqs.
      DROP TRIGGER event_batches_no_delete;
      CREATE TRIGGER event_batches_no_delete BEFORE DELETE ON event_batches
        WHEN NOT EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id)
         AND (OLD.codec NOT IN ${OPEN_CODECS_SQL} OR NOT EXISTS (
          SELECT 1 FROM event_batches s
          WHERE s.session_id = OLD.session_id AND s.codec NOT IN ${OPEN_CODECS_SQL} AND s.first_seq <= OLD.first_seq AND s.last_seq >= OLD.last_seq
        ))
        BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
    `,
};
