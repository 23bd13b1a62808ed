/** PostgreSQL schema version 19 (the erasure audit): see its comment. */
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  // The erasure audit (issue 42, ADR-0041): that an erasure happened, its scope, a hash of its
  // target (never the target), who asked and when, and how many rows of each kind it removed. A new
  // table only.
  version: 19,
  sql: `
    CREATE TABLE IF NOT EXISTS erasures (
      id text PRIMARY KEY,
      scope text NOT NULL CHECK (scope IN ('session', 'tenant', 'before')),
      target_hash text NOT NULL,
      by text NOT NULL,
      at bigint NOT NULL,
      counts text NOT NULL DEFAULT '{}'
    );
  `,
};
