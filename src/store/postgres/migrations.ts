import type pg from 'pg';
import { SchemaVersionError } from '../port/index.ts';
import { migrations } from './schema/index.ts';

/**
 * Versioned schema migrations for PostgreSQL (the numbered files of ./schema), applied in order at
 * open, each in its own transaction under an advisory lock (several nodes may start at once).
 * `keel_schema` records the versions applied; a schema written by a newer Keel (a higher version)
 * is refused.
 */
export { migrations };

export const latestSchemaVersion = migrations.at(-1)!.version;

/** A lock id of Keel's migrations, per schema (pg_advisory_xact_lock takes a bigint). */
const MIGRATION_LOCK = 0x6b65656c; // "keel"

/**
 * Brings the schema up to the latest version; refuses (SchemaVersionError) one written by a newer
 * Keel. Nodes starting together take turns (an advisory lock); each migration commits on its own.
 */
export async function migrate(client: pg.ClientBase, schema: string): Promise<void> {
  const ident = quoteIdent(schema);
  await client.query('BEGIN');
  try {
    // A migration may take long, and the nodes starting meanwhile wait for it: the store's bounds
    // (timeouts.ts) are for its operations, not for this transaction.
    await client.query('SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0');
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [MIGRATION_LOCK, schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${ident}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${ident}.keel_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL)`,
    );
    const { rows } = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${ident}.keel_schema`);
    const current = rows[0]?.v ?? 0;
    if (current > latestSchemaVersion) {
      throw new SchemaVersionError(
        `the database schema ${schema} was written by a newer Keel (schema version ${current}; this Keel knows up to ${latestSchemaVersion}): upgrade Keel to open it`,
      );
    }
    for (const m of migrations) {
      if (m.version <= current) continue;
      await client.query(`SET LOCAL search_path TO ${ident}`);
      await client.query(m.sql);
      await client.query(`INSERT INTO ${ident}.keel_schema (version, applied_at) VALUES ($1, $2)`, [
        m.version,
        Date.now(),
      ]);
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/** An SQL identifier, quoted. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
