/**
 * The chaos test's database, on either backend: how its processes open the store, and a raw SQL
 * reader the checker uses to look at the tables themselves (not through Keel's code).
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { PostgresStore, SqliteStore, type Store } from '../../src/index.ts';
import { idKey } from '../../src/store/sqlite/id-keys.ts';

/** Where the chaos test's Keel lives: a SQLite file, or a PostgreSQL schema. */
export type ChaosBackend = { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string; schema: string };

export async function openChaosStore(b: ChaosBackend): Promise<Store> {
  if (b.kind === 'sqlite') return new SqliteStore({ path: b.path, busyTimeoutMs: 30_000 });
  const store = new PostgresStore({ url: b.url, schema: b.schema, poolSize: 6 });
  await store.opened();
  return store;
}

/** Raw, read-only SQL on the backend (`?` placeholders on both). */
export interface ChaosDb {
  readonly kind: ChaosBackend['kind'];
  all<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** The value a session id has in the log's own tables (SQLite keys UUIDs as 16 bytes). */
  logKey(sessionId: string): unknown;
  close(): Promise<void>;
}

export function openChaosDb(b: ChaosBackend): ChaosDb {
  if (b.kind === 'sqlite') {
    const db = new Database(b.path, { readonly: true, fileMustExist: true });
    db.pragma('busy_timeout = 30000');
    return {
      kind: 'sqlite',
      all: async <T>(sql: string, params: readonly unknown[] = []) => db.prepare(sql).all(...params) as T[],
      logKey: (id) => idKey(id),
      close: async () => {
        db.close();
      },
    };
  }
  const pool = new pg.Pool({ connectionString: b.url, max: 2, options: `-c search_path="${b.schema}"` });
  pool.on('error', () => {});
  return {
    kind: 'postgres',
    all: async <T>(sql: string, params: readonly unknown[] = []) => {
      let n = 0;
      const text = sql.replace(/\?/g, () => `$${++n}`);
      return (await pool.query(text, params as unknown[])).rows as T[];
    },
    logKey: (id) => id,
    close: () => pool.end(),
  };
}

/** A count from a `SELECT count(*) AS n …` (PostgreSQL answers bigint as text). */
export async function count(db: ChaosDb, sql: string, params: readonly unknown[] = []): Promise<number> {
  const [row] = await db.all<{ n: number | string }>(sql, params);
  return Number(row?.n ?? 0);
}
