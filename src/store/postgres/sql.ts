import { createHash } from 'node:crypto';
import type pg from 'pg';
import { StoreError } from '../port/index.ts';
import { NUL_REFUSAL } from '../plain-text.ts';

/**
 * Where queries go: the pool (each statement its own transaction), the batch of reads outside
 * transactions (read-batch.ts), or one client inside a transaction.
 */
export interface Queryable {
  query<R extends pg.QueryResultRow>(query: pg.QueryConfig | string): Promise<pg.QueryResult<R>>;
}

/**
 * The socket under a node-postgres client, to hold statements in its buffer (cork) and write them
 * together (uncork); undefined where there is none to reach (not a client, or another driver).
 */
export function socketOf(target: unknown): { cork(): void; uncork(): void } | undefined {
  const s = (target as { connection?: { stream?: { cork?: unknown; uncork?: unknown } } }).connection?.stream;
  return typeof s?.cork === 'function' && typeof s.uncork === 'function'
    ? (s as { cork(): void; uncork(): void })
    : undefined;
}

const names = new Map<string, string>();

/** A statement's name for the server's prepared-statement cache: the same text, the same name. */
export function statementName(text: string): string {
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
  protected readonly target: Queryable;

  constructor(target: Queryable) {
    this.target = target;
  }

  /** Called before each prepared statement (a transaction begins there, see TransactionSql). */
  protected async before(): Promise<void> {}

  /** Called right before each statement is handed to the connection. */
  protected sending(): void {}

  private readonly submitWaiters: Array<() => void> = [];

  /** Calls `fn` once the next prepared statement was handed to the connection (not BEGIN, a savepoint or COMMIT). */
  onNextStatement(fn: () => void): void {
    this.submitWaiters.push(fn);
  }

  async rows<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    await this.before();
    return (await this.query<R>({ name: statementName(text), text, values })).rows;
  }

  async one<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R | undefined> {
    return (await this.rows<R>(text, values))[0];
  }

  /**
   * Rows of a statement planned for its values each time (unnamed, not kept): for a query whose
   * best plan depends on them, as a tenant's share of the rows decides whether its index is the
   * way in. A cached generic plan would be planned for an average tenant.
   */
  async rowsPlannedForValues<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    await this.before();
    return (await this.query<R>({ text, values })).rows;
  }

  /** Rows changed. */
  async run(text: string, values: unknown[] = []): Promise<number> {
    await this.before();
    return (await this.query({ name: statementName(text), text, values })).rowCount ?? 0;
  }

  /**
   * A statement, its refusal of the NUL character (U+0000, which text and jsonb cannot hold) told
   * as what it is: a value the store cannot keep (`validation`), not a failure of the store. The
   * layers above refuse NUL where they keep text (plain-text.ts); this is what is left when one
   * reaches the database all the same.
   */
  private async query<R extends pg.QueryResultRow>(q: {
    name?: string;
    text: string;
    values: unknown[];
  }): Promise<pg.QueryResult<R>> {
    try {
      this.sending();
      const answer = this.target.query<R>(q);
      for (const fn of this.submitWaiters.splice(0)) fn();
      return await answer;
    } catch (e) {
      const state = sqlState(e);
      if (state === CHARACTER_NOT_IN_REPERTOIRE || state === UNTRANSLATABLE_CHARACTER) {
        throw new StoreError('validation', `a value holds a character PostgreSQL cannot store (${NUL_REFUSAL})`, {
          cause: e,
        });
      }
      throw e;
    }
  }

  /** A statement run as text, not prepared (transaction control, savepoints). */
  async raw(text: string): Promise<void> {
    this.sending();
    await this.target.query(text);
  }
}

