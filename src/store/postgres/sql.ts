import { createHash } from 'node:crypto';
import type pg from 'pg';

/** Where queries go: the pool (each statement its own transaction) or one client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

const names = new Map<string, string>();

/** A statement's name for the server's prepared-statement cache: the same text, the same name. */
function nameOf(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `keel_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
    if (names.size < 1024) names.set(text, name);
  }
  return name;
}

/**
 * Queries, each prepared once per connection (named statements): the operations' SQL takes few
 * shapes, so the server parses and plans each once, not at every call.
 */
export class Sql {
  private readonly target: Queryable;

  constructor(target: Queryable) {
    this.target = target;
  }

  async rows<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    return (await this.target.query<R>({ name: nameOf(text), text, values })).rows;
  }

  async one<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R | undefined> {
    return (await this.rows<R>(text, values))[0];
  }

  /** Rows changed. */
  async run(text: string, values: unknown[] = []): Promise<number> {
    return (await this.target.query({ name: nameOf(text), text, values })).rowCount ?? 0;
  }

  /** A statement run as text, not prepared (transaction control, savepoints). */
  async raw(text: string): Promise<void> {
    await this.target.query(text);
  }
}

/** PostgreSQL's error code of a failure (SQLSTATE), if it is one. */
export const sqlState = (e: unknown): string | undefined => {
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
};

/** The constraint a failure names, if any. */
export const constraintOf = (e: unknown): string | undefined => {
  const c = (e as { constraint?: unknown }).constraint;
  return typeof c === 'string' ? c : undefined;
};

export const UNIQUE_VIOLATION = '23505';
export const FOREIGN_KEY_VIOLATION = '23503';
export const DEADLOCK_DETECTED = '40P01';
export const SERIALIZATION_FAILURE = '40001';
