/** SQLite schema version 3: tenants. */
import type { SqliteMigration } from './migration.ts';

export const migration: SqliteMigration = {
  version: 3,
  sql: `
      -- Every session (and so every run) belongs to a tenant; API keys are bound to one.
      ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
      CREATE INDEX sessions_tenant ON sessions(tenant, id);

      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT,
        hash TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        rate_per_minute INTEGER,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      );

      CREATE TABLE idempotency_keys (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status INTEGER NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, key)
      );
    `,
};
