import type Database from 'better-sqlite3';
import { SchemaVersionError } from '../port/index.ts';
import { migrations } from './schema/index.ts';

/**
 * Versioned schema migrations, applied in order at open (the numbered files of ./schema). The
 * database's `user_version` records the last one applied; a database written by a newer Keel (a
 * higher version) is refused.
 */
export { migrations };

export const latestSchemaVersion = migrations.at(-1)!.version;

/** Brings the database up to the latest schema; refuses (SchemaVersionError) one written by a newer Keel. */
export function migrate(db: Database.Database): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > latestSchemaVersion) {
    throw new SchemaVersionError(
      `the database was written by a newer Keel (schema version ${current}; this Keel knows up to ${latestSchemaVersion}): upgrade Keel to open it`,
    );
  }
  for (const m of migrations) {
    // Re-read inside the write transaction: another process may have migrated meanwhile.
    db.transaction(() => {
      const v = db.pragma('user_version', { simple: true }) as number;
      if (v >= m.version) return;
      db.exec(m.sql);
      m.run?.(db);
      db.pragma(`user_version = ${m.version}`);
    }).immediate();
  }
}