/**
 * A transaction's statements, in as few round trips and writes as it can. The store's connections
 * pipeline (node-postgres `pipeline`): BEGIN and each SAVEPOINT are written without waiting for
 * their answer, so they travel with the statement after them; a savepoint is never released
 * (COMMIT ends it with the rest; only a failure rolls back to it); and a transaction that ran
 * nothing sends nothing. What was written unanswered is checked at the end: a failure of it failed
 * the statements after it too. The statements handed to the connection in one turn of the event
 * loop (BEGIN and the first statement, reads made side by side) are held in the socket's buffer
 * (cork) until that turn's microtasks are done, and written together: one write, not one each.
 */
export class TransactionSql extends Sql {
  private begun = false;
  private savepoints = 0;
  private readonly unanswered: Array<Promise<unknown>> = [];
  /** The socket is corked until the next tick. */
  private corked = false;

  /** Writes a statement without waiting for its answer (see the class). */
  private send(text: string): void {
    const answer = this.raw(text);
    answer.catch(() => {});
    this.unanswered.push(answer);
  }

  protected override sending(): void {
    if (this.corked) return;
    const stream = socketOf(this.target);
    if (!stream) return;
    stream.cork();
    this.corked = true;
    // A tick comes once the microtasks queued now are done: every statement they send is in by then.
    process.nextTick(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  protected override async before(): Promise<void> {
    if (this.begun) return;
    this.begun = true;
    this.send('BEGIN');
  }

  /** Runs `fn` so that its failure leaves nothing behind and the transaction usable. */
  async savepoint<T>(fn: () => Promise<T>): Promise<T> {
    const name = `keel_sp${++this.savepoints}`;
    await this.before();
    this.send(`SAVEPOINT ${name}`);
    try {
      return await fn();
    } catch (e) {
      await this.raw(`ROLLBACK TO SAVEPOINT ${name}`);
      throw e;
    }
  }

  /** Statements to run last, written with COMMIT (see `atCommit`). */
  private readonly last: Array<{ text: string; values: unknown[] }> = [];

  /**
   * Runs a write as the transaction's last statement, written in the same round trip as its
   * COMMIT: a lock it takes on a row every transaction of its kind updates (a tenant's pass in
   * fair dispatch) is held for the commit alone, not for the rest of the transaction.
   */
  atCommit(text: string, values: unknown[]): void {
    this.last.push({ text, values });
  }

  async commit(): Promise<void> {
    if (!this.begun) return;
    // Written unanswered before COMMIT: a failure of one fails the transaction, whose COMMIT
    // the server then answers as a rollback; the failure is what is thrown.
    const lastAnswers = this.last.splice(0).map(({ text, values }) => {
      // Handed to the connection now (it pipelines), before COMMIT is, in the same write.
      this.sending();
      const answer: Promise<unknown> = this.target.query({ name: statementName(text), text, values });
      answer.catch(() => {});
      return answer;
    });
    await this.raw('COMMIT');
    for (const answer of [...this.unanswered, ...lastAnswers]) await answer;
  }

  async rollback(): Promise<void> {
    if (this.begun) await this.raw('ROLLBACK');
  }
}

/** PostgreSQL's error code of a failure (SQLSTATE), if it is one. */
export const sqlState = (e: unknown): string | undefined => {
  const code = (e as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
};

/** The constraint a failure names, if any. */
export const constraintOf = (e: unknown): string | undefined => {
  const c = (e as { constraint?: unknown }).constraint;
  return typeof c === 'string' ? c : undefined;
};

export const UNIQUE_VIOLATION = '23505';
/** A text value with NUL (0x00), and a JSON \u0000 cast to jsonb. */
export const CHARACTER_NOT_IN_REPERTOIRE = '22021';
export const UNTRANSLATABLE_CHARACTER = '22P05';
export const FOREIGN_KEY_VIOLATION = '23503';
export const DEADLOCK_DETECTED = '40P01';
export const SERIALIZATION_FAILURE = '40001';
/** A statement sent after another one failed, in the same transaction (before a rollback). */
export const IN_FAILED_TRANSACTION = '25P02';
