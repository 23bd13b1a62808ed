/** SQLite schema version 28 (the erasure audit): see its comment. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  // The erasure audit (issue 42, ADR-0041): that an erasure happened, its scope, a hash of its
  // target (never the target), who asked and when, and how many rows of each kind it removed. A new
  // table only.
  version: 28,
  sql: `
    CREATE TABLE IF NOT EXISTS erasures (
      id TEXT PRIMARY KEY,
      scope TEXT NOT NULL CHECK (scope IN ('session', 'tenant', 'before')),
      target_hash TEXT NOT NULL,
      by TEXT NOT NULL,
      at INTEGER NOT NULL,
      counts TEXT NOT NULL DEFAULT '{}'
    );
  `,
};
